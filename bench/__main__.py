"""Every benchmark, one after the other (scripts, not tests; loopback only):

    python -m bench            # rules engine, server load vs relay, memory/start-up,
                               # storage (SQLite vs PostgreSQL), the durable write's floor,
                               # the HTTP door's attacks (borders_bench), big rooms,
                               # the capacity a host buys (a shorter ramp than its default)

Each also runs alone: python -m bench.rules_bench, python -m bench.server_bench,
python -m bench.memory_bench (see docs/performance.md), python -m
bench.storage_bench (see docs/cluster.md), python -m bench.capacity_bench.
"""

from __future__ import annotations

import subprocess
import sys

# Each with the arguments that keep the whole run bounded (minutes).
MODULES: tuple[tuple[str, ...], ...] = (
    ("bench.rules_bench",),
    ("bench.server_bench",),
    ("bench.isolation_bench",),
    ("bench.memory_bench",),
    ("bench.storage_bench",),
    ("bench.log_bench",),
    ("bench.gil_bench",),
    ("bench.borders_bench",),
    ("bench.big_room_bench",),
    # 100 -> 800 tables (two bisections if one fails), 10 s windows: 1-2 minutes.
    ("bench.capacity_bench", "--max-tables", "800", "--step-seconds", "10", "--warmup", "3"),
)
for module, *args in MODULES:
    print(f"\n=== python -m {' '.join((module, *args))}", flush=True)
    subprocess.run([sys.executable, "-m", module, *args], check=True)
