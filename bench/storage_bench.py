"""Storage benchmark: 1-record commits, SQLite vs PostgreSQL (a script, not a test).

    python -m bench.storage_bench [--rooms 20] [--seconds 4] [--runs 3]
                                  [--flushers 1,2,4] [--database postgresql://...]

Each backend in turn, through the `Storage` API only: --rooms rooms, one
task per room committing one version at a time in a closed loop (each
commit waits for the previous one, as a room's worker does), for
--seconds. SQLite is `SqliteStorage` with synchronous=FULL (the server's
default; its group commit shares one fsync among the rooms waiting);
PostgreSQL is `PgStorage` at the server's default synchronous_commit=on
(each COMMIT waits for its WAL flush), with its group commit (the commits
waiting are written in one statement), once per number of groups in flight
at once in --flushers (the default is 2). A version looks like a
server's (a damage command: a few ops, an event, the inverse).

Reports, as medians of --runs interleaved runs, commits/s, each commit's
latency (median, p99), and CPU seconds per commit: this process (event
loop, packing, SQLite's thread) plus, for PostgreSQL, every PostgreSQL
server process (from /proc; "of which DB"), then ratios to SQLite.
PostgreSQL is a fresh database on the local server (VTT_SYNC_TEST_PG_ADMIN,
default postgres@127.0.0.1:5432), dropped at the end, or --database as
given (its vtt-sync tables are emptied).
Loopback only, bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sync_server.core.auth import hash_token
from sync_server.hosting.server import leases_for
from sync_server.storage import AdminRecord, Storage, VersionRecord
from sync_server.storage.postgres import PgStorage
from sync_server.storage.sqlite import SqliteStorage
from sync_server.testing.postgres import create_database, drop_database, empty_tables

CLK_TCK = os.sysconf("SC_CLK_TCK")
WARMUP_SECONDS = 0.5


def process_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def postgres_cpu() -> float:
    """CPU seconds of every PostgreSQL server process on this machine (the
    backends serving us, the WAL writer, the checkpointer...)."""
    total = 0.0
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() in ("postgres", "postmaster"):
                total += process_cpu(int(comm.parent.name))
        except (OSError, ValueError):
            continue
    return total


def version(room: str, v: int) -> VersionRecord:
    return VersionRecord(
        room=room,
        v=v,
        cmd_id=f"c{v}",
        user="gm",
        op="damage",
        args={"target": "c1", "amount": 3, "kind": "pv"},
        ops=[["set", ["characters", "c1", "pv"], 37 - v % 30], ["set", ["clock"], v]],
        inverse=[["set", ["characters", "c1", "pv"], 40 - v % 30], ["set", ["clock"], v - 1]],
        events=[{"kind": "damage", "target": "c1", "amount": 3, "pv": 37 - v % 30}],
        result={},
        undoable=True,
        ts=time.time(),
    )


async def run(store: Storage, rooms: int, seconds: float, cpu_extra: Callable[[], float]) -> dict:
    await store.open()
    try:
        ids = [f"bench-{i}" for i in range(rooms)]
        leases = leases_for(store, node_id="bench", public_url="ws://b")
        await leases.open()
        for room in ids:
            await store.create_room(
                room, {"clock": 0}, "gm", hash_token(room), AdminRecord(room, "c", {}, {}, 0)
            )
            await leases.claim(room)
        heads = dict.fromkeys(ids, 0)
        latencies: list[float] = []

        async def room_loop(room: str, until: float) -> None:
            v = heads[room]
            while time.perf_counter() < until:
                t = time.perf_counter()
                await store.commit(room, [version(room, v + 1)], None, v)
                latencies.append(time.perf_counter() - t)
                v += 1
            heads[room] = v

        # Warm-up (connections, prepared statements, caches), then measure.
        until = time.perf_counter() + WARMUP_SECONDS
        await asyncio.gather(*(room_loop(r, until) for r in ids))
        latencies.clear()
        cpu0, extra0, t0 = time.process_time(), cpu_extra(), time.perf_counter()
        await asyncio.gather(*(room_loop(r, t0 + seconds) for r in ids))
        elapsed = time.perf_counter() - t0
        own = time.process_time() - cpu0
        db = cpu_extra() - extra0
    finally:
        await leases.close()
        await store.close()
    n = len(latencies)
    latencies.sort()
    return {
        "commits/s": n / elapsed,
        "median ms": statistics.median(latencies) * 1e3,
        "p99 ms": latencies[min(n - 1, int(n * 0.99))] * 1e3,
        "CPU ms/commit": (own + db) / n * 1e3,
        "of which DB": db / n * 1e3,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rooms", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument(
        "--flushers", default="1,2,4", help="PostgreSQL groups in flight at once, to compare"
    )
    ap.add_argument("--runs", type=int, default=3, help="runs of each; medians are shown")
    ap.add_argument("--database", help="a PostgreSQL database to use (emptied)")
    args = ap.parse_args()

    flushers = [int(f) for f in args.flushers.split(",")]
    runs: dict[str, list[dict]] = {}
    dsn, name = (args.database, None) if args.database else await create_database()
    try:
        for _ in range(args.runs):  # interleaved, so that a noisy moment hits all alike
            with tempfile.TemporaryDirectory() as tmp:
                store: Storage = SqliteStorage(Path(tmp), "FULL")
                result = await run(store, args.rooms, args.seconds, lambda: 0.0)
                runs.setdefault("SQLite FULL", []).append(result)
            for n in flushers:
                await empty_tables(dsn)
                store = PgStorage(dsn, group_flushers=n)
                result = await run(store, args.rooms, args.seconds, postgres_cpu)
                label = f"PostgreSQL {n} flusher{'s' if n > 1 else ''}"
                runs.setdefault(label, []).append(result)
    finally:
        if name is not None:
            await drop_database(name)
    results = [
        (label, {k: statistics.median(r[k] for r in rs) for k in rs[0]})
        for label, rs in runs.items()
    ]

    keys = list(results[0][1])
    print(
        f"{args.rooms} rooms, 1-record commits, {args.seconds:g} s each, median of {args.runs} runs"
    )
    print(f"{'':30}" + "".join(f"{k:>16}" for k in keys))
    for label, r in results:
        print(f"{label:30}" + "".join(f"{r[k]:16.3f}" for k in keys))
    base = results[0][1]
    for label, r in results[1:]:
        ratios = (f"{r[k] / base[k]:15.2f}x" if base[k] else f"{'-':>16}" for k in keys)
        print(f"{label + ' / SQLite':30}" + "".join(ratios))


if __name__ == "__main__":
    asyncio.run(main())
