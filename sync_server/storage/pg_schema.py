"""The PostgreSQL database's schema, as the migrations that build it: each
step from a version to the next (`MIGRATIONS`; the schema's version is their
count), run by `PgStorage.open` under an advisory lock (nodes may start
together), and how the stored blobs read back (`unpack`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import msgpack

from sync_server.core.views import backfill_views
from sync_server.storage import StorageError
from sync_server.wire.codec import packb


def unpack(blob: bytes) -> Any:
    """A stored blob (MessagePack, as `codec.packb` wrote it)."""
    return msgpack.unpackb(blob, raw=False, strict_map_key=False)


# Key of the advisory lock that serializes schema migrations between
# nodes starting together (any constant; "vtt-sync" in ASCII).
MIGRATION_LOCK = 0x7674742D73796E63


async def _backfill_views(conn: asyncpg.Connection) -> None:
    """1 -> 2: each version's views for the viewers who do not see
    everything (`core.views.version_views`), rebuilt from the log and
    the latest snapshot of each room; NULL stays where every viewer gets
    the plain patch."""
    for room, snap_v in await conn.fetch("SELECT room, snapshot_v FROM rooms"):
        state = await conn.fetchval(
            "SELECT state FROM snapshots WHERE room = $1 AND v = $2", room, snap_v
        )
        if state is None:
            raise StorageError(f"room {room!r} has no snapshot at version {snap_v}")
        rows = await conn.fetch(
            "SELECT v, ops, inverse, events FROM versions WHERE room = $1 ORDER BY v", room
        )
        views = backfill_views(
            snap_v,
            unpack(state),
            ((r[0], unpack(r[1]), unpack(r[2]), unpack(r[3])) for r in rows),
        )
        await conn.executemany(
            "UPDATE versions SET views = $1 WHERE room = $2 AND v = $3",
            [(packb(found), room, v) for v, found in views.items() if found is not None],
        )


# Schema migrations: MIGRATIONS[i] brings a database at version i to i+1,
# in one transaction (SQL statements, or functions of the connection).
# Version 0 is an empty database.
MIGRATIONS: tuple[tuple[str | Callable[[asyncpg.Connection], Awaitable[None]], ...], ...] = (
    # 0 -> 1: the first schema.
    (
        "CREATE SEQUENCE room_epochs",
        """CREATE TABLE rooms (
            room text PRIMARY KEY,
            created double precision NOT NULL,
            head bigint NOT NULL DEFAULT 0,
            snapshot_v bigint NOT NULL DEFAULT 0,
            owner text,
            owner_url text,
            epoch bigint NOT NULL DEFAULT 0,
            lease_until timestamptz)""",
        """CREATE TABLE users (
            room text NOT NULL,
            user_id text NOT NULL,
            token_hash bytea NOT NULL UNIQUE,
            PRIMARY KEY (room, user_id))""",
        """CREATE TABLE versions (
            room text NOT NULL,
            v bigint NOT NULL,
            cmd_id text,
            user_id text NOT NULL,
            op text NOT NULL,
            args bytea NOT NULL,
            ops bytea NOT NULL,
            inverse bytea NOT NULL,
            events bytea NOT NULL,
            result bytea NOT NULL,
            undoable boolean NOT NULL,
            undone boolean NOT NULL DEFAULT false,
            undoes bigint,
            ts double precision NOT NULL,
            PRIMARY KEY (room, v),
            UNIQUE (room, user_id, cmd_id))""",
        "CREATE INDEX versions_undo ON versions (room, v) WHERE undoable AND NOT undone",
        """CREATE TABLE snapshots (
            room text NOT NULL,
            v bigint NOT NULL,
            state bytea NOT NULL,
            PRIMARY KEY (room, v))""",
        """CREATE TABLE admin_log (
            cmd_id text PRIMARY KEY,
            op text NOT NULL,
            args bytea NOT NULL,
            result bytea NOT NULL,
            ts double precision NOT NULL)""",
    ),
    # 1 -> 2: what viewers who do not see everything get of each version, so
    # resumes and history after a restart are their views (docs/views.md).
    ("ALTER TABLE versions ADD COLUMN views bytea", _backfill_views),
    # 2 -> 3: the running nodes, so that a second process started under a
    # node id already in use is refused instead of fighting for its rooms.
    (
        """CREATE TABLE nodes (
            node_id text PRIMARY KEY,
            instance text NOT NULL,
            url text NOT NULL,
            seen timestamptz NOT NULL)""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

# Tables holding data (for tests that empty a database between cases).
DATA_TABLES = ("rooms", "users", "versions", "snapshots", "admin_log", "nodes")
