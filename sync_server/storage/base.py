"""What the server keeps, and the interface of whatever keeps it.

A backend (SQLite in sqlite_store.py, the in-memory reference in
memory_store.py, PostgreSQL for a cluster in pg_store.py) implements `Storage` and nothing
else: rooms, sessions and rules speak only `Storage` and these records.
What a backend must do is pinned by the contract test suite
(tests/server/test_storage_contract.py), which every backend passes.

What stays out of backends: turning a snapshot and the log after it into a
room's state (`replay`, below), so that every backend rebuilds rooms the
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
(pg_store.py) the same check also names the node's claim of the room
(owner, epoch, unexpired lease, see ownership.py) and raises `Fenced` when
the node lost it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import attrs

from rules.patch import applied, apply_ops
from rules.view import (
    CLASS_PUBLIC,
    PatchClasses,
    Viewer,
    new_memo,
    private_owners,
    restricted,
    view_patch,
)
from sync_server.core.limits import MAX_STORED_VIEWS_PER_VERSION


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
    # How viewers who do not see everything see this version (`version_views`):
    # None when every viewer gets the plain patch.
    views: Views | None = None


# How one stored version looks to the viewers who do not see everything
# (docs/views.md), stored with it so that resumes and history after a
# restart (or an import) give each viewer their view without the states
# before and after at hand: {"public": [ops, events], "players": {user:
# [ops, events]}}. "public" is what observers and every player without a
# view class of their own get; "players" holds the players whose view of
# this version differs from it (those owning a character that is not
# `full`, before or after). The GM and admin get the plain patch. "resync"
# (when present) lists the players whose own view was not rendered, past
# the cap of views per version (limits.MAX_STORED_VIEWS_PER_VERSION): they
# get no patch of this version, but a snapshot (`needs_snapshot`).
Views = dict[str, Any]
PUBLIC_VIEWER = Viewer(None, "observer")


def version_views(
    before: dict[str, Any],
    after: dict[str, Any],
    ops: list[Any],
    events: list[dict[str, Any]],
    max_players: int | None = None,
) -> Views | None:
    """What to store of a version for the viewers (see `Views`): None when
    the rules say no viewer's patch differs from the plain one. At most
    `max_players` players' own views are rendered (None: all), the rest
    listed under "resync"."""
    if not restricted(ops, events, before, after):
        return None
    memo = new_memo()  # status views shared by the renders of this version
    public = list(view_patch(before, after, ops, events, PUBLIC_VIEWER, memo))
    players: dict[str, list[Any]] = {}
    # A player whom the patch does not concern gets the public view: only the
    # others are rendered (a room of 98 players owning status patients costs
    # two renders for a hit on one NPC, not 99).
    classes = PatchClasses(before, after, ops, events)
    resync: list[str] = []
    for user in sorted(private_owners(before) | private_owners(after)):
        viewer = Viewer(user, "player")
        if classes.key(viewer) == CLASS_PUBLIC:
            continue
        if max_players is not None and len(players) + len(resync) >= max_players:
            resync.append(user)
            continue
        own = list(view_patch(before, after, ops, events, viewer, memo))
        if own != public:
            players[user] = own
    views: Views = {"public": public, "players": players}
    if resync:
        views["resync"] = resync
    return views


def needs_snapshot(views: Views | None, viewer: Viewer) -> bool:
    """Whether `viewer`'s view of this version was not rendered (past the
    cap: "resync"): it must get a snapshot instead of this version's patch."""
    return (
        views is not None
        and not viewer.sees_all
        and viewer.role == "player"
        and viewer.user in views.get("resync", ())
    )


def view_key(views: Views, viewer: Viewer) -> Any:
    """Viewers with equal keys get the same stored view of a version; None
    for those who get the plain patch (the GM, the admin)."""
    if viewer.sees_all:
        return None
    if viewer.role == "player" and viewer.user in views["players"]:
        return ("player", viewer.user)
    return "public"


def view_ops_events(views: Views, viewer: Viewer) -> tuple[list[Any], list[dict[str, Any]]]:
    """The (ops, events) a viewer who does not see everything gets (for one
    who `needs_snapshot`, the public ones: never more than its view, for a
    history; its mirror takes a snapshot instead)."""
    key = view_key(views, viewer)
    ops, events = views["public"] if key == "public" else views["players"][viewer.user]
    return ops, events


def backfill_views(
    snapshot_v: int,
    snapshot: dict[str, Any],
    versions: Iterable[tuple[int, list[Any], list[Any], list[dict[str, Any]]]],
    max_players: int | None = MAX_STORED_VIEWS_PER_VERSION,
) -> dict[int, Views | None]:
    """The stored views of every version of a log that has none (a database
    or a room file from before they were stored): (v, ops, inverse, events)
    for 1..head, and a snapshot among them. The states before and after
    each version are rebuilt from the snapshot: forwards with each
    version's ops, backwards with its inverse (so the log's beginning needs
    no snapshot of its own)."""
    rows = {v: (ops, inverse, events) for v, ops, inverse, events in versions}
    out: dict[int, Views | None] = {}
    after = snapshot
    # Each state is built copy-on-write from its neighbour (`rules.applied`:
    # only what a version touches is copied; deep copies of a 200-character
    # state were 97% of an import of 2,000 versions), and at most
    # `max_players` players' views are rendered, as the room core does.
    for v in range(snapshot_v, 0, -1):
        ops, inverse, events = rows[v]
        before = applied(after, inverse)
        out[v] = version_views(before, after, ops, events, max_players)
        after = before
    before = snapshot
    for v in range(snapshot_v + 1, max(rows, default=0) + 1):
        ops, _inverse, events = rows[v]
        after = applied(before, ops)
        out[v] = version_views(before, after, ops, events, max_players)
        before = after
    return out


@attrs.frozen
class PatchRow:
    """A logged version in the shape a client receives it."""

    v: int
    cmd_id: str | None
    user: str
    ops: list[Any]
    events: list[dict[str, Any]]
    views: Views | None = None  # see `version_views`

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


# Versions are below this: `undo_target(room, before=None)` reads every one.
NO_VERSION_BOUND = 2**63 - 1


def undo_bound(before: int | None) -> int:
    """The SQL bound of `undo_target`'s `before` (None: no bound)."""
    return NO_VERSION_BOUND if before is None else before


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


def name_after(snapshot_name: Any, renames: Iterable[Any]) -> str | None:
    """A room's name from its latest snapshot's and the `update_room` args
    logged after it (oldest first): the last rename wins."""
    name = snapshot_name if isinstance(snapshot_name, str) else None
    for args in renames:
        if isinstance(args, dict) and isinstance(args.get("name"), str):
            name = args["name"]
    return name


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
