"""Loading a room from SQLite (`load_room`, the first hello after a restart),
this code against an older sqlite.py (a script, not a test).

    python -m bench.load_room_bench --before OLD/sync_server/storage/sqlite.py
                                    [--versions 100000] [--runs 9]

Writes a room of --versions versions (the damage commands of
bench.storage_bench, a snapshot at the head's last SNAPSHOT_EVERY_VERSIONS
step) with the OLD module (e.g. schema 4, from `git archive`), copies the
file, and opens the copy with this code (timing the migration, once). Then
times `load_room` as the server calls it (RECENT_PATCHES_IN_MEMORY recent
versions, a dedup window of DEDUP_WINDOW_VERSIONS, and once of every
version) on both, interleaved A/B for --runs rounds, each on a storage
opened afresh (a cold page cache of SQLite's own; the OS's stays warm).
Prints medians and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.storage_bench import version
from sync_server.core.auth import hash_token
from sync_server.core.limits import (
    DEDUP_WINDOW_VERSIONS,
    RECENT_PATCHES_IN_MEMORY,
    SNAPSHOT_EVERY_VERSIONS,
)
from sync_server.storage import AdminRecord
from sync_server.storage import sqlite as new_sqlite

ROOM = "bench"
BATCH = 500  # versions per commit while filling the room


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("sqlite_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def fill(store: Any, versions: int) -> None:
    await store.open()
    try:
        admin = AdminRecord("create", "create_room", {}, {}, 0)
        await store.create_room(ROOM, {"clock": 0}, "gm", hash_token(ROOM), admin)
        snap_at = versions - versions % SNAPSHOT_EVERY_VERSIONS
        for start in range(1, versions + 1, BATCH):
            records = [version(ROOM, v) for v in range(start, min(start + BATCH, versions + 1))]
            last = records[-1].v
            snap = (snap_at, {"clock": snap_at}) if start <= snap_at <= last else None
            await store.commit(ROOM, records, snap, start - 1)
    finally:
        await store.close()


async def timed_load(cls: Any, data: Path, window: int) -> tuple[float, int]:
    store = cls(data)
    await store.open()
    try:
        t0 = time.perf_counter()
        room = await store.load_room(ROOM, RECENT_PATCHES_IN_MEMORY, window)
        took = time.perf_counter() - t0
    finally:
        await store.close()
    assert room is not None
    return took, len(room.dedup)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True, help="an older sqlite.py")
    ap.add_argument("--versions", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    old = load_module(args.before)
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "before", Path(tmp) / "after"
        t0 = time.perf_counter()
        await fill(old.SqliteStorage(a), args.versions)
        print(f"{args.versions} versions written (schema {old.SCHEMA_VERSION}) in "
              f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
        shutil.copytree(a, b)
        t0 = time.perf_counter()
        store = new_sqlite.SqliteStorage(b)
        await store.open()
        await store.close()
        print(f"migration to schema {new_sqlite.SCHEMA_VERSION}: "
              f"{time.perf_counter() - t0:.2f} s, once")  # fmt: skip
        for window in (DEDUP_WINDOW_VERSIONS, args.versions):
            times: dict[str, list[float]] = {"before": [], "after": []}
            sizes = {}
            for _ in range(args.runs):
                for name, cls, data in (
                    ("before", old.SqliteStorage, a),
                    ("after", new_sqlite.SqliteStorage, b),
                ):
                    took, sizes[name] = await timed_load(cls, data, window)
                    times[name].append(took)
            assert sizes["before"] == sizes["after"], sizes
            before, after = (statistics.median(times[k]) * 1000 for k in ("before", "after"))
            print(f"load_room, dedup window {window} ({sizes['after']} entries): "
                  f"before {before:.1f} ms, after {after:.1f} ms (medians of {args.runs}), "
                  f"ratio {before / after:.1f}x")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
