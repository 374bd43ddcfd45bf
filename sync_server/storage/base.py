"""The interface of whatever keeps the server's rooms: `Storage`.

A backend (SQLite in sqlite.py, the in-memory reference in memory.py,
PostgreSQL for a cluster in postgres.py) implements `Storage` and nothing
else: rooms, sessions and rules speak only `Storage` and its records
(sync_server/core/records.py, re-exported by this package). What a backend
must do is pinned by the contract suite (`sync_server.testing.contracts`,
run on every backend by tests/server/test_storage_contract.py).

What stays out of backends: turning a snapshot and the log after it into a
room's state (`replay`, replay.py), so that every backend rebuilds rooms the
same way, and every decision about what to store (the room core makes it).

Durability contract: when `commit` (or `create_room`, `delete_room`)
returns, the change survives a crash of the process (and, with SQLite's
default `synchronous=FULL`, of the machine). The server sends a patch to
nobody before its version is committed.

Fencing contract: `commit` names the head version it builds on
(`expected`); a backend commits nothing and raises `VersionConflict` when
the room's stored head is elsewhere. One node serving a room never trips
it; a second writer (a stale process, a node that lost the room in a
cluster) is stopped there, before it can fork the log. In cluster mode
(postgres.py) the same check also names the node's claim of the room
(owner, epoch, unexpired lease, see sync_server/cluster/leases.py) and
raises `Fenced` when the node lost it.
"""

from __future__ import annotations

from typing import Any, Protocol

from sync_server.core.records import (
    AdminRecord,
    DedupEntry,
    RoomDump,
    RoomSummary,
    StoredRoom,
    UndoTarget,
    VersionRecord,
)

# Versions are below this: `undo_target(room, before=None)` reads every one.
NO_VERSION_BOUND = 2**63 - 1


def undo_bound(before: int | None) -> int:
    """The SQL bound of `undo_target`'s `before` (None: no bound)."""
    return NO_VERSION_BOUND if before is None else before


class Storage(Protocol):
    """Durable rooms, users' token hashes, the log of versions, snapshots."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def room_ids(self) -> set[str]:
        """Every existing room (cheap: ids only, for lazy loading)."""
        ...

    async def create_room(
        self,
        room: str,
        state: dict[str, Any],
        gm_user: str,
        gm_token_hash: bytes,
        admin: AdminRecord,
    ) -> None:
        """Create a room at version 0 with its first GM's token hash."""
        ...

    async def delete_room(self, room: str, admin: AdminRecord) -> None:
        """Remove a room, its log, snapshots and token hashes."""
        ...

    async def admin_result(self, cmd_id: str) -> AdminRecord | None: ...

    async def load_room(
        self, room: str, recent: int, dedup_window: int, dedup_since: float | None = None
    ) -> StoredRoom | None:
        """The room's latest snapshot and log (see `StoredRoom`), with the
        command ids of its last `dedup_window` versions, none stored before
        `dedup_since` (a wall-clock time); None if no such room."""
        ...

    async def commit(
        self,
        room: str,
        records: list[VersionRecord],
        snapshot: tuple[int, dict[str, Any]] | None,
        expected: int,
    ) -> None:
        """Append versions expected+1.. (and maybe a snapshot) atomically,
        if the room's head is `expected`; else raise `VersionConflict` and
        store nothing. Concurrent calls may be committed together in one
        transaction (group commit); each returns only once its records are
        durable."""
        ...

    async def stored_command(self, room: str, user: str, cmd_id: str) -> DedupEntry | None:
        """The version that stored `user`'s command `cmd_id` in `room`, with
        its result, whether or not the dedup window still holds it (the
        log's unique index does); None if no such command is stored. Why:
        a retry of an id older than the window must get its first ack, not
        fail the batch it arrived in (RoomHost)."""
        ...

    async def find_token(self, token_hash: bytes) -> tuple[str, str] | None:
        """(room, user) owning a token hash, or None."""
        ...

    async def undo_target(self, room: str, before: int | None = None) -> UndoTarget | None:
        """The latest undoable version not yet undone (what `undo` reverts),
        or None; with `before`, the latest such version older than `before`
        (what the next undo reverts once that one is undone: the GM's
        affordances say it)."""
        ...

    async def room_summaries(self) -> list[RoomSummary]:
        """Every room (by id) as the admin's list shows it (`RoomSummary`),
        without loading any: one read per room at most."""
        ...

    async def export_room(self, room: str) -> RoomDump | None:
        """Everything stored of `room` (see `RoomDump`), as of one committed
        head: a commit never lands half inside an export. None if no such
        room. The caller's own objects, as with `load_room`."""
        ...

    async def import_room(self, dump: RoomDump, admin: AdminRecord, replace: bool = False) -> None:
        """Store a whole room at once, all or nothing: its head, the snapshot,
        every version with its undone flag (so undo and deduplication work
        as they did), its users' token hashes, and the admin record. If the
        room exists: `RoomExists` unless `replace`, which removes the old
        room (log, snapshots, token hashes) in the same transaction. A token
        hash owned by a user of another room is refused (`TokenInUse`), and
        nothing is stored."""
        ...
