"""The fast transport (`serve --transport picows`, issue 22): what it
serves, what it refuses to serve and says so, the limits a client meets on
both transports, and the clear error without the [fast] extra. The
protocol itself runs on both transports in the parametrized modules
(tests/helpers/server.py: `on_both_transports`)."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from sync_server.core.limits import MAX_FRAME_BYTES
from sync_server.hosting import picows_transport
from sync_server.hosting.config import Config
from sync_server.ops import cli, serving, settings
from sync_server.wire import frames
from sync_server.wire.codec import CODECS
from tests.helpers.server import (
    PROTOS,
    WAIT,
    create_table,
    on_both_transports,
    open_ws,
    running_server,
)

pytestmark = on_both_transports


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=WAIT) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


async def test_the_get_routes_are_served_and_the_http_api_only_by_websockets(
    tmp_path: Path, transport: str
) -> None:
    async with running_server(tmp_path / "data") as srv:
        health = await asyncio.to_thread(get, srv.http_url + "/healthz")
        page = await asyncio.to_thread(get, srv.http_url + "/")
        assert health[0] == 200 and b'"status": "ok"' in health[1]
        assert page[0] == 200 and b"<html" in page[1]
        for path in ("/api/v1/openapi.json", "/admin/rooms"):
            status, body = await asyncio.to_thread(get, srv.http_url + path)
            if transport == "picows":  # said, not a silent 404
                assert status == 501 and b"--transport websockets" in body, (path, body)
            else:
                assert status != 501, path


async def test_a_message_over_the_frame_bound_is_refused_1009_fragments_included(
    tmp_path: Path,
) -> None:
    async with running_server(tmp_path / "data") as srv:
        half = MAX_FRAME_BYTES // 2 + 1
        for message in (b"x" * (MAX_FRAME_BYTES + 1), [b"x" * half, b"x" * half]):
            ws = await open_ws(srv.url)
            with pytest.raises(ConnectionClosed):
                await ws.send(message if isinstance(message, bytes) else iter(message))
                async with asyncio.timeout(WAIT):
                    await ws.recv()
            assert ws.close_code == 1009, ws.close_code


def test_the_fast_transport_without_its_extra_is_refused_with_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, transport: str
) -> None:
    monkeypatch.setattr(picows_transport, "picows", None)

    async def never() -> int:
        raise AssertionError("the server must not start")

    config = Config(data_dir=tmp_path, transport=transport)
    if transport == "picows":
        with pytest.raises(settings.SettingError, match=r"pip install 'vtt-sync\[fast\]'"):
            serving.run(config, never())
    else:
        with pytest.raises(AssertionError, match="must not start"):
            serving.run(config, never())


def test_transport_is_a_setting(transport: str) -> None:
    resolved: Any = settings.resolve(
        cli.build_parser().parse_args(["serve", "--transport", transport])
    )
    assert resolved["transport"] == transport
    assert Config(**settings.config_fields(resolved)).transport == transport


async def test_a_fragmented_hello_is_one_message_and_bad_utf8_text_is_refused(
    tmp_path: Path,
) -> None:
    """A message in fragments under the bound is read whole (JSON and
    MessagePack); a text frame that is not UTF-8 closes with 1007."""
    async with running_server(tmp_path / "data") as srv:
        t = await create_table(srv.url)
        for proto in ("json", "msgpack"):
            ws = await open_ws(srv.url, proto)
            hello = frames.Handshake(t.tokens["p1"], t.room, None).hello()
            data = CODECS[PROTOS[proto]].encode(hello)
            cut = len(data) // 2
            await ws.send(iter([data[:cut], data[cut:]]))  # two frames, one message
            async with asyncio.timeout(WAIT):
                welcome = CODECS[PROTOS[proto]].decode(await ws.recv())
            assert welcome["t"] == "welcome" and welcome["user"] == t.users["p1"], welcome
            await ws.close()
        ws = await open_ws(srv.url, "json")
        await ws.send(b"\xff\xfe{}", text=True)
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(WAIT):
                await ws.recv()
        assert ws.close_code == 1007, ws.close_code
