"""Fan-out: the room bus encodes each frame once per subprotocol present,
whatever the number of clients; outboxes write the shared bytes; the
optional fast path (ws_fastpath.py) writes one pre-serialized frame to every
transport and steps aside whenever that would not be exactly what websockets
does. Counts and bytes, over real loopback connections; no timing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgpack
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve

from sync_server.hosting import ws_fastpath
from sync_server.hosting.bus import LocalBus
from sync_server.hosting.outbox import Outbox
from sync_server.hosting.ws_fastpath import raw_writer, server_frame
from sync_server.wire.codec import CODECS, JSON, MSGPACK, Codec, packb

WAIT = 10.0  # seconds: the bound on any single wait


class CountingCodec:
    """A real codec that counts its encode calls."""

    def __init__(self, codec: Codec) -> None:
        self.inner = codec
        self.name, self.binary = codec.name, codec.binary
        self.calls = 0

    def encode(self, frame: dict[str, Any]) -> bytes | str:
        self.calls += 1
        return self.inner.encode(frame)


class RecordingSink:
    """A bus subscriber that keeps the bytes it was given."""

    def __init__(self, codec: Any, viewer: Any = None) -> None:
        self.codec = codec
        self.viewer = viewer
        self.closing = self.stale = False
        self.got: list[bytes] = []

    def deliver(self, data: bytes, v: int | None) -> None:
        self.got.append(data)


def patch(v: int) -> dict[str, Any]:
    ops = [["set", ["characters", "c1", "pv"], v]]
    return {"t": "patch", "v": v, "ops": ops, "events": [], "by": "u1", "id": f"c{v}"}


@pytest.mark.parametrize(("n_msgpack", "n_json"), [(1, 0), (8, 0), (50, 0), (7, 1), (40, 10)])
def test_each_frame_is_encoded_once_per_subprotocol(n_msgpack: int, n_json: int) -> None:
    codecs = {MSGPACK: CountingCodec(CODECS[MSGPACK]), JSON: CountingCodec(CODECS[JSON])}
    bus = LocalBus()
    sinks = []
    for name, n in ((MSGPACK, n_msgpack), (JSON, n_json)):
        for _ in range(n):
            sink = RecordingSink(codecs[name])
            bus.subscribe("r1", sink)
            sinks.append((name, sink))
    patches = 5
    for v in range(1, patches + 1):
        bus.publish("r1", patch(v))
    assert codecs[MSGPACK].calls == (patches if n_msgpack else 0)
    assert codecs[JSON].calls == (patches if n_json else 0)
    for v in range(patches):
        for name in (MSGPACK, JSON):  # the very same bytes object per subprotocol
            assert len({id(s.got[v]) for p, s in sinks if p == name}) <= 1
    for name, sink in sinks:
        decoded = [
            msgpack.unpackb(b) if name == MSGPACK else CODECS[JSON].decode(b.decode())
            for b in sink.got
        ]
        assert decoded == [patch(v) for v in range(1, patches + 1)]


def test_a_room_with_no_subscriber_encodes_nothing() -> None:
    codec = CountingCodec(CODECS[MSGPACK])
    bus, sink = LocalBus(), RecordingSink(codec)
    bus.subscribe("r1", sink)
    bus.publish("r2", patch(1))
    bus.unsubscribe("r1", sink)
    bus.publish("r1", patch(2))
    assert codec.calls == 0 and sink.got == [] and bus.subscribers("r1") == 0


# A render error, a failing sink: the bus contract (tests/server/test_bus_contract.py).


# --- outboxes over real loopback connections --------------------------------


class Spy:
    """Wraps a server connection's transport.write and its protocol's
    send_binary/send_text, to tell which path each frame took."""

    def __init__(self, ws: ServerConnection) -> None:
        self.raw: list[bytes] = []  # what reached the transport
        self.via_protocol = 0  # frames built by websockets
        write = ws.transport.write
        send_binary, send_text = ws.protocol.send_binary, ws.protocol.send_text

        def spy_write(data: bytes) -> None:
            self.raw.append(data)
            write(data)

        def spy_binary(data: bytes, fin: bool = True) -> None:
            self.via_protocol += 1
            send_binary(data, fin)

        def spy_text(data: bytes, fin: bool = True) -> None:
            self.via_protocol += 1
            send_text(data, fin)

        ws.transport.write = spy_write  # type: ignore[method-assign]
        ws.protocol.send_binary = spy_binary  # type: ignore[method-assign]
        ws.protocol.send_text = spy_text  # type: ignore[method-assign]


LoopbackRoom = tuple[LocalBus, list[tuple[ServerConnection, Outbox]], list[ClientConnection]]


@contextlib.asynccontextmanager
async def loopback_room(
    protos: list[str], *, fast: bool = True, max_bytes: int = 8 << 20, **server_options: Any
) -> AsyncIterator[LoopbackRoom]:
    """A websockets server on 127.0.0.1 whose connections are subscribed to
    room r1 through real outboxes, and one connected client per entry of
    `protos` (in that order)."""
    bus = LocalBus()
    server_side: list[tuple[ServerConnection, Outbox]] = []
    arrived = asyncio.Condition()

    async def handler(ws: ServerConnection) -> None:
        outbox = Outbox(ws, CODECS[ws.subprotocol], "u", fast=fast, max_bytes=max_bytes)  # type: ignore[index]
        bus.subscribe("r1", outbox)
        async with arrived:
            server_side.append((ws, outbox))
            arrived.notify_all()
        await ws.wait_closed()

    options = {"compression": None, **server_options}
    async with serve(handler, "127.0.0.1", 0, subprotocols=[MSGPACK, JSON], **options) as server:
        port = server.sockets[0].getsockname()[1]
        clients = []
        for proto in protos:
            clients.append(
                await connect(
                    f"ws://127.0.0.1:{port}",
                    subprotocols=[proto],  # type: ignore[list-item]
                    compression=options["compression"],
                    max_size=None,
                )
            )
            async with asyncio.timeout(WAIT), arrived:  # keep server_side in client order
                await arrived.wait_for(lambda: len(server_side) == len(clients))
        try:
            yield bus, server_side, clients
        finally:
            for client in clients:
                await client.close()
            for _, outbox in server_side:
                await outbox.stop()


async def received(client: ClientConnection, n: int) -> list[bytes | str]:
    async with asyncio.timeout(WAIT):
        return [await client.recv() for _ in range(n)]


def decode(message: bytes | str) -> Any:
    if isinstance(message, bytes):
        return msgpack.unpackb(message)
    return CODECS[JSON].decode(message)


async def test_a_patch_frame_is_serialized_once_and_written_to_every_client() -> None:
    protos = [MSGPACK] * 8 + [JSON] * 2
    async with loopback_room(protos) as (bus, server_side, clients):
        spies = [Spy(ws) for ws, _ in server_side]
        for v in (1, 2, 3):
            bus.publish("r1", patch(v))
        for client in clients:
            assert [decode(m) for m in await received(client, 3)] == [patch(1), patch(2), patch(3)]
        for i in range(3):
            for proto in (MSGPACK, JSON):
                writes = [s.raw[i] for s, p in zip(spies, protos, strict=True) if p == proto]
                # The very same bytes object, a whole frame, for each client.
                assert len({id(w) for w in writes}) == 1
                data = CODECS[proto].encode(patch(i + 1))
                data = data.encode() if isinstance(data, str) else data
                assert writes[0] == server_frame(data, text=proto == JSON)
        assert all(s.via_protocol == 0 for s in spies)
        assert all(len(s.raw) == 3 for s in spies)


async def test_without_the_fast_path_frames_go_through_websockets_public_api() -> None:
    protos = [MSGPACK, MSGPACK, JSON]
    async with loopback_room(protos, fast=False) as (bus, server_side, clients):
        spies = [Spy(ws) for ws, _ in server_side]
        for v in (1, 2):
            bus.publish("r1", patch(v))
        for client in clients:
            assert [decode(m) for m in await received(client, 2)] == [patch(1), patch(2)]
        assert [s.via_protocol for s in spies] == [2, 2, 2]  # broadcast() built each frame


async def test_a_paused_client_keeps_order_and_its_bytes_count() -> None:
    """A transport past its high-water mark is still written to (the bytes
    wait in its buffer, counted against the client's bound), in order."""
    async with loopback_room([MSGPACK] * 3) as (bus, server_side, clients):
        paused_ws, paused = server_side[1]
        paused_ws.pause_writing()  # as the transport does past its high-water mark
        for v in (1, 2, 3):
            bus.publish("r1", patch(v))
        paused_ws.resume_writing()
        for client in clients:
            assert [decode(m) for m in await received(client, 3)] == [patch(v) for v in (1, 2, 3)]
        assert not paused.closing


async def test_bytes_waiting_in_the_protocol_go_first() -> None:
    async with loopback_room([MSGPACK]) as (bus, server_side, clients):
        ws, _ = server_side[0]
        spy = Spy(ws)
        ws.protocol.send_binary(b"first")  # in the protocol's buffer, not yet written
        bus.publish("r1", patch(1))
        first, second = await received(clients[0], 2)
        assert first == b"first" and decode(second) == patch(1)
        assert spy.via_protocol == 2  # the patch took the protocol path, after it


async def test_no_shared_frames_for_a_closing_connection() -> None:
    async with loopback_room([MSGPACK]) as (bus, server_side, _):
        ws, _ = server_side[0]
        raw = raw_writer(ws)
        assert raw is not None
        closing = asyncio.create_task(ws.close())
        await asyncio.sleep(0)  # the close frame is sent: state CLOSING
        assert raw(b"x") is False
        bus.publish("r1", patch(1))  # refused quietly by every path
        await closing


async def test_no_shared_frames_with_compression_or_on_the_client_side() -> None:
    async with loopback_room([MSGPACK], compression="deflate") as (_, server_side, clients):
        assert raw_writer(server_side[0][0]) is None  # frames are per connection
        assert raw_writer(clients[0]) is None  # masked
    assert raw_writer(object()) is None


async def test_the_fast_path_still_matches_websockets_internals() -> None:
    """Fails loudly when a websockets upgrade changes what ws_fastpath
    relies on: the attributes it reads, and that `send` of a data frame only
    appends the serialized frame to `protocol.writes` and hands it on."""
    async with loopback_room([MSGPACK]) as (_, server_side, _clients):
        ws, _ = server_side[0]
        for name in ws_fastpath.CONNECTION_ATTRIBUTES:
            assert hasattr(ws, name), f"websockets connection lost {name!r}"
        for name in ws_fastpath.PROTOCOL_ATTRIBUTES:
            assert hasattr(ws.protocol, name), f"websockets protocol lost {name!r}"
        written: list[bytes] = []
        write = ws.transport.write
        ws.transport.write = lambda data: (written.append(data), write(data))  # type: ignore[method-assign]
        await ws.send(b"payload")
        assert b"".join(written) == server_frame(b"payload", text=False)
        assert ws.protocol.writes == []


async def test_the_first_frame_counts_against_the_bound_too() -> None:
    """A client that stopped reading: every byte written for it, in the
    transport's buffer, counts; past the bound it is closed with 1013 and
    nothing more is buffered for it, the very first frame included."""
    big = {"t": "patch", "v": 1, "ops": [["set", ["x"], "y" * 300_000]], "events": []}
    async with loopback_room([MSGPACK, MSGPACK], max_bytes=1 << 20) as (bus, server_side, clients):
        _, stalled = server_side[0]
        clients[0].transport.pause_reading()  # this client reads nothing any more
        for v in range(1, 40):
            bus.publish("r1", {**big, "v": v})
            if stalled.closing:
                break
        assert stalled.closing and stalled.close_code == 1013
        assert stalled.buffered <= 1 << 20
        healthy = await received(clients[1], 3)  # the other client is unaffected
        assert [decode(m)["v"] for m in healthy] == [1, 2, 3]
        clients[0].transport.abort()  # it would never complete a closing handshake


def test_the_reused_packer_matches_packb_and_recovers_from_errors() -> None:
    values = [patch(1), {"t": "ack", "id": "c1", "v": 2, "result": {}}, [b"\x00", "é", 2**63 - 1]]
    for value in values:
        assert packb(value) == msgpack.packb(value, use_bin_type=True)
    with pytest.raises(TypeError):
        packb({"bad": {1, 2}})  # unpackable: the packer must not keep half of it
    with pytest.raises(OverflowError):
        packb([1, 2**70])
    assert packb(patch(2)) == msgpack.packb(patch(2), use_bin_type=True)
