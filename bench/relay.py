"""A bare websockets relay: the least a sync server can do, as the yardstick
for bench/server_bench.py.

It speaks just enough of the protocol (docs/protocol.md) for the load generator: a hello gets a
welcome; a cmd is decoded, a ~200-byte patch is encoded once and broadcast to
every client of the room, then the sender gets an ack. No rules, no storage,
no auth.

    python -m bench.relay --port 0      # prints "relay listening on ws://127.0.0.1:PORT"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections import defaultdict

import msgpack
from websockets.asyncio.server import ServerConnection, serve
from websockets.typing import Subprotocol

from sync_server.wire import protocol
from sync_server.wire.protocol import JSON, MSGPACK

rooms: dict[str, set[ServerConnection]] = defaultdict(set)
versions: dict[str, int] = defaultdict(int)
PADDING = "x" * 120  # brings the patch to about 200 bytes


def encode(proto: str | None, frame: dict) -> bytes | str:
    return json.dumps(frame) if proto == JSON else msgpack.packb(frame)


def decode(proto: str | None, data: bytes | str) -> dict:
    return json.loads(data) if proto == JSON else msgpack.unpackb(data)


async def handler(ws: ServerConnection) -> None:
    proto = ws.subprotocol
    hello = decode(proto, await ws.recv())
    room = hello.get("room", "r")
    rooms[room].add(ws)
    try:
        await ws.send(
            encode(
                proto,
                # The one path the patches below touch, so a client's mirror
                # can apply them (as against the real server).
                protocol.welcome(
                    room, "u", "gm", versions[room], state={"characters": {"c1": {"pv": 0}}}
                ),
            )
        )
        async for data in ws:
            cmd = decode(proto, data)
            versions[room] += 1
            v = versions[room]
            patch = protocol.patch(
                v,
                [["set", ["characters", "c1", "pv"], v % 20], ["set", ["pad"], PADDING]],
                [{"kind": "damage", "char": "c1", "amount": 1}],
                "u",
                cmd.get("id"),
            )
            encoded = {p: encode(p, patch) for p in (MSGPACK, JSON)}
            for peer in list(rooms[room]):
                with contextlib.suppress(Exception):  # a peer gone mid-send
                    await peer.send(encoded[JSON if peer.subprotocol == JSON else MSGPACK])
            await ws.send(encode(proto, protocol.ack(str(cmd.get("id", "")), {}, v=v)))
    finally:
        rooms[room].discard(ws)


async def main(host: str, port: int) -> None:
    async with serve(
        handler,
        host,
        port,
        subprotocols=[Subprotocol(MSGPACK), Subprotocol(JSON)],
        compression=None,
    ) as server:
        bound = server.sockets[0].getsockname()[1]
        print(f"relay listening on ws://{host}:{bound}", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ns = ap.parse_args()
    asyncio.run(main(ns.host, ns.port))
