"""The SQLite file's layout: its tables (`SCHEMA`, at `SCHEMA_VERSION`), how
one version is one row (its blob's encoding, `INSERT_VERSION`,
`write_version`, `move_head`, and reading a row back), and the migrations
from every older schema (`MIGRATIONS`, run by `SqliteStorage.open` in one
transaction). sqlite.py runs the storage on it; bench/log_bench.py measures
these very statements.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

import msgpack

from sync_server.core.views import backfill_views
from sync_server.storage import PatchRow, StorageError, VersionConflict, VersionRecord
from sync_server.wire.codec import packb

SCHEMA_VERSION = "5"

# One version: its key, what a query selects on, what the dedup window
# reads, and one blob for the rest. Why so few: every B-tree a version
# touches is pages written and fsynced per commit (columns of the same row
# add none). `cmd_id` and `user` stay columns for the unique index (a
# command id is stored once per user and room, whatever the dedup window
# holds); `undo` (1: undoable and not undone yet) lets `undo_target` walk
# back along the primary key without an index of its own; `ts` and `result`
# (schema 5) are all that loading a room's dedup window reads of up to
# DEDUP_WINDOW_VERSIONS versions, which decoding each whole blob (ops,
# inverse, events, views) made the first hello after a restart pay for. The
# blob is a map by field name (`pack_version`), so a field added later is
# one more key, read with a default from older versions: no schema change.
VERSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS {name} (
    room TEXT NOT NULL, v INTEGER NOT NULL, cmd_id TEXT, user TEXT NOT NULL,
    undo INTEGER NOT NULL, ts REAL NOT NULL, result BLOB NOT NULL, rec BLOB NOT NULL,
    PRIMARY KEY (room, v)) WITHOUT ROWID;
"""
# Schema 4's, which the 3 -> 4 migration writes (result and ts in the blob).
VERSIONS_TABLE_4 = """
CREATE TABLE IF NOT EXISTS {name} (
    room TEXT NOT NULL, v INTEGER NOT NULL, cmd_id TEXT, user TEXT NOT NULL,
    undo INTEGER NOT NULL, rec BLOB NOT NULL,
    PRIMARY KEY (room, v)) WITHOUT ROWID;
"""
VERSIONS_CMD_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS versions_cmd ON versions (room, user, cmd_id)"
    " WHERE cmd_id IS NOT NULL"
)

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rooms (
    room TEXT PRIMARY KEY, created REAL NOT NULL, head INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS users (
    room TEXT NOT NULL, user TEXT NOT NULL, token_hash BLOB NOT NULL UNIQUE,
    PRIMARY KEY (room, user)) WITHOUT ROWID;
"""
    + VERSIONS_TABLE.format(name="versions")
    + VERSIONS_CMD_INDEX
    + """;
CREATE TABLE IF NOT EXISTS snapshots (
    room TEXT NOT NULL, v INTEGER NOT NULL, state BLOB NOT NULL,
    PRIMARY KEY (room, v)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS admin_log (
    cmd_id TEXT PRIMARY KEY, op TEXT NOT NULL, args BLOB NOT NULL,
    result BLOB NOT NULL, ts REAL NOT NULL);
"""
)


def _backfill_views(conn: sqlite3.Connection) -> None:
    """2 -> 3: each version's views for the viewers who do not see
    everything (`core.views.version_views`), rebuilt from the log and the
    latest snapshot of each room; NULL stays where every viewer gets the
    plain patch."""
    for (room,) in conn.execute("SELECT room FROM rooms").fetchall():
        snap_v, snap = latest_snapshot(conn, room)
        rows = conn.execute(
            "SELECT v, ops, inverse, events FROM versions WHERE room = ? ORDER BY v", (room,)
        ).fetchall()
        views = backfill_views(
            snap_v,
            unpack(snap),
            ((r[0], unpack(r[1]), unpack(r[2]), unpack(r[3])) for r in rows),
        )
        conn.executemany(
            "UPDATE versions SET views = ? WHERE room = ? AND v = ?",
            [(pack(found), room, v) for v, found in views.items() if found is not None],
        )


def _replace_versions(
    conn: sqlite3.Connection, table: str, columns: str, rows: Iterable[tuple[Any, ...]]
) -> None:
    """Rewrite the versions table as `table` (a CREATE of VERSIONS_TABLE's
    kind) holding `rows` (values of `columns`), in place of the old one."""
    conn.execute(table.format(name="versions_new"))
    marks = ", ".join("?" * len(columns.split(",")))
    conn.executemany(f"INSERT INTO versions_new ({columns}) VALUES ({marks})", rows)
    conn.execute("DROP INDEX IF EXISTS versions_cmd")
    conn.execute("DROP INDEX IF EXISTS versions_undo")
    conn.execute("DROP TABLE versions")
    conn.execute("ALTER TABLE versions_new RENAME TO versions")
    conn.execute(VERSIONS_CMD_INDEX)


def _one_blob_per_version(conn: sqlite3.Connection) -> None:
    """3 -> 4: one row and one blob per version instead of fifteen columns
    and two indexes on top of the primary key (schema 4 kept `result` and
    `ts` in the blob too). Rewrites every version, in the opening
    transaction (all or nothing)."""
    rows = conn.execute(
        "SELECT room, v, cmd_id, user, op, args, ops, inverse, events, result, undoable,"
        " undone, undoes, ts, views FROM versions ORDER BY room, v"
    )
    _replace_versions(
        conn,
        VERSIONS_TABLE_4,
        "room, v, cmd_id, user, undo, rec",
        (
            (room, v, cmd_id, user, int(bool(undoable) and not undone),
             pack_fields(op, unpack(args), unpack(ops), unpack(inverse), unpack(events),
                          bool(undoable), undoes, None if views is None else unpack(views),
                          result=unpack(result), ts=ts))
            for room, v, cmd_id, user, op, args, ops, inverse, events, result, undoable,
            undone, undoes, ts, views in rows
        ),
    )  # fmt: skip


def _dedup_columns(conn: sqlite3.Connection) -> None:
    """4 -> 5: each version's `result` and `ts` out of its blob into columns
    of their own (VERSIONS_TABLE), so loading the dedup window decodes no
    blob. Rewrites every version, in the opening transaction."""

    def split(row: tuple[str, int, str | None, str, int, bytes]) -> tuple[Any, ...]:
        room, v, cmd_id, user, undo, rec = row
        fields = unpack(rec)
        result, ts = fields.pop("result"), fields.pop("ts")
        return (room, v, cmd_id, user, undo, ts, pack(result), pack(fields))

    rows = conn.execute("SELECT room, v, cmd_id, user, undo, rec FROM versions ORDER BY room, v")
    _replace_versions(
        conn, VERSIONS_TABLE, "room, v, cmd_id, user, undo, ts, result, rec", map(split, rows)
    )


# Schema migrations, by the version they lead from: each brings a database
# of that version to the next one, inside the opening transaction (SQL
# statements, or a function of the connection).
MIGRATIONS: dict[str, tuple[str | Callable[[sqlite3.Connection], None], ...]] = {
    # 1 -> 2: the room's head version, the fence every commit checks.
    "1": (
        "ALTER TABLE rooms ADD COLUMN head INTEGER NOT NULL DEFAULT 0",
        "UPDATE rooms SET head = coalesce("
        "(SELECT max(v) FROM versions WHERE versions.room = rooms.room),"
        " (SELECT max(v) FROM snapshots WHERE snapshots.room = rooms.room), 0)",
    ),
    # 2 -> 3: what viewers who do not see everything get of each version, so
    # resumes and history after a restart are their views (docs/views.md).
    "2": ("ALTER TABLE versions ADD COLUMN views BLOB", _backfill_views),
    # 3 -> 4: one blob per version (VERSIONS_TABLE).
    "3": (_one_blob_per_version,),
    # 4 -> 5: result and ts in columns, for the dedup window (VERSIONS_TABLE).
    "4": (_dedup_columns,),
}


def pack(value: Any) -> bytes:
    return packb(value)  # a Packer reused by the storage thread


def unpack(blob: bytes) -> Any:
    return msgpack.unpackb(blob, raw=False, strict_map_key=False)


def pack_fields(
    op: str,
    args: Any,
    ops: Any,
    inverse: Any,
    events: Any,
    undoable: bool,
    undoes: int | None,
    views: Any,
    **older: Any,
) -> bytes:
    """A version's blob; `older`: the fields an older schema also kept in it
    (schema 4: result and ts)."""
    fields = {
        "op": op,
        "args": args,
        "ops": ops,
        "inverse": inverse,
        "events": events,
        "undoable": undoable,
        "undoes": undoes,
        **older,
    }
    if views is not None:  # most versions: every viewer gets the plain patch
        fields["views"] = views
    return packb(fields)


def pack_version(r: VersionRecord) -> bytes:
    """A version's blob: every field but its columns, by name."""
    return pack_fields(r.op, r.args, r.ops, r.inverse, r.events, r.undoable, r.undoes, r.views)


# A version's row (VERSIONS_TABLE), as a commit and an import write it.
INSERT_VERSION = (
    "INSERT INTO versions (room, v, cmd_id, user, undo, ts, result, rec)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def version_row(room: str, r: VersionRecord, undo: bool) -> tuple[Any, ...]:
    """`INSERT_VERSION`'s parameters for `r` (`undo`: still a target of undo)."""
    return (room, r.v, r.cmd_id, r.user, int(undo), r.ts, pack(r.result), pack_version(r))


def move_head(conn: sqlite3.Connection, room: str, expected: int, head: int) -> None:
    """A commit's first statement: the room's head from `expected` to `head`,
    or VersionConflict when another writer moved it meanwhile."""
    moved = conn.execute(
        "UPDATE rooms SET head = ? WHERE room = ? AND head = ?", (head, room, expected)
    ).rowcount
    if moved != 1:
        raise VersionConflict(f"room {room!r} is no longer at version {expected}: another writer")


def write_version(conn: sqlite3.Connection, room: str, r: VersionRecord) -> None:
    """What a commit writes for one version: its row, the version it undoes
    marked undone, its token hashes set and removed. (Also what
    bench/log_bench.py measures, so the two cannot drift apart.)"""
    conn.execute(INSERT_VERSION, version_row(room, r, r.undoable))
    if r.undoes is not None:
        conn.execute("UPDATE versions SET undo = 0 WHERE room = ? AND v = ?", (room, r.undoes))
    for user in r.token_del:
        conn.execute("DELETE FROM users WHERE room = ? AND user = ?", (room, user))
    for user, token_hash in r.token_set:
        conn.execute(
            "INSERT OR REPLACE INTO users (room, user, token_hash) VALUES (?, ?, ?)",
            (room, user, token_hash),
        )


def version_of_row(
    room: str, v: int, cmd_id: str | None, user: str, ts: float, result: bytes, rec: bytes
) -> VersionRecord:
    f = unpack(rec)
    return VersionRecord(
        room=room, v=v, cmd_id=cmd_id, user=user, op=f["op"], args=f["args"], ops=f["ops"],
        inverse=f["inverse"], events=f["events"], result=unpack(result),
        undoable=f["undoable"], undoes=f.get("undoes"), ts=ts, views=f.get("views"),
    )  # fmt: skip


def patch_of_row(v: int, cmd_id: str | None, user: str, rec: bytes) -> PatchRow:
    f = unpack(rec)
    return PatchRow(v, cmd_id, user, f["ops"], f["events"], f.get("views"))


def latest_snapshot(conn: sqlite3.Connection, room: str) -> tuple[int, bytes]:
    """(v, packed state) of a room's latest snapshot; every room has one."""
    snap = conn.execute(
        "SELECT v, state FROM snapshots WHERE room = ? ORDER BY v DESC LIMIT 1", (room,)
    ).fetchone()
    if snap is None:
        raise StorageError(f"room {room!r} has no snapshot: the database is damaged")
    return snap[0], snap[1]
