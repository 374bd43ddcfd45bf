"""What the room core hands storage and reads back: the records of a room
(its versions, patches, dedup entries, the loaded room, the undo target,
admin records, a room's dump and summary), and the errors a store raises,
by which the core answers a failed commit (a conflict, a lost claim, a
deleted room).

Plain attrs data, no backend: the core makes them and storage keeps them
(`sync_server.storage` re-exports every name, so a backend imports them
from there). They sit in the core so that the core reads none of storage's
modules, and storage builds on the core, as the layers are drawn.
"""

from __future__ import annotations

from typing import Any

import attrs

from sync_server.core.views import Views


class StorageError(Exception):
    """The data directory cannot be used (unwritable, full, corrupt): a clear
    message for the operator, never a silent loss."""


class RoomExists(StorageError):
    """`import_room` without `replace` found a room with that id."""


class TokenInUse(StorageError):
    """`import_room` brought a token hash that a user of another room owns:
    nothing was stored (the admin's answer is a `conflict`)."""


class VersionConflict(StorageError):
    """A commit built on a head version that is no longer the stored head:
    another writer got there first. Nothing of that commit was stored."""


class Fenced(VersionConflict):
    """Cluster mode: this node no longer owns the room (another node claimed
    it, or its lease expired by the database's clock, or it released it), so
    the commit was refused and nothing of it was stored. A `VersionConflict`
    because the server's answer is the same: drop the room at once, answer
    the pending commands `internal` (retry), close its sessions with 1012 so
    they reconnect to the room's owner."""


class RoomDeleted(Fenced):
    """Cluster mode: the room was deleted (by an admin on any node) while
    this node served it. Nothing was stored; its sessions close with 4404."""


@attrs.frozen
class VersionRecord:
    """One accepted room command: everything needed to replay it (`ops`),
    revert it (`inverse`), show it again (`events`) and answer its retry
    (`result`, which never holds a token)."""

    room: str
    v: int
    cmd_id: str | None
    user: str
    op: str
    args: Any
    ops: list[Any]
    inverse: list[Any]
    events: list[dict[str, Any]]
    result: dict[str, Any]
    undoable: bool
    ts: float
    undoes: int | None = None  # for an undo: the version it reverts (marked undone)
    # Token hashes written with this version (add_user, rotate_token)...
    token_set: tuple[tuple[str, bytes], ...] = ()
    # ...and users whose token hash is removed (remove_user).
    token_del: tuple[str, ...] = ()
    # How viewers who do not see everything see this version (`core.views.version_views`):
    # None when every viewer gets the plain patch.
    views: Views | None = None


@attrs.frozen
class PatchRow:
    """A logged version in the shape a client receives it."""

    v: int
    cmd_id: str | None
    user: str
    ops: list[Any]
    events: list[dict[str, Any]]
    views: Views | None = None  # see `core.views.version_views`

    def frame(self) -> dict[str, Any]:
        return {
            "t": "patch",
            "v": self.v,
            "ops": self.ops,
            "events": self.events,
            "by": self.user,
            "id": self.cmd_id,
        }


@attrs.frozen
class DedupEntry:
    """A remembered command id: its version and its stored result."""

    user: str
    cmd_id: str
    v: int
    result: dict[str, Any]
    ts: float | None = None  # when it was stored (the window's age bound)


@attrs.frozen
class StoredRoom:
    """A room as a backend reads it, raw: its latest snapshot, every logged
    version after min(snapshot, head - recent) in order (the replay needs
    those after the snapshot; resuming clients need the most recent ones),
    and the command ids still deduplicated."""

    room: str
    snapshot_v: int
    snapshot: dict[str, Any]
    log: list[PatchRow]
    dedup: list[DedupEntry]


@attrs.frozen
class LoadedRoom:
    """A room ready to serve: its state at its last version, the most recent
    patches (for `since`) and the command ids still deduplicated."""

    room: str
    v: int
    state: dict[str, Any]
    recent: list[PatchRow]
    dedup: list[DedupEntry]
    # What `undo` would revert now (the host reads it with the room): the
    # GM's affordances show it.
    undo: UndoTarget | None = None


@attrs.frozen
class RoomSummary:
    """One room as the admin's list shows it, read without loading it: its
    head version, when it was created and when its head was written (None
    at version 0), and its name (the latest snapshot's, or that of a rename
    logged after it)."""

    room: str
    v: int
    created: float
    last_activity: float | None
    name: str | None


@attrs.frozen
class UndoTarget:
    """The latest undoable version not yet undone."""

    v: int
    op: str
    user: str
    inverse: list[Any]


@attrs.frozen
class AdminRecord:
    """An accepted admin command (for deduplication of its retries)."""

    cmd_id: str
    op: str
    args: Any
    result: dict[str, Any]  # never a token
    ts: float


@attrs.frozen
class RoomDump:
    """Everything stored of one room, read at one instant (`export_room`) or
    to be stored at once (`import_room`): a backup of a room, or a room
    moving between servers (sync_server/storage/transfer.py turns it into the
    export file and back).

    `versions` is the whole log, 1..head in order (a version's `token_set`
    and `token_del` are left empty: the room's token hashes are `tokens`);
    `undone` the versions an undo reverted; `snapshot` the latest one, which
    `replay` starts from; `tokens` user -> token hash (only the users who
    have a token)."""

    room: str
    head: int
    created: float
    snapshot_v: int
    snapshot: dict[str, Any]
    versions: list[VersionRecord]
    undone: frozenset[int]
    tokens: dict[str, bytes]
