"""Leases in the SQLite database itself: several server processes on one
data directory (`vtt-sync serve --workers N`), each room served by one.

The same contract as PostgreSQL's leases (`Leases`, leases.py), on the
same file the rooms are in: SQLite in WAL mode lets several processes of
one machine share it, and its write lock (`BEGIN IMMEDIATE`) orders every
claim, renewal, release and commit of every process, as PostgreSQL's row
locks do for the nodes of a cluster.

- One row per room in `room_leases` (created if missing, beside the
  storage's own tables): owner, owner's URL, `epoch`, `until`.
- A claim bumps the room's epoch (also a node's claim of a room it holds),
  in the transaction that checks the room has no live owner. Epochs of a
  room only grow: its row outlives the room (a trigger only ends the lease
  when the room is deleted or replaced), so a room created again under the
  same id never gets an old epoch back.
- Every commit is fenced in its own transaction: `SqliteStorage.fence` is
  this object's `check`, which the storage thread calls before it writes a
  commit and which raises `Fenced` (or `RoomDeleted`) unless the row still
  names this node, at its claim's epoch, with an unexpired lease.
- Time is the machine's wall clock (`Clock.time()`): the processes sharing
  a file share it, so there is no skew between them. The local deadline of
  a `Claim` is read on the monotonic clock before the claim, as with
  PostgreSQL.

Calls run on a connection of their own, in a worker thread (they are rare:
a claim per room loaded, a renewal per third of a lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sync_server.clock import Clock, SystemClock
from sync_server.cluster.leases import LEASE_SECONDS, Claim, Owner, renewed
from sync_server.storage import Fenced, RoomDeleted, StorageError
from sync_server.storage.sqlite import SqliteStorage

T = TypeVar("T")

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS room_leases ("
    " room TEXT PRIMARY KEY, owner TEXT, owner_url TEXT,"
    " epoch INTEGER NOT NULL, until REAL NOT NULL) WITHOUT ROWID",
    # A deleted (or replaced, by an import) room's lease ends with it: its
    # owner's next commit is fenced, and the next claim is of a new room.
    "CREATE TRIGGER IF NOT EXISTS room_leases_end AFTER DELETE ON rooms BEGIN"
    " UPDATE room_leases SET owner = NULL, owner_url = NULL, until = 0"
    " WHERE room = OLD.room; END",
)

# The room, and its lease if it has one (a room never claimed has no row).
ROW_SQL = (
    "SELECT l.owner, l.owner_url, l.epoch, l.until FROM rooms r"
    " LEFT JOIN room_leases l ON l.room = r.room WHERE r.room = ?"
)

CLAIM_SQL = (
    "INSERT INTO room_leases (room, owner, owner_url, epoch, until) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (room) DO UPDATE SET owner = excluded.owner, owner_url = excluded.owner_url,"
    " epoch = excluded.epoch, until = excluded.until"
)

RENEW_SQL = (
    "UPDATE room_leases SET until = ? WHERE room = ? AND owner = ? AND epoch = ? AND until > ?"
)

RELEASE_SQL = (
    "UPDATE room_leases SET owner = NULL, owner_url = NULL, until = 0"
    " WHERE room = ? AND owner = ? AND epoch = ?"
)


class SqliteLeases:
    """`Leases` for one process among several on one SQLite file."""

    def __init__(
        self,
        storage: SqliteStorage,
        node_id: str,
        public_url: str = "",
        lease_seconds: float = LEASE_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        self.storage = storage
        self.path = storage.path
        self.node_id = node_id
        self.public_url = public_url
        self.lease_seconds = lease_seconds
        self.clock = clock or SystemClock()
        self._held: dict[str, Claim] = {}
        # The last claim the fence refused, per room, for the message only.
        self._refused: dict[str, Claim] = {}
        # `_held` is read by the storage thread (the fence) as well.
        self._held_lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._conn_lock = threading.Lock()

    # --- lifecycle --------------------------------------------------------

    async def open(self) -> None:
        """Connect (after the storage opened: its schema exists), create
        the lease table if missing, and fence the storage's commits."""

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
            try:
                conn.execute("BEGIN IMMEDIATE")
                for statement in SCHEMA:
                    conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                conn.close()
                raise
            return conn

        try:
            self._conn = await asyncio.to_thread(connect)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open the leases in {self.path}: {exc}") from exc
        self.storage.fence = self.check

    async def close(self) -> None:
        """Release what is still held (the server released its rooms
        already when it drained), then disconnect."""
        if self._conn is None:
            return
        with contextlib.suppress(StorageError):
            await self.release(list(self.held()))
        conn, self._conn = self._conn, None
        self.storage.fence = None
        await asyncio.to_thread(conn.close)

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` in one write transaction, in a thread."""

        def run() -> T:
            with self._conn_lock:
                conn = self._conn
                if conn is None:
                    raise StorageError("the leases are closed")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        result = fn(conn)
                        conn.execute("COMMIT")
                    except BaseException:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                        raise
                except sqlite3.Error as exc:
                    raise StorageError(f"leases in {self.path}: {exc}") from exc
                return result

        return await asyncio.to_thread(run)

    # --- the Leases interface ---------------------------------------------

    async def claim(self, room: str) -> Claim | Owner | None:
        sent = self.clock.monotonic()

        def claim(conn: sqlite3.Connection) -> Claim | Owner | None:
            row = conn.execute(ROW_SQL, (room,)).fetchone()
            if row is None:
                return None
            owner, url, epoch, until = row
            now = self.clock.time()
            if owner is not None and owner != self.node_id and until > now:
                return Owner(room, owner, url)
            epoch = (epoch or 0) + 1
            conn.execute(
                CLAIM_SQL, (room, self.node_id, self.public_url, epoch, now + self.lease_seconds)
            )
            return Claim(room, epoch, sent + self.lease_seconds)

        found = await self._write(claim)
        with self._held_lock:
            self._refused.pop(room, None)
            if isinstance(found, Claim):
                self._held[room] = found
            else:
                self._held.pop(room, None)
        return found

    async def renew(self, rooms: Iterable[str]) -> set[str]:
        with self._held_lock:
            claims = sorted(
                (c for c in (self._held.get(r) for r in set(rooms)) if c is not None),
                key=lambda c: c.room,
            )
        if not claims:
            return set()
        sent = self.clock.monotonic()

        def renew(conn: sqlite3.Connection) -> set[str]:
            now = self.clock.time()
            until = now + self.lease_seconds
            return {
                c.room
                for c in claims
                if conn.execute(RENEW_SQL, (until, c.room, self.node_id, c.epoch, now)).rowcount
            }

        kept = await self._write(renew)
        with self._held_lock:
            renewed(self._held, claims, kept, sent + self.lease_seconds)
        return kept

    async def release(self, rooms: Iterable[str]) -> None:
        with self._held_lock:
            claims = [c for c in (self._held.pop(r, None) for r in rooms) if c is not None]
        if not claims:
            return

        def release(conn: sqlite3.Connection) -> None:
            conn.executemany(RELEASE_SQL, [(c.room, self.node_id, c.epoch) for c in claims])

        await self._write(release)

    async def owner(self, room: str) -> Owner | None:
        def read() -> Any:
            with self._conn_lock:
                if self._conn is None:
                    raise StorageError("the leases are closed")
                try:
                    return self._conn.execute(ROW_SQL, (room,)).fetchone()
                except sqlite3.Error as exc:
                    raise StorageError(f"leases in {self.path}: {exc}") from exc

        row = await asyncio.to_thread(read)
        if row is None:
            return None
        owner, url, _, until = row
        if owner is None or until <= self.clock.time():
            return Owner(room, None, None)
        return Owner(room, owner, url)

    def claim_of(self, room: str) -> Claim | None:
        with self._held_lock:
            return self._held.get(room)

    def held(self) -> dict[str, Claim]:
        with self._held_lock:
            return dict(self._held)

    def expired(self, now: float) -> set[str]:
        with self._held_lock:
            gone = {room for room, c in self._held.items() if c.deadline <= now}
            for room in gone:
                del self._held[room]
        return gone

    # --- the fence ----------------------------------------------------------

    def check(self, conn: sqlite3.Connection, room: str) -> None:
        """The fence of one commit, inside the storage's write transaction
        (called on the storage thread, the write lock held): refuse it
        unless this node holds the room at its claim's epoch and the lease
        is unexpired. A refused claim is forgotten."""
        row = conn.execute(ROW_SQL, (room,)).fetchone()
        if row is None:
            with self._held_lock:
                self._held.pop(room, None)
            raise RoomDeleted(f"room {room!r} was deleted")
        with self._held_lock:
            claim = self._held.get(room)
            # The storage replays a group whose job failed: the same commit
            # is checked again, its claim already forgotten.
            claim = claim or self._refused.get(room)
        if claim is None:
            raise Fenced(f"room {room!r} is not held by node {self.node_id!r}: claim it first")
        owner, _, epoch, until = row
        if owner != self.node_id or epoch != claim.epoch or until <= self.clock.time():
            with self._held_lock:
                if self._held.get(room) is claim:
                    del self._held[room]
                    self._refused[room] = claim
            who = owner if owner is not None and until > self.clock.time() else None
            raise Fenced(
                f"room {room!r}: node {self.node_id!r} lost its claim (epoch {claim.epoch};"
                f" now epoch {epoch}, owner {who!r})"
            )
