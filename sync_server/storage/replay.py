"""Rebuilding from what is stored, the same way for every backend: a room's
state from its snapshot and the log after it (`replay`), and its name from
its snapshot and the renames logged after it (`name_after`).

Not a backend's job (docs/architecture.md): a backend reads rows, and these
turn them into what the server serves.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rules.patch import apply_ops
from sync_server.core.records import LoadedRoom, StorageError, StoredRoom


def replay(stored: StoredRoom, recent: int) -> LoadedRoom:
    """Snapshot + the log after it -> the room's current state. Refuses a
    log with a hole (a missing version is damage, never something to skip).
    The stored room is the caller's own (backends hand out fresh objects),
    so its snapshot becomes the state in place."""
    state = stored.snapshot
    v = stored.snapshot_v
    for row in stored.log:
        if row.v <= stored.snapshot_v:
            continue
        if row.v != v + 1:
            raise StorageError(f"room {stored.room!r}: version {v + 1} missing from the log")
        apply_ops(state, row.ops)
        v = row.v
    tail = [row for row in stored.log if row.v > v - recent]
    return LoadedRoom(stored.room, v, state, tail, stored.dedup)


def name_after(snapshot_name: Any, renames: Iterable[Any]) -> str | None:
    """A room's name from its latest snapshot's and the `update_room` args
    logged after it (oldest first): the last rename wins."""
    name = snapshot_name if isinstance(snapshot_name, str) else None
    for args in renames:
        if isinstance(args, dict) and isinstance(args.get("name"), str):
            name = args["name"]
    return name
