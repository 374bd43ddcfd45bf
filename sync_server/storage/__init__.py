"""What the server keeps, and the backends that keep it.

  base       the `Storage` interface
  replay     a room's state (and name) rebuilt from its snapshot and log
  memory     the in-memory reference backend
  sqlite     SQLite (WAL, group commit): the single-node default; its
             file's tables, rows and migrations in sqlite_schema
  postgres   PostgreSQL (asyncpg, fenced group commit) for cluster mode;
             its migrations in pg_schema, its group commit's statement in
             pg_commit
  transfer   the room file: export format, checks before an import
  datadir    one server per data directory (an exclusive lock)

The records a backend keeps and the errors it raises are the room core's
(sync_server/core/records.py): every name is re-exported here, so a backend
writes `from sync_server.storage import Storage, VersionRecord`.

A third-party backend implements `Storage` and runs
`sync_server.testing` 's contract suite against itself.
"""

from sync_server.core.records import (
    AdminRecord,
    DedupEntry,
    Fenced,
    LoadedRoom,
    PatchRow,
    RoomDeleted,
    RoomDump,
    RoomExists,
    RoomSummary,
    StorageError,
    StoredRoom,
    TokenInUse,
    UndoTarget,
    VersionConflict,
    VersionRecord,
)
from sync_server.storage.base import Storage, undo_bound
from sync_server.storage.replay import replay

__all__ = [
    "AdminRecord",
    "DedupEntry",
    "Fenced",
    "LoadedRoom",
    "PatchRow",
    "RoomDeleted",
    "RoomDump",
    "RoomExists",
    "RoomSummary",
    "Storage",
    "StorageError",
    "StoredRoom",
    "TokenInUse",
    "UndoTarget",
    "VersionConflict",
    "VersionRecord",
    "replay",
    "undo_bound",
]
