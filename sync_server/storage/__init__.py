"""What the server keeps, and the backends that keep it.

  base       the `Storage` interface, its records and errors, and `replay`
             (re-exported here: `from sync_server.storage import Storage`)
  memory     the in-memory reference backend
  sqlite     SQLite (WAL, group commit): the single-node default
  postgres   PostgreSQL (asyncpg, fenced group commit) for cluster mode
  transfer   the room file: export format, checks before an import
  datadir    one server per data directory (an exclusive lock)

A third-party backend implements `Storage` and runs
`sync_server.testing` 's contract suite against itself.
"""

from sync_server.storage.base import (
    AdminRecord,
    DedupEntry,
    Fenced,
    LoadedRoom,
    PatchRow,
    RoomDeleted,
    RoomDump,
    RoomExists,
    RoomSummary,
    Storage,
    StorageError,
    StoredRoom,
    TokenInUse,
    UndoTarget,
    VersionConflict,
    VersionRecord,
    replay,
)

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
]
