"""Fan-out: each patch is encoded once per subprotocol present in the room,
whatever the number of clients (issue 6). Counts encode calls; no timing."""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack
import pytest

from sync_server.codec import CODECS, JSON, MSGPACK, Codec
from sync_server.fanout import LocalFanOut, Outbox


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
