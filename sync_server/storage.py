"""What the server keeps, and the interface of whatever keeps it.

The SQLite implementation (sqlite_store.py) is the first; a multi-node mode
on a real database replaces it without touching rooms, sessions or rules,
so everything above this seam speaks only `Storage` and these records.

Durability contract: when `commit` (or `create_room`, `delete_room`)
returns, the change survives a crash of the process (and, with the default
`synchronous=FULL`, of the machine). The server sends a patch to nobody
before its version is committed.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs


class StorageError(Exception):
    """The data directory cannot be used (unwritable, full, corrupt): a clear
    message for the operator, never a silent loss."""


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


@attrs.frozen
class PatchRow:
    """A logged version in the shape a client receives it."""

    v: int
    cmd_id: str | None
    user: str
    ops: list[Any]
    events: list[dict[str, Any]]

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


@attrs.frozen
class LoadedRoom:
    """A room as found in storage: its state at its last version, the most
    recent patches (for `since`) and the command ids still deduplicated."""

    room: str
    v: int
    state: dict[str, Any]
    recent: list[PatchRow]
    dedup: list[DedupEntry]


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

    async def load_room(self, room: str, recent: int, dedup_window: int) -> LoadedRoom | None: ...

    async def commit(
        self,
        room: str,
        records: list[VersionRecord],
        snapshot: tuple[int, dict[str, Any]] | None,
    ) -> None:
        """Append versions (and maybe a snapshot) atomically. Concurrent
        calls may be committed together in one transaction (group commit);
        each call returns only once its records are durable."""
        ...

    async def patches(self, room: str, after: int, upto: int) -> list[PatchRow]:
        """Logged versions after `after` up to `upto`, in order."""
        ...

    async def find_token(self, token_hash: bytes) -> tuple[str, str] | None:
        """(room, user) owning a token hash, or None."""
        ...

    async def undo_target(self, room: str) -> UndoTarget | None: ...
