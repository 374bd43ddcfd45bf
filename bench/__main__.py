"""Every benchmark, one after the other (scripts, not tests; loopback only):

    python -m bench            # rules engine, server load vs relay, memory/start-up,
                               # storage (SQLite vs PostgreSQL), the durable write's floor,
                               # the HTTP door's attacks (borders_bench)

Each also runs alone: python -m bench.rules_bench, python -m bench.server_bench,
python -m bench.memory_bench (see docs/performance.md), python -m
bench.storage_bench (see docs/cluster.md).
"""

from __future__ import annotations

import subprocess
import sys

MODULES = (
    "bench.rules_bench",
    "bench.server_bench",
    "bench.isolation_bench",
    "bench.memory_bench",
    "bench.storage_bench",
    "bench.log_bench",
    "bench.gil_bench",
    "bench.borders_bench",
)
for module in MODULES:
    print(f"\n=== python -m {module}", flush=True)
    subprocess.run([sys.executable, "-m", module], check=True)
