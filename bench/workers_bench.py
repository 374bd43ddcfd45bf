"""Every core: one server process against `serve --workers N` on SQLite
(loopback only, bounded in time):

    python -m bench.workers_bench [--rooms 20] [--clients 8] [--seconds 4] [--runs 3]
                                  [--workers 2] [--synchronous FULL]

The same load as bench/server_bench.py (one GM loop per room, every client
receiving every patch, acks durable: synchronous=FULL), against a plain
`serve` and against `serve --workers N` for each N, interleaved run by run
(medians), so that the machine's other work weighs on every setup alike.
Clients open the shared port; a hello that lands on a worker not serving
its room follows the redirect, as the clients do. CPU is the sum of the
workers' (the supervisor does nothing while serving). Also printed: how the
rooms spread over the workers (their leases), and this process's CPU (on a
small machine the load generator competes with the workers for cores).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sqlite3
import statistics
import sys
import tempfile
from collections import Counter
from typing import Any

from bench.server_bench import ADMIN_TOKEN, drive, load_options, setup_vtt, start, stop_server


def spread(data: str) -> str:
    """Rooms per worker, from the leases in the database file."""
    conn = sqlite3.connect(os.path.join(data, "vtt-sync.sqlite3"), timeout=10)
    try:
        owners = Counter(
            owner.rsplit("/", 1)[-1]
            for (owner,) in conn.execute("SELECT owner FROM room_leases")
            if owner is not None
        )
    finally:
        conn.close()
    return "/".join(str(owners[w]) for w in sorted(owners)) or "-"


def one_run(workers: int, ns: argparse.Namespace) -> dict[str, Any]:
    """`workers` 0: a plain `serve`; else `serve --workers N` (N >= 2:
    `--workers 1` is the plain server)."""
    env = {**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN}
    with tempfile.TemporaryDirectory() as data:
        log = os.path.join(data, "server.log")
        args = ["-m", "sync_server", "serve", "--port", "0", "--data-dir", data]
        args += ["--log-level", "WARNING", "--synchronous", ns.synchronous]
        if workers:
            args += ["--workers", str(workers)]
        proc, url = start(args, r"listening on (ws://[^\s\"]+)", env, log)
        try:
            pids = [proc.pid]
            if workers:
                with open(log) as f:
                    pids = [
                        int(p) for p in re.findall(r"worker \d+: node \S+, pid (\d+)", f.read())
                    ]
            tokens = asyncio.run(setup_vtt(url, ns.rooms, ns.clients))
            result = asyncio.run(drive(url, tokens, ns.seconds, False, pids))
            result["spread"] = spread(data) if workers else str(ns.rooms)
            return result
        finally:
            stop_server(proc)


COLUMNS = (
    ("cmds_per_s", "cmds/s", 9),
    ("p50_ms", "p50 ms", 8),
    ("p99_ms", "p99 ms", 8),
    ("cpu_us_per_cmd", "server us/cmd", 14),
    ("server_cpu_pct", "server CPU %", 13),
    ("loadgen_cpu_pct", "loadgen CPU %", 14),
    ("errors", "errors", 7),
)


def main() -> None:
    ap = load_options(__doc__)
    ap.add_argument(
        "--workers", default="2", help="worker counts (2 or more) to compare with one process"
    )
    ap.add_argument(
        "--synchronous",
        default="FULL",
        choices=("FULL", "NORMAL"),
        help="SQLite's synchronous pragma: FULL (an fsync per commit group, the default) or "
        "NORMAL (none: the CPU, not the disk, is then the limit)",
    )
    ns = ap.parse_args()
    ns.rooms, ns.clients = min(ns.rooms, 200), max(2, min(ns.clients, 64))
    ns.seconds, ns.runs = min(ns.seconds, 30.0), min(ns.runs, 10)
    setups = {"serve (1 process)": 0} | {
        f"--workers {n}": n for n in (int(x) for x in ns.workers.split(","))
    }
    print(
        f"{ns.rooms} rooms x {ns.clients} clients, {ns.seconds:g} s/run, "
        f"SQLite {ns.synchronous}, "
        f"median of {ns.runs} interleaved runs, {os.cpu_count()} cores"
    )
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in setups}
    for _ in range(ns.runs):
        for label, n in setups.items():
            runs[label].append(one_run(n, ns))
    print(f"{'':20}" + "".join(f"{title:>{w}}" for _, title, w in COLUMNS) + "  rooms per worker")
    med: dict[str, dict[str, float]] = {}
    for label, rs in runs.items():
        med[label] = {k: statistics.median(r[k] for r in rs) for k, _, _ in COLUMNS}
        print(
            f"{label:20}"
            + "".join(f"{med[label][k]:>{w}.1f}" for k, _, w in COLUMNS)
            + "  "
            + ", ".join(r["spread"] for r in rs)
        )
    base = med["serve (1 process)"]
    for label in list(setups)[1:]:
        r = med[label]
        print(
            f"{label} / 1 process: commands/s {r['cmds_per_s'] / base['cmds_per_s']:.2f}x, "
            f"p99 {r['p99_ms'] / base['p99_ms']:.2f}x, "
            f"server CPU/cmd {r['cpu_us_per_cmd'] / base['cpu_us_per_cmd']:.2f}x"
        )


if __name__ == "__main__":
    main()
    sys.exit(0)
