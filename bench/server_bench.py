"""Load benchmark: vtt-sync side by side with a bare websockets relay.

    python -m bench.server_bench [--rooms 20] [--clients 8] [--seconds 4] [--runs 3]

Starts each server in its own process (vtt-sync on a fresh data directory,
durable acks; then bench/relay.py), and drives it from this process: R rooms
x C clients (a GM, players, observers); each room's GM sends commands in a
closed loop (damage, heal, end_turn, advance_clock). Reports commands/s, the
latency from a command's send to its patch at every client of the room (p50,
p99), and the server's CPU time per command (from /proc), each with its
ratio to the relay. Medians of --runs runs. Loopback only, bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect

from rules.patch import apply_ops

MSGPACK = "vtt-sync.msgpack.v1"
ADMIN_TOKEN = "bench-admin-token-not-secret"
SHEET = {
    "level": 3,
    "pv_max": 40,
    "pe_max": 15,
    "pp_max": 6,
    "medicine": 5,
    "abilities": {"str": 10, "dex": 14, "con": 14, "int": 10, "wis": 12, "cha": 8},
}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def start(args: list[str], pattern: str, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(pattern, line)
        if m:
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError(f"server did not start: {args}")


class Peer:
    """One client: a connection, a mirror, and when each version arrived."""

    def __init__(self, ws: ClientConnection, welcome: dict[str, Any]) -> None:
        self.ws = ws
        self.state = welcome.get("state") or {}
        self.v = welcome.get("v", 0)
        self.arrived: dict[int, float] = {}
        self.acks: dict[str, asyncio.Future] = {}

    async def read(self) -> None:
        async for data in self.ws:
            frame = msgpack.unpackb(data)
            t = frame.get("t")
            if t == "patch":
                self.arrived[frame["v"]] = time.perf_counter()
                apply_ops(self.state, frame["ops"])
                self.v = frame["v"]
            elif t in ("ack", "error"):
                fut = self.acks.pop(frame.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(frame)

    async def command(self, cid: str, op: str, args: dict[str, Any]) -> dict[str, Any]:
        fut = asyncio.get_running_loop().create_future()
        self.acks[cid] = fut
        await self.ws.send(msgpack.packb({"t": "cmd", "id": cid, "op": op, "args": args}))
        return await fut


async def hello(url: str, token: str, room: str | None) -> tuple[ClientConnection, dict]:
    ws = await connect(url, subprotocols=[MSGPACK], compression=None, max_size=2**20)
    frame: dict[str, Any] = {"t": "hello", "proto": 1, "token": token}
    if room is not None:
        frame["room"] = room
    await ws.send(msgpack.packb(frame))
    welcome = msgpack.unpackb(await ws.recv())
    if welcome.get("t") != "welcome":
        raise RuntimeError(f"no welcome: {welcome}")
    return ws, welcome


async def setup_vtt(url: str, rooms: int, clients: int) -> list[list[tuple[str, str]]]:
    """Create the rooms, their characters, a combat, and the users' tokens."""
    ws, _ = await hello(url, ADMIN_TOKEN, None)
    admin = Peer(ws, {})
    reader = asyncio.create_task(admin.read())
    ids = itertools.count()
    out = []
    for r in range(rooms):
        room = f"bench{r}"
        ack = await admin.command(f"a{next(ids)}", "create_room", {"room": room, "name": room})
        gm_token = ack["result"]["gm_token"]
        gws, welcome = await hello(url, gm_token, room)
        gm = Peer(gws, welcome)
        t = asyncio.create_task(gm.read())
        chars = []
        for i in range(4):
            a = await gm.command(f"s{next(ids)}", "add_character", {**SHEET, "name": f"PC{i}"})
            chars.append(a["result"]["char"])
        await gm.command(f"s{next(ids)}", "combat_start", {"order": chars})
        tokens = [(gm_token, room)]
        for i in range(clients - 1):
            role = "observer" if i >= clients - 3 else "player"
            a = await gm.command(f"s{next(ids)}", "add_user", {"name": f"user{i}", "role": role})
            tokens.append((a["result"]["token"], room))
        t.cancel()
        await gws.close()
        out.append(tokens)
    reader.cancel()
    await ws.close()
    return out


async def drive(url: str, room_tokens: list[list[tuple[str, str]]], seconds: float, relay: bool):
    peers: list[list[Peer]] = []
    readers = []
    for tokens in room_tokens:
        group = []
        for token, room in tokens:
            ws, welcome = await hello(url, token, room)
            p = Peer(ws, welcome)
            readers.append(asyncio.create_task(p.read()))
            group.append(p)
        peers.append(group)
    sent: list[tuple[list[Peer], float, int]] = []
    errors = 0
    stop = time.perf_counter() + seconds

    async def gm_loop(group: list[Peer], r: int) -> None:
        nonlocal errors
        gm = group[0]
        n = 0
        while time.perf_counter() < stop:
            n += 1
            k = n % 4
            if relay:
                op, args = "damage", {"char": "c1", "amount": 1}
            elif k == 0:
                op, args = "damage", {"char": "c1", "amount": 2}
            elif k == 1:
                op, args = "heal", {"char": "c1", "amount": 2}
            elif k == 2:
                combat = gm.state["combat"]
                op, args = "end_turn", {"char": combat["order"][combat["turn"]]}
            else:
                op, args = "advance_clock", {"seconds": 60}
            t0 = time.perf_counter()
            reply = await gm.command(f"r{r}-{n}", op, args)
            if reply["t"] == "ack":
                sent.append((group, t0, reply["v"]))
            else:
                errors += 1

    t_start = time.perf_counter()
    await asyncio.gather(*(gm_loop(g, r) for r, g in enumerate(peers)))
    elapsed = time.perf_counter() - t_start
    await asyncio.sleep(0.5)  # let the last patches land
    latencies = []
    for group, t0, v in sent:
        arrivals = [p.arrived.get(v) for p in group]
        if all(a is not None for a in arrivals):
            latencies.append(max(arrivals) - t0)
    for task in readers:
        task.cancel()
    for group in peers:
        for p in group:
            await p.ws.close()
    return len(sent), elapsed, latencies, errors


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def one_run(kind: str, ns: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN}
    with tempfile.TemporaryDirectory() as data:
        if kind == "relay":
            proc, url = start(["-m", "bench.relay", "--port", "0"], r"listening on (ws://\S+)", env)
        else:
            proc, url = start(
                ["-m", "sync_server", "serve", "--port", "0", "--data-dir", data],
                r"listening on (ws://\S+)",
                env,
            )
        try:
            if kind == "relay":
                tokens = [[("t", f"bench{r}")] * ns.clients for r in range(ns.rooms)]
            else:
                tokens = asyncio.run(setup_vtt(url, ns.rooms, ns.clients))
            cpu0 = cpu_seconds(proc.pid)
            n, elapsed, lat, errors = asyncio.run(drive(url, tokens, ns.seconds, kind == "relay"))
            cpu = cpu_seconds(proc.pid) - cpu0
        finally:
            proc.terminate()
            proc.wait(10)
    return {
        "cmds_per_s": n / elapsed,
        "p50_ms": pct(lat, 0.5) * 1e3,
        "p99_ms": pct(lat, 0.99) * 1e3,
        "cpu_us_per_cmd": cpu / max(n, 1) * 1e6,
        "errors": errors,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rooms", type=int, default=20)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args()
    results: dict[str, list[dict[str, float]]] = {"relay": [], "vtt-sync": []}
    for _ in range(ns.runs):
        for kind in results:
            results[kind].append(one_run(kind, ns))
    med = {
        k: {f: statistics.median(r[f] for r in runs) for f in runs[0]}
        for k, runs in results.items()
    }
    print(f"{ns.rooms} rooms x {ns.clients} clients, {ns.seconds:g} s/run, median of {ns.runs}")
    print(f"{'':16}{'relay':>12}{'vtt-sync':>12}{'ratio':>10}   target")
    targets = {"cmds_per_s": ">= 0.6x", "p99_ms": "<= 2x", "cpu_us_per_cmd": "<= 3x"}
    for field in ("cmds_per_s", "p50_ms", "p99_ms", "cpu_us_per_cmd", "errors"):
        a, b = med["relay"][field], med["vtt-sync"][field]
        ratio = b / a if a else float("nan")
        print(f"{field:16}{a:12.2f}{b:12.2f}{ratio:9.2f}x   {targets.get(field, '')}")


if __name__ == "__main__":
    main()
