"""Clients follow cluster redirects (`redirect` frame, close 4302): to the
node named, with the same hello, at most MAX_REDIRECTS hops in a row."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import msgpack
from websockets.asyncio.server import ServerConnection, serve

from client_stub import Client
from sync_server.wire import protocol
from tests.helpers.server import Table


@contextlib.asynccontextmanager
async def redirector(to: str | None) -> AsyncIterator[tuple[str, list[dict]]]:
    """A node that serves no room: every hello gets a redirect to `to`
    (None: to itself). Yields its URL and the hellos it saw."""
    hellos: list[dict] = []
    box: dict[str, str] = {}

    async def handler(ws: ServerConnection) -> None:
        hellos.append(msgpack.unpackb(await ws.recv()))
        await ws.send(msgpack.packb(protocol.redirect(to or box["url"])))
        await ws.close(protocol.CLOSE_REDIRECT, "served elsewhere")

    async with serve(handler, "127.0.0.1", 0, subprotocols=[protocol.MSGPACK]) as server:
        box["url"] = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
        yield box["url"], hellos


async def test_the_python_client_follows_a_redirect_and_resumes(vtt_table: Table) -> None:
    async with (
        redirector(vtt_table.url) as (url, hellos),
        Client(url, vtt_table.tokens["obs"], vtt_table.room) as c,
    ):
        assert c.version == 6 and c.role == "observer"
        assert hellos == [protocol.hello(vtt_table.tokens["obs"], vtt_table.room)]


async def test_a_redirect_loop_is_reported_not_followed_forever(vtt_table: Table) -> None:
    statuses: list[tuple[str, str]] = []
    async with redirector(None) as (url, hellos):
        c = Client(url, vtt_table.tokens["obs"], vtt_table.room, backoff_initial=5.0)
        c.on_status(lambda status, detail: statuses.append((status, detail)))
        c.start()
        async with asyncio.timeout(5):
            while not any(s == "disconnected" for s, _ in statuses):
                await asyncio.sleep(0.01)
        await c.close()
    assert len(hellos) == 1 + protocol.MAX_REDIRECTS
    detail = next(d for s, d in statuses if s == "disconnected")
    assert f"redirected {protocol.MAX_REDIRECTS + 1} times" in detail
