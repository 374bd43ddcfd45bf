"""SQLite storage (stdlib sqlite3, WAL), behind the `Storage` interface.

One thread owns the one connection and runs every job in submission order.
Consecutive write jobs found waiting are committed in ONE transaction
(group commit): when several rooms, or a burst in one room, wait on the
disk, they share a single fsync. While commits are flowing (recent groups
held more than one job) the thread waits up to GROUP_WINDOW_SECONDS after
a group's first job for more to join it; a lone writer never waits. The
event loop hands the jobs of one loop iteration over together (one lock,
at most one wake-up). If a job fails, the group is replayed with a
SAVEPOINT per job, so only the failing job is refused. A job's future is
resolved only after COMMIT returned (synchronous=FULL by default: after
the fsync).

A version is one row: its key, the columns a query selects on, what the
dedup window reads (schema 5), and one blob holding the rest by field name
(sqlite_schema.py: the tables, the rows, the migrations), so a field added
later (the views of schema 3) needs no new column.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sync_server.clock import Clock, SystemClock
from sync_server.core.limits import IMPORT_SLICE_VERSIONS, SNAPSHOTS_KEPT
from sync_server.storage import (
    AdminRecord,
    DedupEntry,
    RoomDump,
    RoomExists,
    RoomSummary,
    StorageError,
    StoredRoom,
    TokenInUse,
    UndoTarget,
    VersionRecord,
    undo_bound,
)
from sync_server.storage.replay import name_after
from sync_server.storage.sqlite_schema import (
    INSERT_VERSION,
    MIGRATIONS,
    SCHEMA,
    SCHEMA_VERSION,
    latest_snapshot,
    move_head,
    pack,
    patch_of_row,
    unpack,
    version_of_row,
    version_row,
    write_version,
)

log = logging.getLogger(__name__)

DB_FILE = "vtt-sync.sqlite3"

# Bytes the WAL file is truncated to after a checkpoint: without a limit it
# keeps the size of the largest transaction it ever held.
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024

# Write jobs committed together at most: bounds one transaction's size and
# so the latency of the first job waiting in it.
MAX_GROUP_JOBS = 256

# The group-commit window: while commits are flowing (recent groups held
# more than one job: several rooms or sessions are writing at once), the
# storage thread waits up to this long after a group's first job arrived
# for more jobs to share its fsync. A commit costs about the same whatever
# its size, so bigger groups cost less per command; the wait adds at most
# this much to an ack's latency. Never when one writer is alone (groups of
# one): it would only wait for nothing.
GROUP_WINDOW_SECONDS = 0.001

# Recent groups' mean size (a moving average, weight of the latest group)
# above which commits count as flowing and the window applies.
GROUP_FLOWING_MEAN = 1.5
GROUP_MEAN_WEIGHT = 0.25
# A write arriving after the storage thread sat idle this many windows
# starts afresh: the writers of before are gone, no waiting for them.
GROUP_IDLE_WINDOWS = 10
# When the window's wake-ups come this late on average (moving average,
# same weight), the machine is starved of CPU (the thread waits for a core,
# then for the GIL): waiting would cost more latency than the bigger groups
# save, so the window is skipped until they come on time again.
GROUP_LATE_WINDOWS = 1.0


def _since(dedup_since: float | None) -> float:
    """The dedup window's age bound as a query parameter (-inf: none)."""
    return float("-inf") if dedup_since is None else dedup_since


class _Job:
    __slots__ = ("fn", "future", "loop", "queued", "write")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        write: bool,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
    ) -> None:
        self.fn, self.write, self.loop, self.future = fn, write, loop, future
        self.queued = 0.0  # when it reached the storage thread's queue (monotonic)


def _resolve(job: _Job, result: Any = None, error: BaseException | None = None) -> None:
    def settle() -> None:
        if job.future.done():
            return
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)

    # RuntimeError: the loop is closed, nobody waits any more.
    with contextlib.suppress(RuntimeError):
        job.loop.call_soon_threadsafe(settle)


def _resolve_all(outcomes: list[tuple[_Job, Any, BaseException | None]]) -> None:
    """Settle a committed group's futures with ONE wake-up of each event loop
    (not one per job: each wake-up is a self-pipe write and a loop turn)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, Any, BaseException | None]]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].loop, []).append(outcome)

    def settle(batch: list[tuple[_Job, Any, BaseException | None]]) -> None:
        for job, value, error in batch:
            if job.future.done():
                continue
            if error is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(value)

    for loop, batch in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(settle, batch)


class SqliteStorage:
    """`Storage` on one SQLite file in the data directory."""

    def __init__(
        self,
        data_dir: Path,
        synchronous: str = "FULL",
        on_group: Callable[[int], None] | None = None,
        snapshots_kept: int = SNAPSHOTS_KEPT,
        group_window: float = GROUP_WINDOW_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        self.path = Path(data_dir) / DB_FILE
        # Command timestamps come with the records; the room's creation
        # time is read here. (The group-commit windows are the storage
        # thread's own real time.)
        self.clock = clock or SystemClock()
        self.synchronous = synchronous
        self.snapshots_kept = snapshots_kept
        self._on_group = on_group
        self.group_window = group_window
        self._jobs: deque[_Job | None] = deque()
        self._cv = threading.Condition()
        # Jobs submitted during the current event-loop iteration, handed to
        # the storage thread together by one `_hand_off` (one lock, at most
        # one wake-up) at the end of the iteration.
        self._outgoing: list[_Job] = []
        self._gathering = False  # the thread waits out a group-commit window
        self._group_mean = 1.0
        self._last_group_end = 0.0
        self._late = 0.0  # how late the window's wake-ups come (moving average, s)
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        # Workers mode (cluster/sqlite_leases.py): called with each commit's
        # room inside its write transaction, before anything is written;
        # raises Fenced when this process no longer holds the room. None:
        # alone on the file, nothing to check.
        self.fence: Callable[[sqlite3.Connection, str], None] | None = None

    # --- lifecycle --------------------------------------------------------

    async def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size == 0:
                # SQLite would take an empty file for a new database, but an
                # empty file where a database was is damage (a failed copy, a
                # truncation): refuse rather than start over with no rooms.
                raise StorageError(
                    f"the database file is empty: {self.path} (restore it from a backup, "
                    "or remove it to start with no rooms)"
                )
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StorageError(f"{self.path}: cannot enable WAL (journal_mode={mode})")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            # After a large transaction the WAL file shrinks back to this.
            conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
            self._migrate(conn)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open the database {self.path}: {exc}") from exc
        except OSError as exc:
            raise StorageError(f"cannot use the data directory {self.path.parent}: {exc}") from exc
        self._conn = conn
        self._thread = threading.Thread(target=self._run, name="vtt-sync-sqlite", daemon=True)
        self._thread.start()

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Create the schema, or bring an older one up to date, in one
        transaction; refuse a database written by a newer server."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            has_meta = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
            ).fetchone()
            found = None
            if has_meta:
                row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                found = row[0] if row else None
            if found is None:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
                )
            while found is not None and found != SCHEMA_VERSION:
                steps = MIGRATIONS.get(found)
                if steps is None:
                    raise StorageError(
                        f"{self.path}: schema {found} is newer than this server's "
                        f"{SCHEMA_VERSION}; run a newer vtt-sync"
                    )
                for step in steps:
                    if callable(step):
                        step(conn)
                    else:
                        conn.execute(step)
                found = str(int(found) + 1)
                conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (found,))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        if self._thread is None:
            return
        self._hand_off()
        with self._cv:
            self._jobs.append(None)
            self._cv.notify()
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        self._thread = None

    # --- the storage thread ----------------------------------------------

    async def _submit(self, fn: Callable[[sqlite3.Connection], Any], write: bool) -> Any:
        if self._thread is None:
            raise StorageError("storage is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if not self._outgoing:
            loop.call_soon(self._hand_off)
        self._outgoing.append(_Job(fn, write, loop, fut))
        return await fut

    def _hand_off(self) -> None:
        """Queue this iteration's jobs for the storage thread, and wake it
        unless it is waiting out a group-commit window (it takes them when
        the window ends) or busy (it looks at the queue when done)."""
        jobs, self._outgoing = self._outgoing, []
        if not jobs:
            return
        now = time.monotonic()
        for job in jobs:
            job.queued = now
        with self._cv:
            self._jobs.extend(jobs)
            if not self._gathering or len(self._jobs) >= MAX_GROUP_JOBS:
                self._cv.notify()

    def _gather(self, first: _Job) -> None:
        """Commits are flowing: wait (the lock released) until the window
        that opened when `first` was queued ends, or the group is full."""
        deadline = first.queued + self.group_window
        self._gathering = True
        try:
            while len(self._jobs) + 1 < MAX_GROUP_JOBS:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
        finally:
            self._gathering = False
        late = max(0.0, time.monotonic() - deadline)
        self._late += GROUP_MEAN_WEIGHT * (late - self._late)

    def _run(self) -> None:
        conn = self._conn
        assert conn is not None
        while True:
            with self._cv:
                while not self._jobs:
                    self._cv.wait()
                first = self._jobs.popleft()
                if first is None:
                    break
                if first.write and self.group_window:
                    if first.queued - self._last_group_end > GROUP_IDLE_WINDOWS * self.group_window:
                        self._group_mean = 1.0  # idle since: nobody else is writing
                    elif self._group_mean > GROUP_FLOWING_MEAN:
                        if self._late < GROUP_LATE_WINDOWS * self.group_window:
                            self._gather(first)
                        else:  # starved: no wait; the estimate decays
                            self._late *= 1 - GROUP_MEAN_WEIGHT
                group = [first]
                if first.write:
                    while (
                        self._jobs
                        and self._jobs[0] is not None
                        and self._jobs[0].write
                        and len(group) < MAX_GROUP_JOBS
                    ):
                        group.append(self._jobs.popleft())  # type: ignore[arg-type]
            if first.write:
                self._group_mean += GROUP_MEAN_WEIGHT * (len(group) - self._group_mean)
                self._run_writes(conn, group)
                self._last_group_end = time.monotonic()
            else:
                try:
                    _resolve(first, first.fn(conn))
                except BaseException as exc:
                    _resolve(first, error=exc)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            log.warning("final WAL checkpoint failed", exc_info=True)
        conn.close()

    def _run_writes(self, conn: sqlite3.Connection, group: list[_Job]) -> None:
        """Commit a group of write jobs in one transaction. First without
        savepoints (the common case: every job succeeds; three statements
        fewer per job); if a job fails, the transaction is rolled back and
        the group replayed with a SAVEPOINT per job, so that only the failing
        job is refused. Jobs are functions of the connection: replaying them
        after a rollback is safe."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            values = [job.fn(conn) for job in group]
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self._run_writes_isolated(conn, group)
            return
        if self._on_group is not None:
            self._on_group(len(group))
        _resolve_all([(job, value, None) for job, value in zip(group, values, strict=True)])

    def _run_writes_isolated(self, conn: sqlite3.Connection, group: list[_Job]) -> None:
        outcomes: list[tuple[_Job, Any, BaseException | None]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for job in group:
                conn.execute("SAVEPOINT job")
                try:
                    value = job.fn(conn)
                except BaseException as exc:
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    if isinstance(exc, sqlite3.Error):  # a constraint: say what, in our terms
                        exc = StorageError(f"not stored: {exc}")
                    outcomes.append((job, None, exc))
                else:
                    conn.execute("RELEASE job")
                    outcomes.append((job, value, None))
            conn.execute("COMMIT")
        except BaseException as exc:
            self._fail_group(conn, group, exc)
            return
        if self._on_group is not None:
            self._on_group(len(group))
        _resolve_all(outcomes)

    def _fail_group(self, conn: sqlite3.Connection, group: list[_Job], exc: BaseException) -> None:
        log.error("storage commit failed: %s", exc)
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        err = StorageError(f"commit to {self.path} failed: {exc}")
        for job in group:
            _resolve(job, error=err)

    # --- queries ----------------------------------------------------------

    async def room_ids(self) -> set[str]:
        def q(conn: sqlite3.Connection) -> set[str]:
            return {r[0] for r in conn.execute("SELECT room FROM rooms")}

        return await self._submit(q, write=False)

    async def create_room(
        self,
        room: str,
        state: dict[str, Any],
        gm_user: str,
        gm_token_hash: bytes,
        admin: AdminRecord,
    ) -> None:
        created = self.clock.time()

        def w(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO rooms (room, created, head) VALUES (?, ?, 0)", (room, created)
            )
            conn.execute(
                "INSERT INTO snapshots (room, v, state) VALUES (?, 0, ?)", (room, pack(state))
            )
            conn.execute(
                "INSERT INTO users (room, user, token_hash) VALUES (?, ?, ?)",
                (room, gm_user, gm_token_hash),
            )
            self._admin(conn, admin)

        await self._submit(w, write=True)

    async def delete_room(self, room: str, admin: AdminRecord) -> None:
        def w(conn: sqlite3.Connection) -> None:
            for table in ("versions", "snapshots", "users", "rooms"):
                conn.execute(f"DELETE FROM {table} WHERE room = ?", (room,))
            self._admin(conn, admin)

        await self._submit(w, write=True)

    @staticmethod
    def _admin(conn: sqlite3.Connection, admin: AdminRecord) -> None:
        conn.execute(
            "INSERT INTO admin_log (cmd_id, op, args, result, ts) VALUES (?, ?, ?, ?, ?)",
            (admin.cmd_id, admin.op, pack(admin.args), pack(admin.result), admin.ts),
        )

    async def admin_result(self, cmd_id: str) -> AdminRecord | None:
        def q(conn: sqlite3.Connection) -> AdminRecord | None:
            row = conn.execute(
                "SELECT op, args, result, ts FROM admin_log WHERE cmd_id = ?", (cmd_id,)
            ).fetchone()
            if row is None:
                return None
            return AdminRecord(cmd_id, row[0], unpack(row[1]), unpack(row[2]), row[3])

        return await self._submit(q, write=False)

    async def load_room(
        self, room: str, recent: int, dedup_window: int, dedup_since: float | None = None
    ) -> StoredRoom | None:
        def q(conn: sqlite3.Connection) -> StoredRoom | None:
            head_row = conn.execute("SELECT head FROM rooms WHERE room = ?", (room,)).fetchone()
            if head_row is None:
                return None
            snap = latest_snapshot(conn, room)
            first = min(snap[0], head_row[0] - recent)
            rows = conn.execute(
                "SELECT v, cmd_id, user, rec FROM versions WHERE room = ? AND v > ? ORDER BY v",
                (room, first),
            ).fetchall()
            log_rows = [patch_of_row(*r) for r in rows]
            dedup = [  # the columns only: no version's blob (sqlite_schema.VERSIONS_TABLE)
                DedupEntry(r[0], r[1], r[2], unpack(r[3]), r[4])
                for r in conn.execute(
                    "SELECT user, cmd_id, v, result, ts FROM versions "
                    "WHERE room = ? AND v > ? AND cmd_id IS NOT NULL AND ts >= ? ORDER BY v",
                    (room, head_row[0] - dedup_window, _since(dedup_since)),
                )
            ]
            return StoredRoom(room, snap[0], unpack(snap[1]), log_rows, dedup)

        return await self._submit(q, write=False)

    async def stored_command(self, room: str, user: str, cmd_id: str) -> DedupEntry | None:
        def q(conn: sqlite3.Connection) -> DedupEntry | None:
            row = conn.execute(  # the unique index versions_cmd
                "SELECT v, result, ts FROM versions WHERE room = ? AND user = ? AND cmd_id = ?",
                (room, user, cmd_id),
            ).fetchone()
            if row is None:
                return None
            return DedupEntry(user, cmd_id, row[0], unpack(row[1]), row[2])

        return await self._submit(q, write=False)

    async def commit(
        self,
        room: str,
        records: list[VersionRecord],
        snapshot: tuple[int, dict[str, Any]] | None,
        expected: int,
    ) -> None:
        head = expected + len(records)

        def w(conn: sqlite3.Connection) -> None:
            if self.fence is not None:  # workers mode: the room's lease, same transaction
                self.fence(conn, room)
            move_head(conn, room, expected, head)
            for r in records:
                write_version(conn, room, r)
            if snapshot is not None:
                sv, state = snapshot
                conn.execute(
                    "INSERT OR REPLACE INTO snapshots (room, v, state) VALUES (?, ?, ?)",
                    (room, sv, pack(state)),
                )
                conn.execute(
                    "DELETE FROM snapshots WHERE room = ? AND v NOT IN "
                    "(SELECT v FROM snapshots WHERE room = ? ORDER BY v DESC LIMIT ?)",
                    (room, room, self.snapshots_kept),
                )

        await self._submit(w, write=True)

    async def find_token(self, token_hash: bytes) -> tuple[str, str] | None:
        def q(conn: sqlite3.Connection) -> tuple[str, str] | None:
            row = conn.execute(
                "SELECT room, user FROM users WHERE token_hash = ?", (token_hash,)
            ).fetchone()
            return None if row is None else (row[0], row[1])

        return await self._submit(q, write=False)

    async def undo_target(self, room: str, before: int | None = None) -> UndoTarget | None:
        def q(conn: sqlite3.Connection) -> UndoTarget | None:
            # Back along the primary key: the latest versions are the likely
            # targets (no index of its own, see sqlite_schema.VERSIONS_TABLE).
            row = conn.execute(
                "SELECT v, user, rec FROM versions WHERE room = ? AND undo = 1 AND v < ?"
                " ORDER BY v DESC LIMIT 1",
                (room, undo_bound(before)),
            ).fetchone()
            if row is None:
                return None
            f = unpack(row[2])
            return UndoTarget(row[0], f["op"], row[1], f["inverse"])

        return await self._submit(q, write=False)

    async def room_summaries(self) -> list[RoomSummary]:
        def q(conn: sqlite3.Connection) -> list[RoomSummary]:
            out = []
            rooms = conn.execute(
                "SELECT r.room, r.head, r.created,"
                " (SELECT ts FROM versions v WHERE v.room = r.room AND v.v = r.head)"
                " FROM rooms r ORDER BY r.room"
            ).fetchall()
            for room, head, created, last in rooms:
                snap_v, snap = latest_snapshot(conn, room)
                # The versions after the snapshot (at most a snapshot's
                # interval): their op is in the blob.
                after = (
                    unpack(r[0])
                    for r in conn.execute(
                        "SELECT rec FROM versions WHERE room = ? AND v > ? ORDER BY v",
                        (room, snap_v),
                    )
                )
                renames = (f["args"] for f in after if f["op"] == "update_room")
                name = name_after(unpack(snap).get("name"), renames)
                out.append(RoomSummary(room, head, created, last, name))
            return out

        return await self._submit(q, write=False)

    # --- whole rooms: export, import, backup -----------------------------

    async def export_room(self, room: str) -> RoomDump | None:
        """Read on a connection of its own, in a worker thread, in one read
        transaction (WAL: a consistent snapshot while the storage thread
        commits on): read as one job of the storage thread, a room of 40,000
        versions held it ~1.4 s, every room's commits waiting."""
        if self._thread is None:
            raise StorageError("storage is closed")
        return await asyncio.to_thread(self._export_apart, room)

    def _export_apart(self, room: str) -> RoomDump | None:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            conn.execute("BEGIN")  # one snapshot for every read below
            return _read_dump(conn, room)
        finally:
            conn.close()

    async def import_room(self, dump: RoomDump, admin: AdminRecord, replace: bool = False) -> None:
        """A new room's versions are stored in slices of IMPORT_SLICE_VERSIONS,
        each its own transaction (a room of 40,000 versions in one held the
        storage thread, and every room's commits, ~0.3 s), while the room is
        not there yet (no `rooms` row: nothing reads them); the last one adds
        the room, its users and snapshot at once. Rows prepared in a worker
        thread. What a failed import stored is removed (and, were the process
        killed meanwhile, by the next import of that room id). A replace
        stays one transaction: the old room is never half gone."""
        room = dump.room
        rows = await asyncio.to_thread(
            lambda: [
                version_row(room, r, r.undoable and r.v not in dump.undone) for r in dump.versions
            ]
        )
        if replace:
            await self._submit(lambda conn: _store_dump(conn, dump, admin, rows, True), write=True)
            return
        await self._submit(lambda conn: _clear_orphans(conn, room), write=True)
        try:
            for i in range(0, len(rows), IMPORT_SLICE_VERSIONS):
                part = rows[i : i + IMPORT_SLICE_VERSIONS]
                await self._submit(
                    functools.partial(_insert_versions, room=room, rows=part), write=True
                )
            await self._submit(lambda conn: _store_dump(conn, dump, admin, [], False), write=True)
        except BaseException:
            with contextlib.suppress(Exception):
                await self._submit(lambda conn: _clear_orphans(conn, room), write=True)
            raise

    async def backup(self, dest: Path) -> None:
        """A consistent copy of the whole database at `dest`, taken while the
        server runs (`backup_database`, from a connection of its own: the
        storage thread keeps committing meanwhile)."""
        await asyncio.to_thread(backup_database, self.path, Path(dest))


def _read_dump(conn: sqlite3.Connection, room: str) -> RoomDump | None:
    """Everything stored of `room`, read in the connection's transaction."""
    row = conn.execute("SELECT head, created FROM rooms WHERE room = ?", (room,)).fetchone()
    if row is None:
        return None
    snap = latest_snapshot(conn, room)
    versions, undone = [], set()
    for v, cmd_id, user, undo, ts, result, rec in conn.execute(
        "SELECT v, cmd_id, user, undo, ts, result, rec FROM versions WHERE room = ? ORDER BY v",
        (room,),
    ):
        version = version_of_row(room, v, cmd_id, user, ts, result, rec)
        versions.append(version)
        if version.undoable and not undo:
            undone.add(v)
    tokens = {
        user: bytes(token_hash)
        for user, token_hash in conn.execute(
            "SELECT user, token_hash FROM users WHERE room = ?", (room,)
        )
    }
    return RoomDump(
        room, row[0], row[1], snap[0], unpack(snap[1]), versions, frozenset(undone), tokens
    )


def _clear_orphans(conn: sqlite3.Connection, room: str) -> None:
    """Versions of a room that is not there (an import that failed, or was
    killed, between its slices): removed, so that the next import of that
    id starts clean. A room that exists is left alone."""
    if conn.execute("SELECT 1 FROM rooms WHERE room = ?", (room,)).fetchone() is None:
        conn.execute("DELETE FROM versions WHERE room = ?", (room,))


def _insert_versions(conn: sqlite3.Connection, room: str, rows: list[Any]) -> None:
    if conn.execute("SELECT 1 FROM rooms WHERE room = ?", (room,)).fetchone() is not None:
        raise RoomExists(f"room {room!r} already exists")  # created meanwhile
    conn.executemany(INSERT_VERSION, rows)


def _store_dump(
    conn: sqlite3.Connection, dump: RoomDump, admin: AdminRecord, rows: list[Any], replace: bool
) -> None:
    """The room itself, its users and snapshot (and `rows`, its versions,
    unless stored already): the import's last transaction."""
    room = dump.room
    exists = conn.execute("SELECT 1 FROM rooms WHERE room = ?", (room,)).fetchone()
    if exists and not replace:
        raise RoomExists(f"room {room!r} already exists")
    tables = ("versions", "snapshots", "users", "rooms") if replace else ("snapshots", "users")
    for table in tables:
        conn.execute(f"DELETE FROM {table} WHERE room = ?", (room,))
    for user, token_hash in dump.tokens.items():
        owner = conn.execute(
            "SELECT room, user FROM users WHERE token_hash = ?", (token_hash,)
        ).fetchone()
        if owner is not None:
            raise TokenInUse(
                f"the token hash of user {user} is already used by {owner[1]} of room "
                f"{owner[0]!r}: import without token hashes, or delete that room"
            )
        conn.execute(
            "INSERT INTO users (room, user, token_hash) VALUES (?, ?, ?)",
            (room, user, token_hash),
        )
    conn.execute(
        "INSERT INTO rooms (room, created, head) VALUES (?, ?, ?)",
        (room, dump.created, dump.head),
    )
    conn.execute(
        "INSERT INTO snapshots (room, v, state) VALUES (?, ?, ?)",
        (room, dump.snapshot_v, pack(dump.snapshot)),
    )
    if rows:
        conn.executemany(INSERT_VERSION, rows)
    SqliteStorage._admin(conn, admin)


def backup_database(source: Path, dest: Path) -> None:
    """Copy a vtt-sync database with SQLite's online backup API, consistent
    as of one instant, whether or not a server is using it: in WAL mode the
    copy reads one snapshot while the server's writer goes on (in one step,
    so no write can restart it). The copy is written next to `dest` and
    renamed into place, so `dest` is never a half-written database."""
    if not source.exists():
        raise StorageError(f"no database at {source}")
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".part")
    tmp.unlink(missing_ok=True)
    try:
        # Read-write mode although it only reads: a read-only connection
        # cannot open a WAL database whose -shm file is gone (server stopped).
        src = sqlite3.connect(source, timeout=30)
        try:
            out = sqlite3.connect(tmp)
            try:
                src.backup(out)
                out.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
                ok = out.execute("PRAGMA integrity_check").fetchone()[0]
            finally:
                out.close()
        finally:
            src.close()
        if ok != "ok":
            raise StorageError(f"the backup failed its check: {ok}")
        os.replace(tmp, dest)
    except sqlite3.Error as exc:
        raise StorageError(f"backup of {source} to {dest} failed: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
