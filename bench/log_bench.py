"""The durable write alone: SQLite's versions table against an append-only file.

    python -m bench.log_bench [--versions 10000] [--groups 1,10,64] [--runs 3]

What would an append-only version log (SQLite kept for tokens and
snapshots) save? This measures the floor of each, in one thread, without
the server: per group of G versions (20 rooms in turn, as the bench's
load spreads them),

- `sqlite`: what `SqliteStorage` runs for a commit, with its schema
  (`SCHEMA`), its pragmas (WAL, synchronous=FULL) and its very statements
  (`move_head` and `write_version`, which `SqliteStorage.commit` calls):
  one transaction, per version the head UPDATE and the INSERT of its
  columns and blob;
- `log`: the same blobs, length-prefixed, appended to one file with one
  `os.write` and one `os.fdatasync` per group (what a log needs to be as
  durable as synchronous=FULL; no index, no reader).

Prints this thread's CPU per version (process time: SQLite's work and the
kernel's fsync are both in it), the wall time per version, and log/sqlite,
as medians of --runs interleaved runs. On the disk of the data directory
(`--dir`, default the temporary directory). A bound, not a design: a log
would also need its recovery, its reads (resume, history, undo, dedup) and
its compaction, which cost more code than CPU.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable

from bench.storage_bench import version
from sync_server.storage.sqlite_schema import SCHEMA, move_head, pack, pack_version, write_version

ROOMS = 20  # server_bench's default load: the rooms a group's versions come from


def run_sqlite(directory: str, versions: int, group: int) -> tuple[float, float]:
    """CPU and wall seconds of `versions` commits to SQLite, `group` per
    transaction, written by `SqliteStorage`'s own statements."""
    conn = sqlite3.connect(os.path.join(directory, "bench.sqlite3"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(SCHEMA)
    rooms = [f"room{i}" for i in range(ROOMS)]
    for room in rooms:
        conn.execute("INSERT INTO rooms (room, created, head) VALUES (?, 0, 0)", (room,))
    heads = dict.fromkeys(rooms, 0)
    cpu, wall = time.process_time(), time.perf_counter()
    for g in range(versions // group):
        conn.execute("BEGIN IMMEDIATE")
        for j in range(group):
            room = rooms[(g * group + j) % ROOMS]
            v = heads[room] + 1
            move_head(conn, room, v - 1, v)
            write_version(conn, room, version(room, v))
            heads[room] = v
        conn.execute("COMMIT")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    conn.close()
    return cpu, wall


def run_log(directory: str, versions: int, group: int) -> tuple[float, float]:
    """The same versions' blobs appended to one file, one fdatasync per group."""
    fd = os.open(os.path.join(directory, "bench.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    heads = [0] * ROOMS
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        for g in range(versions // group):
            parts = []
            for j in range(group):
                i = (g * group + j) % ROOMS
                heads[i] += 1
                r = version(f"room{i}", heads[i])
                blob = pack_version(r) + pack(r.result)
                parts.append(len(blob).to_bytes(4, "little") + blob)
            os.write(fd, b"".join(parts))
            os.fdatasync(fd)
    finally:
        os.close(fd)
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", type=int, default=10000)
    ap.add_argument("--groups", default="1,10,64", help="versions per commit (per fsync)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the files go (the data directory's disk)")
    ns = ap.parse_args()
    kinds: dict[str, Callable[[str, int, int], tuple[float, float]]] = {
        "sqlite": run_sqlite,
        "log": run_log,
    }
    print(f"{ns.versions} versions, {ROOMS} rooms, median of {ns.runs} interleaved runs")
    print(f"{'group':>6} {'kind':>7} {'CPU us/version':>15} {'wall us/version':>16}")
    for group in (int(g) for g in ns.groups.split(",")):
        found: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
        for _ in range(ns.runs):
            for kind, fn in kinds.items():
                with tempfile.TemporaryDirectory(dir=ns.dir) as d:
                    cpu, wall = fn(d, ns.versions, group)
                n = ns.versions // group * group  # versions written
                found[kind].append((cpu / n * 1e6, wall / n * 1e6))
        med = {
            k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
            for k, v in found.items()
        }
        for kind in kinds:
            print(f"{group:>6} {kind:>7} {med[kind][0]:>15.1f} {med[kind][1]:>16.1f}")
        print(
            f"{'':>6} {'log/sql':>7} {med['log'][0] / med['sqlite'][0]:>14.2f}x"
            f" {med['log'][1] / med['sqlite'][1]:>15.2f}x"
        )


if __name__ == "__main__":
    main()
