"""Memory and start-up benchmark of the vtt-sync server (a script, not a test).

    python -m bench.memory_bench [--rooms 10000] [--idle-rooms 50] [--clients 8]
                                 [--commands 100000] [--only-commands]
                                 [--stalled 240] [--only-stalled]

1. Start-up with many rooms: a database of --rooms rooms (6 characters and
   8 users each) is built through the storage API directly (SqliteStorage:
   create_room, then one version carrying the users' token hashes; grouped
   commits, no WebSocket round trips), then the server is started in a
   subprocess: the time from spawn to its "listening" line, its resident
   memory (VmRSS from /proc) then, and after 100 rooms are opened on first
   use (rooms load lazily).
2. Memory per room with idle clients: on a fresh server over the same
   database, RSS before and after --idle-rooms rooms x --clients clients
   connect and stay idle; the difference divided by the rooms.
3. One busy room (issue 19): on a fresh server, a GM sends --commands
   commands to one room (64 in flight); RSS before and after, then after a
   restart and the room's first hello (which loads its dedup window). The
   dedup window used to keep
   every id of the last 100,000 versions (~430 bytes each in memory).
4. Readers that read nothing (issue 19): --stalled sockets (15 players,
   16 each) complete their hello in one room and stop reading (a 4 KiB
   receive buffer, reading paused) while its GM publishes for 8 s; RSS
   before, at its peak, and 3 s after the stalled sockets are closed.
Loopback only, bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

import rules
from bench.server_bench import stop_server
from sync_server.core.auth import hash_token
from sync_server.storage import AdminRecord, VersionRecord
from sync_server.storage.sqlite import SqliteStorage
from sync_server.wire import protocol
from sync_server.wire.protocol import MSGPACK

CLIENTS_PER_ROOM = 8
SHEET = {
    "level": 3,
    "pv_max": 40,
    "pe_max": 15,
    "pp_max": 6,
    "medicine": 5,
    "abilities": {"str": 10, "dex": 14, "con": 14, "int": 10, "wis": 12, "cha": 8},
}


def token(room: str, user: str) -> str:
    """Deterministic bench tokens (a throwaway database on loopback)."""
    return f"bench-token-{room}-{user}"


def room_state(room_id: str) -> tuple[dict, str, list[str]]:
    """A room with 6 characters and 8 users (GM, 5 players, 2 observers)."""
    room, gm = rules.new_room(room_id, f"Table {room_id}", "GM")
    actor = rules.Actor(gm, "gm")
    dice = rules.SeededDice(1)
    users = [gm]
    for i in range(CLIENTS_PER_ROOM - 1):
        role = "observer" if i >= 5 else "player"
        out = rules.apply(room, "add_user", {"name": f"user{i}", "role": role}, actor, dice)
        room = out.room
        users.append(out.result["user"])
    for i in range(6):
        args = {**SHEET, "name": f"PC{i}", "owner": users[1 + i % 5]}
        room = rules.apply(room, "add_character", args, actor, dice).room
    return room.to_dict(), gm, users


async def build_db(data: Path, n: int) -> None:
    store = SqliteStorage(data, synchronous="OFF")  # a bench database: speed over durability
    await store.open()
    template, gm, users = room_state("template")

    async def one(i: int) -> None:
        rid = f"room{i}"
        state = {**template, "room": rid, "name": f"Table {rid}"}
        admin = AdminRecord(f"create-{rid}", "create_room", {"room": rid}, {"room": rid}, 0.0)
        await store.create_room(rid, state, gm, hash_token(token(rid, gm)), admin)
        record = VersionRecord(
            room=rid,
            v=1,
            cmd_id=None,
            user=gm,
            op="add_user",
            args={},
            ops=[],
            inverse=[],
            events=[],
            result={},
            undoable=False,
            ts=0.0,
            token_set=tuple((u, hash_token(token(rid, u))) for u in users[1:]),
        )
        await store.commit(rid, [record], None, 0)

    try:
        for start in range(0, n, 500):
            await asyncio.gather(*(one(i) for i in range(start, min(n, start + 500))))
    finally:
        await store.close()


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def start_server(data: Path) -> tuple[subprocess.Popen, str, float]:
    log = data / "server.log"
    env = {**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN}
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sync_server", "serve", "--port", "0", "--data-dir", str(data)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        m = re.search(r"listening on (ws://\S+)", log.read_text())
        if m:
            return proc, m.group(1), time.perf_counter() - t0
        time.sleep(0.01)
    proc.kill()
    raise RuntimeError(f"server did not start:\n{log.read_text()[-2000:]}")


async def open_clients(url: str, rooms: list[str], clients: int) -> list:
    _, gm, users = room_state("template")
    conns = []
    for rid in rooms:
        for user in ([gm, *users[1:]] * clients)[:clients]:
            ws = await connect(
                url, subprotocols=[Subprotocol(MSGPACK)], compression=None, max_size=2**20
            )
            await ws.send(msgpack.packb(protocol.hello(token(rid, user), rid)))
            welcome = msgpack.unpackb(await ws.recv())
            if welcome.get("t") != "welcome":
                raise RuntimeError(f"no welcome: {welcome}")
            conns.append(ws)
    return conns


async def settle() -> None:
    await asyncio.sleep(1.0)


async def opened(url: str, rooms: list[str], clients: int, pid: int) -> tuple[float, float]:
    """Connect, wait, measure RSS and the time to open; then close."""
    t0 = time.perf_counter()
    conns = await open_clients(url, rooms, clients)
    elapsed = time.perf_counter() - t0
    await settle()
    rss = rss_mib(pid)
    for ws in conns:
        await ws.close()
    return rss, elapsed


ADMIN = "bench-admin-token-not-a-secret-0123456789"


async def busy_room(url: str, n: int) -> str:
    """Create room `busy` and send it `n` commands; returns the GM token."""
    ws = await connect(url, subprotocols=[Subprotocol(MSGPACK)], compression=None, max_size=2**24)
    await ws.send(msgpack.packb(protocol.hello(ADMIN, None)))
    await ws.recv()
    await ws.send(msgpack.packb(protocol.cmd("mk", "create_room", {"room": "busy", "name": "B"})))
    gm_token = msgpack.unpackb(await ws.recv())["result"]["gm_token"]
    await ws.close()
    ws = await connect(url, subprotocols=[Subprotocol(MSGPACK)], compression=None, max_size=2**24)
    await ws.send(msgpack.packb(protocol.hello(gm_token, "busy")))
    await ws.recv()
    window = asyncio.Semaphore(64)
    done = asyncio.Event()
    acked = 0

    async def read() -> None:
        nonlocal acked
        async for data in ws:
            frame = msgpack.unpackb(data)
            if frame.get("t") in ("ack", "error"):
                acked += 1
                window.release()
                if acked == n:
                    done.set()

    reader = asyncio.create_task(read())
    for i in range(n):
        await window.acquire()
        await ws.send(msgpack.packb(protocol.cmd(f"busy-{i:06d}", "advance_clock", {"seconds": 1})))
    await done.wait()
    reader.cancel()
    await ws.close()
    return gm_token


async def first_hello(url: str, token_: str) -> float:
    t0 = time.perf_counter()
    ws = await connect(url, subprotocols=[Subprotocol(MSGPACK)], compression=None, max_size=2**24)
    await ws.send(msgpack.packb(protocol.hello(token_, "busy")))
    await ws.recv()
    elapsed = time.perf_counter() - t0
    await ws.close()
    return elapsed


def commands_phase(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        proc, url, _ = start_server(data)
        try:
            time.sleep(1.0)
            before = rss_mib(proc.pid)
            t0 = time.perf_counter()
            gm_token = asyncio.run(busy_room(url, n))
            took = time.perf_counter() - t0
            time.sleep(1.0)
            after = rss_mib(proc.pid)
        finally:
            stop_server(proc)
        proc, url, _ = start_server(data)
        try:
            time.sleep(1.0)
            fresh = rss_mib(proc.pid)
            load = asyncio.run(first_hello(url, gm_token))
            time.sleep(0.5)
            loaded = rss_mib(proc.pid)
        finally:
            stop_server(proc)
    print(f"one room, {n} commands ({n / took:.0f}/s):")
    print(f"  RSS {before:.1f} MiB before, {after:.1f} MiB after (+{after - before:.1f} MiB)")
    print(
        f"  after a restart: {fresh:.1f} MiB, {loaded:.1f} MiB once the room is loaded"
        f" (+{loaded - fresh:.1f} MiB; its first hello {load * 1e3:.0f} ms)"
    )


async def stalled_phase_run(url: str, n: int, pid: int) -> tuple[float, float, float]:
    ws = await connect(url, subprotocols=[Subprotocol(MSGPACK)], compression=None, max_size=2**24)
    await ws.send(msgpack.packb(protocol.hello(ADMIN, None)))
    await ws.recv()
    await ws.send(msgpack.packb(protocol.cmd("mk", "create_room", {"room": "slow", "name": "S"})))
    gm_token = msgpack.unpackb(await ws.recv())["result"]["gm_token"]
    await ws.close()
    gm = await connect(url, subprotocols=[Subprotocol(MSGPACK)], compression=None, max_size=None)
    await gm.send(msgpack.packb(protocol.hello(gm_token, "slow")))
    await gm.recv()

    async def ack(cid: str, op: str, args: dict) -> dict:
        await gm.send(msgpack.packb(protocol.cmd(cid, op, args)))
        while True:
            frame = msgpack.unpackb(await gm.recv())
            if frame.get("t") in ("ack", "error") and frame.get("id") == cid:
                return frame

    tokens = []
    for i in range(15):
        r = await ack(f"u{i}", "add_user", {"name": f"P{i}", "role": "player"})
        tokens.append(r["result"]["token"])
    for i in range(60):  # stable patients: a century's advance is a big patch
        sheet = {**SHEET, "name": f"Patient {i:02d}", "shown": "full"}
        c = (await ack(f"c{i}", "add_character", sheet))["result"]["char"]
        await ack(f"d{i}", "damage", {"char": c, "amount": 1000})
        await ack(f"s{i}", "heal", {"char": c, "amount": 0, "stabilize": True})
    before = rss_mib(pid)
    stalled = []
    for i in range(n):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        host, port = url.removeprefix("ws://").split(":")
        sock.connect((host, int(port)))
        ws = await connect(url, sock=sock, subprotocols=[Subprotocol(MSGPACK)], max_size=None)
        await ws.send(msgpack.packb(protocol.hello(tokens[i % 15], "slow")))
        await ws.recv()
        ws.transport.pause_reading()
        stalled.append(ws)
        await asyncio.sleep(0.005)  # hellos paced under the limits

    acked = 0

    async def drain() -> None:
        nonlocal acked
        async for data in gm:
            if msgpack.unpackb(data).get("t") == "ack":
                acked += 1

    reader = asyncio.create_task(drain())  # after the setup: it reads the GM's socket
    peak = before
    stop_at = time.perf_counter() + 8.0
    i = 0
    century = 100 * 365 * 24 * 3600
    while time.perf_counter() < stop_at:
        for _ in range(2):
            i += 1
            await gm.send(
                msgpack.packb(protocol.cmd(f"a{i}", "advance_clock", {"seconds": century}))
            )
            await gm.send(msgpack.packb(protocol.cmd(f"z{i}", "undo", {})))
        await asyncio.sleep(0.1)
        peak = max(peak, rss_mib(pid))
    for ws in stalled:
        ws.transport.abort()
    reader.cancel()
    await gm.close()
    await asyncio.sleep(3.0)
    print(f"  (the GM's commands: {i * 2} sent, {acked} acked)")
    return before, peak, rss_mib(pid)


def stalled_phase(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, _ = start_server(Path(tmp))
        try:
            time.sleep(1.0)
            before, peak, after = asyncio.run(stalled_phase_run(url, n, proc.pid))
        finally:
            stop_server(proc)
    print(f"{n} sockets that read nothing, one room, its GM publishing for 8 s:")
    print(f"  RSS {before:.1f} MiB before, {peak:.1f} MiB at the peak, {after:.1f} MiB 3 s after")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rooms", type=int, default=10_000)
    ap.add_argument("--idle-rooms", type=int, default=50)
    ap.add_argument("--clients", type=int, default=CLIENTS_PER_ROOM)
    ap.add_argument("--commands", type=int, default=100_000)
    ap.add_argument("--only-commands", action="store_true", help="phase 3 only")
    ap.add_argument("--stalled", type=int, default=240)
    ap.add_argument("--only-stalled", action="store_true", help="phase 4 only")
    ns = ap.parse_args()
    if ns.only_stalled:
        stalled_phase(max(1, min(ns.stalled, 240)))
        return
    if ns.only_commands:
        commands_phase(max(1, min(ns.commands, 1_000_000)))
        return
    ns.rooms = max(ns.idle_rooms, min(ns.rooms, 100_000))
    ns.clients = max(1, min(ns.clients, CLIENTS_PER_ROOM))
    ns.idle_rooms = max(1, min(ns.idle_rooms, 200))
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        t0 = time.perf_counter()
        asyncio.run(build_db(data, ns.rooms))
        built = time.perf_counter() - t0
        size = (data / "vtt-sync.sqlite3").stat().st_size / 2**20
        print(f"database: {ns.rooms} rooms built in {built:.1f} s through the storage API")
        print(f"  ({size:.0f} MiB, plus WAL)")

        # 1. start-up with every room in the database
        proc, url, startup = start_server(data)
        try:
            time.sleep(1.0)
            rss_start = rss_mib(proc.pid)
            sample = random.Random(1).sample(range(ns.rooms), 100)
            rss_100, t_100 = asyncio.run(opened(url, [f"room{i}" for i in sample], 1, proc.pid))
        finally:
            stop_server(proc)
        print(f"start-up with {ns.rooms} rooms: {startup:.2f} s to listening (target < 5 s)")
        print(f"  RSS after start-up:               {rss_start:8.1f} MiB (target < 1024 MiB)")
        print(
            f"  RSS after 100 rooms opened:       {rss_100:8.1f} MiB"
            f"  (first hello per room: {t_100 / 100 * 1e3:.1f} ms, loads the room)"
        )

        # 2. memory per room with idle clients, on a fresh server
        proc, url, _ = start_server(data)
        try:
            time.sleep(1.0)
            before = rss_mib(proc.pid)
            rooms = [f"room{i}" for i in range(ns.idle_rooms)]
            after, _ = asyncio.run(opened(url, rooms, ns.clients, proc.pid))
        finally:
            stop_server(proc)
        per_room = (after - before) / ns.idle_rooms
        print(
            f"memory per room with {ns.clients} idle clients ({ns.idle_rooms} rooms):"
            f" {per_room * 1024:.0f} KiB"
        )
        print(f"  RSS {before:.1f} MiB before connecting, {after:.1f} MiB after")
        print(
            f"  ({per_room * 1024 / ns.clients:.0f} KiB per connection, room state and"
            " history included)"
        )
    if ns.commands > 0:
        commands_phase(min(ns.commands, 1_000_000))
    if ns.stalled > 0:
        stalled_phase(min(ns.stalled, 240))


if __name__ == "__main__":
    main()
