"""Helpers for the HTTP API's tests: an httpx client on a server, the
bearer header, and a Server-Sent Events reader (every wait bounded)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import attrs
import httpx

from sync_server.testing.server import WAIT

# Bytes: the kernel's send buffer of the server's end of a stream that its
# reader stopped reading (the smallest Linux keeps is about this).
SMALL_SEND_BUFFER = 4096


def small_send_buffers(server: Any) -> None:
    """The server's end of each open event stream gets a small kernel send
    buffer. A reader that stops reading fills the kernel's buffers before
    the stream's outbox holds a byte: on loopback they grow to megabytes,
    thousands of patches of a test's commands; with these the outbox fills
    after a few, and what the test checks (its budget, the cut) is the
    same."""
    assert server.api is not None
    for stream in server.api.streams:
        sock = stream.conn.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_SEND_BUFFER)


def bearer(token: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **headers}


def api(base_url: str, **kw: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base_url, timeout=WAIT, **kw)


@attrs.frozen
class Event:
    event: str
    id: int | None
    data: dict[str, Any]


class EventReader:
    """The events of one stream, as they come; `raw` keeps every byte."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.raw = bytearray()
        self._lines = self._read_lines()

    async def _read_lines(self) -> AsyncIterator[str]:
        buffer = b""
        async for chunk in self.response.aiter_raw():
            self.raw += chunk
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                yield line.decode()

    async def next(self) -> Event:
        """The next event (comment lines skipped); EOFError at the stream's end."""
        fields: dict[str, str] = {}
        async with asyncio.timeout(WAIT):
            async for line in self._lines:
                if line.startswith(":"):
                    continue
                if not line:
                    if fields:
                        raw_id = fields.get("id")
                        return Event(
                            fields.get("event", "message"),
                            int(raw_id) if raw_id is not None else None,
                            json.loads(fields.get("data", "null")),
                        )
                    continue
                name, _, value = line.partition(": ")
                fields[name] = value
        raise EOFError("the stream ended")

    async def until_v(self, v: int) -> list[Event]:
        """Events up to the one whose id is `v`."""
        got = []
        while True:
            e = await self.next()
            got.append(e)
            if e.id is not None and e.id >= v:
                return got


@contextlib.asynccontextmanager
async def events(
    client: httpx.AsyncClient, room: str, token: str, **headers: str
) -> AsyncIterator[EventReader]:
    """A stream of `room`'s events for `token`'s user; asserts it opened."""
    path = f"/api/v1/rooms/{room}/events"
    async with client.stream("GET", path, headers=bearer(token, **headers)) as r:
        if r.status_code != 200:
            await r.aread()
            raise AssertionError(f"stream refused: {r.status_code} {r.text}")
        assert r.headers["content-type"].startswith("text/event-stream")
        yield EventReader(r)
