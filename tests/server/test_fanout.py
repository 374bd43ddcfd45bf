"""Fan-out: each patch is encoded once per subprotocol present in the room,
whatever the number of clients (issue 6). Counts encode calls; no timing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgpack
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve

from sync_server.codec import CODECS, JSON, MSGPACK, Codec, packb
from sync_server.fanout import LocalFanOut, Outbox, _raw_writer, server_frame

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


class FakeConnection:
    """Records what it is asked to send (no socket)."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes | str, bool | None]] = []

    async def send(self, message: bytes | str, text: bool | None = None) -> None:
        self.sent.append((message, text))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        pass


def patch(v: int) -> dict[str, Any]:
    ops = [["set", ["characters", "c1", "pv"], v]]
    return {"t": "patch", "v": v, "ops": ops, "events": [], "by": "u1", "id": f"c{v}"}


@pytest.mark.parametrize(("n_msgpack", "n_json"), [(1, 0), (8, 0), (50, 0), (7, 1), (40, 10)])
async def test_each_patch_is_encoded_once_per_subprotocol(n_msgpack: int, n_json: int) -> None:
    codecs = {MSGPACK: CountingCodec(CODECS[MSGPACK]), JSON: CountingCodec(CODECS[JSON])}
    fanout = LocalFanOut()
    clients = []
    for name, n in ((MSGPACK, n_msgpack), (JSON, n_json)):
        for i in range(n):
            conn = FakeConnection()
            outbox = Outbox(conn, codecs[name], f"u{i}")  # type: ignore[arg-type]
            outbox.start()
            fanout.subscribe("r1", outbox)
            clients.append((name, conn))
    patches = 5
    for v in range(1, patches + 1):
        fanout.publish("r1", patch(v))
    for _ in range(50):  # let the writer tasks drain their queues
        if all(len(conn.sent) == patches for _, conn in clients):
            break
        await asyncio.sleep(0.01)

    assert codecs[MSGPACK].calls == (patches if n_msgpack else 0)
    assert codecs[JSON].calls == (patches if n_json else 0)
    for v in range(patches):
        # Every client of one subprotocol got the very same bytes object.
        for name in (MSGPACK, JSON):
            sent = [conn.sent[v] for proto, conn in clients if proto == name]
            assert len({id(data) for data, _ in sent}) <= 1
    for name, conn in clients:
        assert [text for _, text in conn.sent] == [name == JSON] * patches
        first = conn.sent[0][0]
        assert isinstance(first, bytes)
        decoded = msgpack.unpackb(first) if name == MSGPACK else CODECS[JSON].decode(first.decode())
        assert decoded == patch(1)
    for client in fanout.all_clients():
        await client.stop()


# --- pre-serialized frames, over real loopback connections -----------------


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


LoopbackRoom = tuple[LocalFanOut, list[tuple[ServerConnection, Outbox]], list[ClientConnection]]


@contextlib.asynccontextmanager
async def loopback_room(protos: list[str], **server_options: Any) -> AsyncIterator[LoopbackRoom]:
    """A websockets server on 127.0.0.1 whose connections are subscribed to
    room r1 through real outboxes, and one connected client per entry of
    `protos` (in that order)."""
    fanout = LocalFanOut()
    server_side: list[tuple[ServerConnection, Outbox]] = []
    arrived = asyncio.Condition()

    async def handler(ws: ServerConnection) -> None:
        outbox = Outbox(ws, CODECS[ws.subprotocol], "u")  # type: ignore[index]
        outbox.start()
        fanout.subscribe("r1", outbox)
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
                )
            )
            async with asyncio.timeout(WAIT), arrived:  # keep server_side in client order
                await arrived.wait_for(lambda: len(server_side) == len(clients))
        try:
            yield fanout, server_side, clients
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
    async with loopback_room(protos) as (fanout, server_side, clients):
        spies = [Spy(ws) for ws, _ in server_side]
        for v in (1, 2, 3):
            fanout.publish("r1", patch(v))
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


async def test_a_paused_client_falls_back_and_keeps_order() -> None:
    async with loopback_room([MSGPACK] * 3) as (fanout, server_side, clients):
        spies = [Spy(ws) for ws, _ in server_side]
        paused_ws, paused_outbox = server_side[1]
        paused_ws.pause_writing()  # as the transport does past its high-water mark
        fanout.publish("r1", patch(1))  # taken by the writer task, waits in drain
        await asyncio.sleep(0)
        fanout.publish("r1", patch(2))  # queued behind it
        assert paused_outbox.pending >= 1
        for client in (clients[0], clients[2]):
            assert [decode(m) for m in await received(client, 2)] == [patch(1), patch(2)]
        paused_ws.resume_writing()
        assert [decode(m) for m in await received(clients[1], 2)] == [patch(1), patch(2)]
        assert spies[1].via_protocol == 2  # both through websockets' own send
        assert spies[0].via_protocol == spies[2].via_protocol == 0
        # Once drained, the next patch takes the shared frame again.
        fanout.publish("r1", patch(3))
        assert [decode(m) for m in await received(clients[1], 1)] == [patch(3)]
        assert spies[1].via_protocol == 2


async def test_bytes_waiting_in_the_protocol_go_first() -> None:
    async with loopback_room([MSGPACK]) as (fanout, server_side, clients):
        ws, _ = server_side[0]
        spy = Spy(ws)
        ws.protocol.send_binary(b"first")  # in the protocol's buffer, not yet written
        fanout.publish("r1", patch(1))
        first, second = await received(clients[0], 2)
        assert first == b"first" and decode(second) == patch(1)
        assert spy.via_protocol == 2  # the patch took the protocol path, after it


async def test_no_shared_frames_for_a_closing_connection() -> None:
    async with loopback_room([MSGPACK]) as (fanout, server_side, _):
        ws, _ = server_side[0]
        raw = _raw_writer(ws)
        assert raw is not None
        closing = asyncio.create_task(ws.close())
        await asyncio.sleep(0)  # the close frame is sent: state CLOSING
        assert raw(b"x") is False
        fanout.publish("r1", patch(1))  # refused quietly by every path
        await closing


async def test_no_shared_frames_with_compression_or_on_the_client_side() -> None:
    async with loopback_room([MSGPACK], compression="deflate") as (_, server_side, clients):
        assert _raw_writer(server_side[0][0]) is None  # frames are per connection
        assert _raw_writer(clients[0]) is None  # masked
    assert _raw_writer(FakeConnection()) is None  # type: ignore[arg-type]


def test_the_reused_packer_matches_packb_and_recovers_from_errors() -> None:
    values = [patch(1), {"t": "ack", "id": "c1", "v": 2, "result": {}}, [b"\x00", "é", 2**63 - 1]]
    for value in values:
        assert packb(value) == msgpack.packb(value, use_bin_type=True)
    with pytest.raises(TypeError):
        packb({"bad": {1, 2}})  # unpackable: the packer must not keep half of it
    with pytest.raises(OverflowError):
        packb([1, 2**70])
    assert packb(patch(2)) == msgpack.packb(patch(2), use_bin_type=True)
