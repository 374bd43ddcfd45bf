"""Cluster mode, measured (loopback only, bounded in time):

    python -m bench.cluster_bench [--rooms 20] [--clients 8] [--seconds 4] [--runs 3]

1. One node on PostgreSQL vs one node on SQLite (durable acks on both:
   SQLite synchronous=FULL, PostgreSQL's default synchronous_commit=on):
   commands/s, p99, CPU per command (the node's, and the node's plus
   PostgreSQL's own processes'), as ratios in one run.
2. One, two and three nodes on one PostgreSQL: the rooms spread over the
   nodes (each room created and driven through its own node), total
   commands/s and where the CPU goes: does throughput grow with processes
   until the cores are used?
3. Failover: kill -9 of a room's node under load, time until a command of
   that room is acknowledged by another node, for several lease lengths
   (median of --runs).

A fresh database on the local PostgreSQL (127.0.0.1:5432, trust auth; or
$VTT_SYNC_TEST_PG_ADMIN) for each measure, dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import msgpack

from bench.server_bench import (
    ADMIN_TOKEN,
    CLK_TCK,
    drive,
    hello,
    load_options,
    setup_vtt,
    start,
)
from sync_server.testing.postgres import admin_dsn, create_database, drop_database
from sync_server.wire import protocol


def postgres_cpu() -> float:
    """CPU seconds of every PostgreSQL server process (all of the local
    server's backends: keep the machine quiet while measuring)."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                head, _, rest = f.read().rpartition(")")
            if "postgres" not in head:
                continue
            fields = rest.split()
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
        except (OSError, IndexError, ValueError):
            continue
    return total


def spawn_node(data: str, name: str, dsn: str | None, lease: float | None = None) -> Any:
    env = {**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN}
    args = ["-m", "sync_server", "serve", "--port", "0", "--data-dir", os.path.join(data, name)]
    args += ["--log-level", "WARNING"]
    if dsn is not None:
        args += ["--database", dsn, "--node-id", name]
        if lease is not None:
            args += ["--lease-seconds", str(lease)]
    return start(args, r"listening on (ws://\S+)", env, os.path.join(data, f"{name}.log"))


async def _drive_nodes(
    urls: list[str], pids: list[int], rooms: int, clients: int, seconds: float
) -> dict[str, float]:
    """Rooms spread over the nodes; every node driven at once."""
    per_node = [rooms // len(urls) + (i < rooms % len(urls)) for i in range(len(urls))]
    tokens = [
        await setup_vtt(url, n, clients, prefix=f"n{i}-")
        for i, (url, n) in enumerate(zip(urls, per_node, strict=True))
    ]
    pg0, own0, t0 = postgres_cpu(), time.process_time(), time.perf_counter()
    results = await asyncio.gather(
        *(
            drive(url, t, seconds, False, pid)
            for url, t, pid in zip(urls, tokens, pids, strict=True)
        )
    )
    pg = postgres_cpu() - pg0
    own = (time.process_time() - own0) / (time.perf_counter() - t0) * 100
    cmds = sum(r["cmds_per_s"] for r in results)
    n = cmds * seconds
    return {
        "cmds_per_s": cmds,
        "p99_ms": max(r["p99_ms"] for r in results),
        "node_cpu_us_per_cmd": statistics.fmean(r["cpu_us_per_cmd"] for r in results),
        "pg_cpu_us_per_cmd": pg / max(n, 1) * 1e6,
        "loadgen_cpu_pct": own,
        "errors": sum(r["errors"] for r in results),
    }


def run_nodes(count: int, database: bool, ns: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as data:
        dsn, name = (None, None)
        if database:
            dsn, name = asyncio.run(create_database(admin_dsn()))
        procs = []
        try:
            for i in range(count):
                procs.append(spawn_node(data, f"n{i}", dsn))
            urls = [url for _, url in procs]
            pids = [p.pid for p, _ in procs]
            return asyncio.run(_drive_nodes(urls, pids, ns.rooms, ns.clients, ns.seconds))
        finally:
            for proc, _ in procs:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
            if name is not None:
                asyncio.run(drop_database(name, admin_dsn()))


async def _failover(urls: list[str], victim: Any) -> float:
    """A room owned by urls[0]'s node, a GM sending commands through
    urls[1]; kill -9 the owner; seconds until a command is acknowledged again."""
    ws, _ = await hello(urls[0], ADMIN_TOKEN, None)
    await ws.send(msgpack.packb(protocol.cmd("mk", "create_room", {"room": "fo", "name": "fo"})))
    gm_token = msgpack.unpackb(await ws.recv())["result"]["gm_token"]
    await ws.close()
    owner, _ = await hello(urls[0], gm_token, "fo")  # node 0 claims the room
    await owner.close()
    n = 0

    async def one_command() -> bool:
        nonlocal n
        n += 1
        try:
            async with asyncio.timeout(2):
                ws, _ = await _follow(urls[1], gm_token)
                await ws.send(msgpack.packb(protocol.cmd(f"c{n}", "advance_clock", {"seconds": 1})))
                while True:
                    frame = msgpack.unpackb(await ws.recv())
                    if frame.get("id") == f"c{n}" and frame["t"] in ("ack", "error"):
                        await ws.close()
                        return frame["t"] == "ack"
        except Exception:
            return False

    assert await one_command()
    victim.kill()
    killed = time.monotonic()
    while not await one_command():
        await asyncio.sleep(0.05)
    return time.monotonic() - killed


async def _follow(url: str, token: str) -> tuple[Any, dict[str, Any]]:
    """Hello, following redirects (as the clients do)."""
    for _ in range(protocol.MAX_REDIRECTS + 1):
        ws, frame = await hello_raw(url, token, "fo")
        if frame.get("t") == "redirect":
            await ws.close()
            url = frame["url"]
            continue
        return ws, frame
    raise RuntimeError("too many redirects")


async def hello_raw(url: str, token: str, room: str) -> tuple[Any, dict[str, Any]]:
    from websockets.asyncio.client import connect
    from websockets.typing import Subprotocol

    ws = await connect(
        url, subprotocols=[Subprotocol(protocol.MSGPACK)], max_size=None, open_timeout=2
    )
    await ws.send(msgpack.packb(protocol.hello(token, room)))
    return ws, msgpack.unpackb(await ws.recv())


def run_failover(lease: float) -> float:
    with tempfile.TemporaryDirectory() as data:
        dsn, name = asyncio.run(create_database(admin_dsn()))
        procs = []
        try:
            for i in range(2):
                procs.append(spawn_node(data, f"n{i}", dsn, lease))
            return asyncio.run(_failover([url for _, url in procs], procs[0][0]))
        finally:
            for proc, _ in procs:
                with contextlib.suppress(Exception):
                    proc.kill()
                    proc.wait(10)
            asyncio.run(drop_database(name, admin_dsn()))


def main() -> None:
    ap = load_options(__doc__)
    ap.add_argument("--leases", default="1,2,4", help="lease lengths for the failover, seconds")
    ns = ap.parse_args()
    ns.rooms, ns.clients = min(ns.rooms, 200), max(2, min(ns.clients, 64))
    ns.seconds, ns.runs = min(ns.seconds, 30.0), min(ns.runs, 10)
    med = statistics.median

    def median_of(fn: Any) -> dict[str, float]:
        runs = [fn() for _ in range(ns.runs)]
        return {k: med(r[k] for r in runs) for k in runs[0]}

    print(f"{ns.rooms} rooms x {ns.clients} clients, {ns.seconds:g} s/run, median of {ns.runs}")
    # 1 and 2: interleaved, one run of each setup in turn
    setups = {"sqlite, 1 node": (1, False), "postgres, 1 node": (1, True),
              "postgres, 2 nodes": (2, True), "postgres, 3 nodes": (3, True)}  # fmt: skip
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in setups}
    for _ in range(ns.runs):
        for label, (count, db) in setups.items():
            runs[label].append(run_nodes(count, db, ns))
    results = {k: {f: med(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    cols = ("cmds_per_s", "p99_ms", "node_cpu_us_per_cmd", "pg_cpu_us_per_cmd", "loadgen_cpu_pct")
    print(
        f"{'':20}{'cmds/s':>10}{'p99 ms':>10}{'node us/cmd':>13}{'pg us/cmd':>11}{'loadgen %':>11}"
    )
    for label, r in results.items():
        print(
            f"{label:20}"
            + "".join(f"{r[c]:>{w}.1f}" for c, w in zip(cols, (10, 10, 13, 11, 11), strict=True))
        )
    base, pg1 = results["sqlite, 1 node"], results["postgres, 1 node"]
    both = pg1["node_cpu_us_per_cmd"] + pg1["pg_cpu_us_per_cmd"]
    print(
        f"postgres/sqlite, one node: commands/s {pg1['cmds_per_s'] / base['cmds_per_s']:.2f}x, "
        f"p99 {pg1['p99_ms'] / base['p99_ms']:.2f}x, node CPU/cmd "
        f"{pg1['node_cpu_us_per_cmd'] / base['node_cpu_us_per_cmd']:.2f}x, node+db CPU/cmd "
        f"{both / base['node_cpu_us_per_cmd']:.2f}x"
    )
    for n in (2, 3):
        r = results[f"postgres, {n} nodes"]
        print(
            f"{n} nodes / 1 node (postgres): commands/s {r['cmds_per_s'] / pg1['cmds_per_s']:.2f}x"
        )
    print("\nfailover after kill -9 of the room's node (seconds until acknowledged again):")
    for lease in (float(x) for x in ns.leases.split(",")):
        times = [run_failover(lease) for _ in range(ns.runs)]
        each = ", ".join(f"{t:.2f}" for t in times)
        print(f"  lease {lease:g} s: median {med(times):.2f} s (runs: {each})")


if __name__ == "__main__":
    main()
    sys.exit(0)
