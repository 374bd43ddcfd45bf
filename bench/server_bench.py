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
from collections.abc import Sequence
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from rules.patch import apply_ops
from sync_server.wire import frames, protocol
from sync_server.wire.protocol import MSGPACK

ADMIN_TOKEN = "bench-admin-token-not-a-secret-0123456789"
SHEET = {
    "level": 3,
    "pv_max": 40,
    "pe_max": 15,
    "pp_max": 6,
    "medicine": 5,
    "abilities": {"str": 10, "dex": 14, "con": 14, "int": 10, "wis": 12, "cha": 8},
}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | Sequence[int]) -> float:
    """utime + stime of a process (or the sum of several: workers)."""
    if not isinstance(pid, int):
        return sum(cpu_seconds(p) for p in pid)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def start(
    args: list[str], pattern: str, env: dict[str, str], log: str
) -> tuple[subprocess.Popen, str]:
    """Start a server process; its output goes to a file (a pipe nobody
    reads would fill up and block the server mid-run)."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, *args], stdout=out, stderr=subprocess.STDOUT, text=True, env=env
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        with open(log) as f:
            m = re.search(pattern, f.read())
        if m:
            return proc, m.group(1)
        time.sleep(0.05)
    proc.kill()
    with open(log) as f:
        raise RuntimeError(f"server did not start: {args}\n{f.read()[-2000:]}")


class Peer:
    """One client: a connection, when each version arrived, and (for the GM,
    who needs the combat to send end_turn) a mirror of the state."""

    def __init__(self, ws: ClientConnection, welcome: dict[str, Any], mirror: bool) -> None:
        self.ws = ws
        self.state = welcome.get("state") or {}
        self.v = welcome.get("v", 0)
        self.mirror = mirror
        self.arrived: dict[int, float] = {}
        self.acks: dict[str, asyncio.Future] = {}

    async def read(self) -> None:
        try:
            async for data in self.ws:
                frame = msgpack.unpackb(data)
                t = frame.get("t")
                if t == "patch":
                    self.arrived[frame["v"]] = time.perf_counter()
                    if self.mirror:
                        apply_ops(self.state, frame["ops"])
                    self.v = frame["v"]
                elif t in ("ack", "error"):
                    fut = self.acks.pop(frame.get("id"), None)
                    if fut is not None and not fut.done():
                        fut.set_result(frame)
        except Exception as exc:  # a reader that dies must not leave its GM waiting
            for fut in self.acks.values():
                if not fut.done():
                    fut.set_exception(RuntimeError(f"reader failed: {exc!r}"))
            raise
        finally:
            for fut in self.acks.values():
                if not fut.done():
                    fut.set_exception(RuntimeError("connection closed before the ack"))

    async def command(self, cid: str, op: str, args: dict[str, Any]) -> dict[str, Any]:
        fut = asyncio.get_running_loop().create_future()
        self.acks[cid] = fut
        await self.ws.send(msgpack.packb(protocol.cmd(cid, op, args)))
        async with asyncio.timeout(30):
            return await fut


async def hello(url: str, token: str, room: str | None) -> tuple[ClientConnection, dict]:
    """Hello and welcome, following redirects as the clients do (workers,
    cluster nodes: the room is served by another process)."""
    for _ in range(protocol.MAX_REDIRECTS + 1):
        ws = await connect(
            url, subprotocols=[Subprotocol(MSGPACK)], compression=None, max_size=2**20
        )
        handshake = frames.Handshake(token, room)
        await ws.send(msgpack.packb(handshake.hello()))
        welcome = msgpack.unpackb(await ws.recv())
        if welcome.get("t") != "redirect":
            break
        await ws.close()
        url = welcome["url"]
    if not isinstance(handshake.receive(welcome), frames.Welcome):
        raise RuntimeError(f"no welcome: {welcome}")
    return ws, welcome


NPC = "npc"  # one NPC per room, touched by one command of four


async def setup_vtt(
    url: str, rooms: int, clients: int, secrets: bool = False, prefix: str = ""
) -> list[list[tuple[str, str]]]:
    """Create the rooms, their characters, a combat, and the users' tokens.
    Every character is shown in full; with `secrets`, the NPC is `status`
    (per-role views: its patches are encoded per view class)."""
    ws, _ = await hello(url, ADMIN_TOKEN, None)
    admin = Peer(ws, {}, mirror=False)
    reader = asyncio.create_task(admin.read())
    ids = itertools.count()
    out = []
    for r in range(rooms):
        room = f"{prefix}bench{r}"
        ack = await admin.command(
            f"{prefix}a{next(ids)}", "create_room", {"room": room, "name": room}
        )
        gm_token = ack["result"]["gm_token"]
        gws, welcome = await hello(url, gm_token, room)
        gm = Peer(gws, welcome, mirror=True)
        t = asyncio.create_task(gm.read())
        chars = []
        for i in range(4):
            a = await gm.command(
                f"s{next(ids)}", "add_character", {**SHEET, "name": f"PC{i}", "shown": "full"}
            )
            chars.append(a["result"]["char"])
        shown = "status" if secrets else "full"
        await gm.command(
            f"s{next(ids)}", "add_character", {**SHEET, "name": "NPC", "id": NPC, "shown": shown}
        )
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


async def drive(
    url: str,
    room_tokens: list[list[tuple[str, str]]],
    seconds: float,
    relay: bool,
    pid: int | Sequence[int],
) -> dict[str, Any]:
    """Connect every client, run every room's GM loop for `seconds`, and
    measure; the server's and this process's CPU are read around the loops
    only (not the connections)."""
    peers: list[list[Peer]] = []
    readers = []
    for tokens in room_tokens:
        group = []
        for i, (token, room) in enumerate(tokens):
            ws, welcome = await hello(url, token, room)
            p = Peer(ws, welcome, mirror=i == 0)
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
            elif k == 0:  # the NPC, hit and healed in turn: it never dies
                op = "damage" if n % 8 == 0 else "heal"
                args = {"char": NPC, "amount": 2}
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

    cpu0, own0 = cpu_seconds(pid), time.process_time()
    t_start = time.perf_counter()
    async with asyncio.timeout(seconds + 60):
        await asyncio.gather(*(gm_loop(g, r) for r, g in enumerate(peers)))
    elapsed = time.perf_counter() - t_start
    await asyncio.sleep(0.3)  # let the last patches land
    cpu, own = cpu_seconds(pid) - cpu0, time.process_time() - own0
    latencies, missing = [], 0
    for group, t0, v in sent:
        arrivals = [a for a in (p.arrived.get(v) for p in group) if a is not None]
        if len(arrivals) == len(group):
            latencies.append(max(arrivals) - t0)
        else:
            missing += 1
    for task in readers:
        task.cancel()
    for group in peers:
        for p in group:
            await p.ws.close()
    n = len(sent)
    return {
        "cmds_per_s": n / elapsed,
        "p50_ms": pct(latencies, 0.5) * 1e3,
        "p99_ms": pct(latencies, 0.99) * 1e3,
        "cpu_us_per_cmd": cpu / max(n, 1) * 1e6,
        "server_cpu_pct": cpu / elapsed * 100,
        "loadgen_cpu_pct": own / elapsed * 100,
        "errors": errors + missing,
    }


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def one_run(kind: str, ns: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN}
    with tempfile.TemporaryDirectory() as data:
        log = os.path.join(data, "server.log")
        if kind == "relay":
            args = ["-m", "bench.relay", "--port", "0"]
        else:
            args = ["-m", "sync_server", "serve", "--port", "0", "--data-dir", data]
            args += ["--synchronous", ns.synchronous]
        proc, url = start(args, r"listening on (ws://\S+)", env, log)
        profiler = None
        try:
            if kind == "relay":
                tokens = [[("t", f"bench{r}")] * ns.clients for r in range(ns.rooms)]
            else:
                tokens = asyncio.run(
                    setup_vtt(url, ns.rooms, ns.clients, secrets=kind == "secrets")
                )
            if ns.profile and kind == "vtt-sync":
                profiler = subprocess.Popen(
                    [
                        "py-spy",
                        "record",
                        "--pid",
                        str(proc.pid),
                        "--gil",
                        "--format",
                        "raw",
                        "--rate",
                        "200",
                        "--nonblocking",
                        "-o",
                        ns.profile,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            return asyncio.run(drive(url, tokens, ns.seconds, kind == "relay", proc.pid))
        finally:
            proc.terminate()
            proc.wait(10)
            if profiler is not None:
                profiler.wait(10)


ROWS = {
    "cmds_per_s": ("commands/s", ">= 0.6x"),
    "p50_ms": ("p50 ms", ""),
    "p99_ms": ("p99 ms", "<= 2x"),
    "cpu_us_per_cmd": ("server CPU us/cmd", "<= 3x"),
    "server_cpu_pct": ("server CPU %", ""),
    "loadgen_cpu_pct": ("load gen CPU %", ""),
    "errors": ("errors", ""),
}


def load_options(doc: str | None) -> argparse.ArgumentParser:
    """The load's options, shared by the benchmarks that drive rooms."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rooms", type=int, default=20)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    return ap


def main() -> None:
    ap = load_options(__doc__)
    ap.add_argument("--synchronous", default="FULL", help="vtt-sync's SQLite synchronous pragma")
    ap.add_argument("--only", choices=("relay", "vtt-sync"), help="run one side only")
    ap.add_argument(
        "--views",
        action="store_true",
        help="also run vtt-sync with one `status` NPC per room (damaged in 1 command of 4, so "
        "1 patch of 4 is encoded per view class) and print its ratio to vtt-sync",
    )
    ap.add_argument("--profile", help="py-spy raw profile of the vtt-sync side (last run) here")
    ns = ap.parse_args()
    ns.rooms, ns.clients = min(ns.rooms, 200), max(2, min(ns.clients, 64))
    ns.seconds, ns.runs = min(ns.seconds, 60.0), min(ns.runs, 20)
    kinds = [ns.only] if ns.only else ["relay", "vtt-sync"]
    if ns.views:
        kinds.append("secrets")
    results: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for _ in range(ns.runs):
        for kind in kinds:
            results[kind].append(one_run(kind, ns))
    med = {
        k: {f: statistics.median(r[f] for r in runs) for f in runs[0]}
        for k, runs in results.items()
    }
    print(
        f"{ns.rooms} rooms x {ns.clients} clients, {ns.seconds:g} s/run, median of {ns.runs} runs;"
        f" vtt-sync synchronous={ns.synchronous}"
    )
    if len(kinds) == 1:
        for field, (label, _) in ROWS.items():
            print(f"{label:20}{med[kinds[0]][field]:12.2f}")
        return
    print(f"{'':20}{'relay':>12}{'vtt-sync':>12}{'ratio':>10}   target")
    for field, (label, target) in ROWS.items():
        a, b = med["relay"][field], med["vtt-sync"][field]
        ratio = f"{b / a:9.2f}x" if a else f"{'-':>10}"
        print(f"{label:20}{a:12.2f}{b:12.2f}{ratio}   {target}")
    if ns.views:
        print("\nwith one `status` NPC per room (views), to the same load without secrets:")
        print(f"{'':20}{'no secrets':>12}{'secrets':>12}{'ratio':>10}")
        for field, (label, _) in ROWS.items():
            a, b = med["vtt-sync"][field], med["secrets"][field]
            ratio = f"{b / a:9.2f}x" if a else f"{'-':>10}"
            print(f"{label:20}{a:12.2f}{b:12.2f}{ratio}")


if __name__ == "__main__":
    main()
