"""PostgreSQL storage for a cluster of nodes, its commits fenced.

`PgStorage` implements `Storage` (base.py) on one PostgreSQL database
shared by every node (asyncpg, one connection pool per node, no ORM); the
leases of the same database are `cluster.pg_leases.PgLeases`, which fence
this storage's commits (`PgStorage.leases`). docs/cluster.md describes the
schema and the design; the short of it:

- `rooms` holds each room's head version, its latest snapshot's version,
  and its lease: owner node, owner's public URL, `epoch`, `lease_until`
  (written by the leases; lease times are the database's).
- Commits waiting together are written as ONE statement (group commit): a
  guarded UPDATE of the rooms' rows (head = expected, owner = this node,
  epoch = the claim's, lease unexpired) and, only for the rooms whose row
  was updated, the inserts (versions, undone marks, token hashes,
  snapshots). One round trip and one WAL flush for the group, atomic by
  construction; the row locks order it against claims and deletes. A room
  whose guard failed stored nothing, and a second look says which refusal
  it was (`RoomDeleted`, `Fenced`, `VersionConflict`); the other rooms of
  the group are committed. A statement the database refuses (a command id
  stored twice) is retried commit by commit, so only the faulty one fails.
- Blobs are MessagePack `bytea` (codec.packb, as SQLite stores them):
  states and ops are opaque to the database (nothing queries inside them),
  and msgpack is smaller and faster to encode than JSON text for jsonb,
  which would also re-parse every state on insert.
- Schema versions in `schema_version`, migrated at open under an advisory
  lock (nodes may start together); a database newer than the code is
  refused with a clear `StorageError`.

The schema's migrations are pg_schema.py's, the group commit's statement
pg_commit.py's; this module runs the storage on them.

Every failure to reach the database (refused, reset, timed out) is a
`StorageError`, within `op_timeout` seconds: a commit that raised it may or
may not have landed (the connection may have dropped after COMMIT was
sent) but never in part; the server answers `internal` and the client
retries with the same id, which deduplication then answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

import asyncpg

from sync_server.clock import Clock, SystemClock
from sync_server.core.limits import SNAPSHOTS_KEPT
from sync_server.storage import (
    AdminRecord,
    DedupEntry,
    Fenced,
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
    undo_bound,
)
from sync_server.storage.pg_commit import Commit, HeldClaim, group_args
from sync_server.storage.pg_schema import (
    MIGRATION_LOCK,
    MIGRATIONS,
    SCHEMA_VERSION,
    unpack,
)
from sync_server.storage.replay import name_after
from sync_server.wire.codec import packb

log = logging.getLogger(__name__)

# Connections per node. Commits of different rooms run in parallel, one
# connection each; more connections than the database's cores mostly queue
# inside PostgreSQL (and each costs ~10 MB there), and max_connections
# (100 by default) is shared by every node of the cluster.
POOL_MIN = 2
POOL_MAX = 10

# Seconds any one storage call may take (waiting for a connection,
# connecting, the statements): past it the call raises StorageError, so a
# dead or hung database turns into `internal` answers, never into commands
# that hang.
OP_TIMEOUT = 5.0

# Commits waiting are written together (group commit): one statement, one
# transaction and one WAL flush for every room in the group, as SQLite's
# storage thread does with one fsync. Measured: 4x less CPU per commit
# (node and database) than one statement per commit, with 20 rooms busy.
# Groups hold at most this many commits: bounds one statement's size and
# so the latency of the first commit waiting in it.
MAX_GROUP_COMMITS = 256

# Groups in flight at once: while one waits for its WAL flush the next one
# forms and goes, so the database's flushes overlap; more only makes the
# groups smaller (more CPU per commit) with 2 vCPUs.
GROUP_FLUSHERS = 2

OWNERS_SQL = """
SELECT room, owner, epoch, head, lease_until > clock_timestamp() AS live
FROM rooms WHERE room = ANY($1::text[])
"""


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset of a connection handed back: nothing. asyncpg's
    default sends a query each time (unlock advisory locks, CLOSE ALL,
    UNLISTEN, RESET ALL): a second round trip per storage call, for session
    state this module never sets (its one advisory lock is transaction-
    scoped). An open transaction is still rolled back by asyncpg itself."""


def _settle(future: asyncio.Future[None], error: BaseException | None = None) -> None:
    if future.done():  # the caller gave up (cancelled)
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


def _patch_row(r: Any) -> PatchRow:
    """A PatchRow from (v, cmd_id, user_id, ops, events, views)."""
    views = None if r[5] is None else unpack(r[5])
    return PatchRow(r[0], r[1], r[2], unpack(r[3]), unpack(r[4]), views)


def describe_dsn(dsn: str) -> str:
    """The DSN without user or password, for messages and logs."""
    try:
        parts = urlsplit(dsn)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        return f"postgresql://{host}{port}{parts.path}"
    except ValueError:
        return "postgresql (unparsable DSN)"


class CommitFence(Protocol):
    """What fences this storage's commits: the node's leases on the same
    database (cluster/pg_leases.py). A commit is written only under the
    claim it names, and a claim the database refused is forgotten (only
    that claim, the very object `claim_of` gave: a newer one stays)."""

    node_id: str

    def claim_of(self, room: str) -> HeldClaim | None: ...

    def forget(self, room: str, claim: Any = None) -> None: ...


class PgStorage:
    """`Storage` on PostgreSQL. `application_name` names this node's
    connections in the database's views; `on_group(n)` is told the size of
    each group committed (for metrics). Commits need `leases` (attached by
    `PgLeases`): without them every commit is `Fenced`."""

    def __init__(
        self,
        dsn: str,
        *,
        application_name: str = "vtt-sync",
        pool_min: int = POOL_MIN,
        pool_max: int = POOL_MAX,
        op_timeout: float = OP_TIMEOUT,
        snapshots_kept: int = SNAPSHOTS_KEPT,
        group_flushers: int = GROUP_FLUSHERS,
        on_group: Callable[[int], None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        if snapshots_kept < 1:
            raise ValueError("snapshots_kept must be at least 1")
        self.dsn = dsn
        self.where = describe_dsn(dsn)
        self.application_name = application_name
        self.pool_min = pool_min
        self.pool_max = pool_max
        self.op_timeout = op_timeout
        self.snapshots_kept = snapshots_kept
        self.clock = clock or SystemClock()
        self.group_flushers = group_flushers
        self._pool: asyncpg.Pool | None = None
        self.leases: CommitFence | None = None
        self._waiting: deque[Commit] = deque()
        self._flushers = 0
        self._flush_tasks: set[asyncio.Task[None]] = set()
        self._writing: set[str] = set()  # rooms of the groups in flight
        self._on_group = on_group

    # --- lifecycle --------------------------------------------------------

    async def open(self) -> None:
        try:
            async with self.clock.timeout(self.op_timeout * 2):
                self._pool = await asyncpg.create_pool(
                    self.dsn,
                    min_size=self.pool_min,
                    max_size=self.pool_max,
                    timeout=self.op_timeout,  # connecting
                    command_timeout=self.op_timeout,
                    reset=_keep_session,
                    server_settings={"application_name": self.application_name[:63]},
                )
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StorageError(
                f"cannot connect to PostgreSQL at {self.where}: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            await self._migrate()
        except BaseException:
            await self._terminate()
            raise

    async def _migrate(self) -> None:
        """Create the schema, or bring an older one up to date, in one
        transaction under an advisory lock; refuse a newer one."""
        async with self._conn() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer)")
            found = await conn.fetchval("SELECT max(version) FROM schema_version")
            found = 0 if found is None else found
            if found > SCHEMA_VERSION:
                raise StorageError(
                    f"the database at {self.where} has schema version {found}, newer than "
                    f"this vtt-sync's {SCHEMA_VERSION}: run a newer vtt-sync"
                )
            for version in range(found, SCHEMA_VERSION):
                for step in MIGRATIONS[version]:
                    if callable(step):
                        await step(conn)
                    else:
                        await conn.execute(step)
            if found != SCHEMA_VERSION:
                await conn.execute("DELETE FROM schema_version")
                await conn.execute("INSERT INTO schema_version VALUES ($1)", SCHEMA_VERSION)
                log.info("database %s: schema %d -> %d", self.where, found, SCHEMA_VERSION)

    async def flushed(self) -> None:
        """Wait (a bounded time) for the commits being written."""
        if self._flush_tasks:
            with contextlib.suppress(TimeoutError):
                async with self.clock.timeout(self.op_timeout * 2):
                    await asyncio.wait(set(self._flush_tasks))

    async def close(self) -> None:
        """Close the pool once the commits being written finish (the
        leases were closed first: they release over this pool)."""
        if self._pool is None:
            return
        await self.flushed()
        pool, self._pool = self._pool, None
        try:
            async with self.clock.timeout(self.op_timeout):
                await pool.close()
        except TimeoutError:
            pool.terminate()

    async def _terminate(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.terminate()

    def connection(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """A pooled connection, as for a storage call (bounded, failures
        are `StorageError`): the leases talk to the database through it."""
        return self._conn()

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection for one storage call, bounded by op_timeout;
        every failure to reach the database becomes a StorageError."""
        if self._pool is None:
            raise StorageError("storage is closed")
        try:
            async with self.clock.timeout(self.op_timeout), self._pool.acquire() as conn:
                yield conn
        except StorageError:
            raise
        except asyncpg.UniqueViolationError as exc:
            raise StorageError(f"not stored, already there: {exc.detail or exc}") from exc
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StorageError(
                f"PostgreSQL at {self.where} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def _forget(self, room: str, claim: HeldClaim | None = None) -> None:
        """Tell the leases a claim is gone (refused, or the room deleted or
        replaced); only `claim`, if given: a newer one stays."""
        if self.leases is not None:
            self.leases.forget(room, claim)

    # --- storage ----------------------------------------------------------

    async def room_ids(self) -> set[str]:
        async with self._conn() as conn:
            return {r[0] for r in await conn.fetch("SELECT room FROM rooms")}

    async def create_room(
        self,
        room: str,
        state: dict[str, Any],
        gm_user: str,
        gm_token_hash: bytes,
        admin: AdminRecord,
    ) -> None:
        async with self._conn() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO rooms (room, created) VALUES ($1, $2)", room, self.clock.time()
            )
            await conn.execute(
                "INSERT INTO snapshots (room, v, state) VALUES ($1, 0, $2)", room, packb(state)
            )
            await conn.execute(
                "INSERT INTO users (room, user_id, token_hash) VALUES ($1, $2, $3)",
                room,
                gm_user,
                gm_token_hash,
            )
            await self._admin(conn, admin)

    async def delete_room(self, room: str, admin: AdminRecord) -> None:
        """Delete from any node. The room's row goes first: that waits for a
        commit in flight (it holds the row) and fences every later one of
        the owner, which gets `RoomDeleted`; the rest is then deleted with
        whatever that commit stored."""
        self._forget(room)
        async with self._conn() as conn, conn.transaction():
            await conn.execute("DELETE FROM rooms WHERE room = $1", room)
            for table in ("versions", "snapshots", "users"):
                await conn.execute(f"DELETE FROM {table} WHERE room = $1", room)
            await self._admin(conn, admin)

    @staticmethod
    async def _admin(conn: asyncpg.Connection, admin: AdminRecord) -> None:
        await conn.execute(
            "INSERT INTO admin_log (cmd_id, op, args, result, ts) VALUES ($1, $2, $3, $4, $5)",
            admin.cmd_id,
            admin.op,
            packb(admin.args),
            packb(admin.result),
            admin.ts,
        )

    async def admin_result(self, cmd_id: str) -> AdminRecord | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT op, args, result, ts FROM admin_log WHERE cmd_id = $1", cmd_id
            )
        if row is None:
            return None
        return AdminRecord(cmd_id, row[0], unpack(row[1]), unpack(row[2]), row[3])

    async def load_room(
        self, room: str, recent: int, dedup_window: int, dedup_since: float | None = None
    ) -> StoredRoom | None:
        # One snapshot of the database for the four reads: head, snapshot
        # and log agree even while the owner commits.
        async with (
            self._conn() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            top = await conn.fetchrow("SELECT head, snapshot_v FROM rooms WHERE room = $1", room)
            if top is None:
                return None
            head, snap_v = top
            state = await conn.fetchval(
                "SELECT state FROM snapshots WHERE room = $1 AND v = $2", room, snap_v
            )
            if state is None:
                raise StorageError(
                    f"room {room!r} has no snapshot at version {snap_v}: the database is damaged"
                )
            rows = await conn.fetch(
                "SELECT v, cmd_id, user_id, ops, events, views FROM versions "
                "WHERE room = $1 AND v > $2 ORDER BY v",
                room,
                min(snap_v, head - recent),
            )
            dedup_rows = await conn.fetch(
                "SELECT user_id, cmd_id, v, result, ts FROM versions "
                "WHERE room = $1 AND v > $2 AND cmd_id IS NOT NULL AND ts >= $3 ORDER BY v",
                room,
                head - dedup_window,
                float("-inf") if dedup_since is None else dedup_since,
            )
        log_rows = [_patch_row(r) for r in rows]
        dedup = [DedupEntry(r[0], r[1], r[2], unpack(r[3]), r[4]) for r in dedup_rows]
        return StoredRoom(room, snap_v, unpack(state), log_rows, dedup)

    async def stored_command(self, room: str, user: str, cmd_id: str) -> DedupEntry | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT v, result, ts FROM versions"
                " WHERE room = $1 AND user_id = $2 AND cmd_id = $3",
                room,
                user,
                cmd_id,
            )
        if row is None:
            return None
        return DedupEntry(user, cmd_id, row[0], unpack(row[1]), row[2])

    async def commit(
        self,
        room: str,
        records: list[VersionRecord],
        snapshot: tuple[int, dict[str, Any]] | None,
        expected: int,
    ) -> None:
        """Append the records if this node still holds the room at its
        claim's epoch, its lease is unexpired (database time) and the head
        is `expected`; else store nothing and raise `RoomDeleted`, `Fenced`
        (the claim is forgotten) or `VersionConflict`. Commits waiting
        together are written in one statement (group commit); each returns
        once its group is durable."""
        if self._pool is None:
            raise StorageError("storage is closed")
        if self.leases is None:
            raise Fenced(f"room {room!r}: no leases fence this storage's commits")
        node = self.leases.node_id
        claim = self.leases.claim_of(room)
        if claim is None:
            raise Fenced(f"room {room!r} is not held by node {node!r}: claim it first")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(Commit(room, records, snapshot, expected, node, claim, future))
        if self._flushers < self.group_flushers:
            self._flushers += 1
            task = asyncio.get_running_loop().create_task(self._flush_waiting())
            self._flush_tasks.add(task)
            task.add_done_callback(self._flush_tasks.discard)
        await future

    async def _flush_waiting(self) -> None:
        """Write groups while commits wait: each group takes the waiting
        commits in arrival order, at most one per room and none of a room
        whose commit is being written by another group (a room's next
        commit builds on the previous one: it waits for the next group)."""
        try:
            while self._waiting:
                group: dict[str, Commit] = {}
                later: deque[Commit] = deque()
                while self._waiting and len(group) < MAX_GROUP_COMMITS:
                    c = self._waiting.popleft()
                    if c.room in group or c.room in self._writing:
                        later.append(c)
                    else:
                        group[c.room] = c
                self._waiting.extendleft(reversed(later))
                if not group:
                    return  # all wait for groups in flight, whose flushers go on
                self._writing |= group.keys()
                try:
                    await self._write_group(sorted(group.values(), key=lambda c: c.room))
                finally:
                    self._writing -= group.keys()
        finally:
            self._flushers -= 1

    async def _write_group(self, group: list[Commit]) -> None:
        """One statement for the group; every commit's future is settled."""
        try:
            sql, args = group_args(group[0].node, group, self.snapshots_kept)
            async with self._conn() as conn:
                try:
                    stored = set(await conn.fetchval(sql, *args))
                except asyncpg.PostgresError:
                    if len(group) == 1:
                        raise
                    # The database refused the statement (a command id
                    # stored twice, say), so nothing of it was written:
                    # each commit alone, so that only the faulty one fails.
                    stored = None
                refused = [] if stored is None else [c for c in group if c.room not in stored]
                rows = (
                    {r["room"]: r for r in await conn.fetch(OWNERS_SQL, [c.room for c in refused])}
                    if refused
                    else {}
                )
        except BaseException as exc:
            error = exc if isinstance(exc, StorageError) else StorageError(f"not stored: {exc}")
            for c in group:
                _settle(c.future, error)
            if not isinstance(exc, Exception):
                raise
            return
        if stored is None:
            for c in group:
                await self._write_group([c])
            return
        if self._on_group is not None:
            self._on_group(len(group))
        for c in group:
            if c.room in stored:
                _settle(c.future)
            else:
                _settle(c.future, self._refusal(c, rows.get(c.room)))

    def _refusal(self, c: Commit, row: Any) -> VersionConflict:
        """Why nothing of a commit was stored (read after the statement: the
        label may lag a change made in between; the refusal itself is
        exact)."""
        if row is None:
            self._forget(c.room, c.claim)
            return RoomDeleted(f"room {c.room!r} was deleted")
        if row["owner"] != c.node or row["epoch"] != c.claim.epoch or not row["live"]:
            self._forget(c.room, c.claim)
            who = row["owner"] if row["live"] else None
            return Fenced(
                f"room {c.room!r}: node {c.node!r} lost its claim (epoch "
                f"{c.claim.epoch}; now epoch {row['epoch']}, owner {who!r})"
            )
        return VersionConflict(
            f"room {c.room!r} is no longer at version {c.expected} (head {row['head']})"
        )

    async def find_token(self, token_hash: bytes) -> tuple[str, str] | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT room, user_id FROM users WHERE token_hash = $1", token_hash
            )
        return None if row is None else (row[0], row[1])

    async def undo_target(self, room: str, before: int | None = None) -> UndoTarget | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT v, op, user_id, inverse FROM versions WHERE room = $1 AND undoable"
                " AND NOT undone AND v < $2 ORDER BY v DESC LIMIT 1",
                room,
                undo_bound(before),
            )
        return None if row is None else UndoTarget(row[0], row[1], row[2], unpack(row[3]))

    async def room_summaries(self) -> list[RoomSummary]:
        async with (
            self._conn() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            rooms = await conn.fetch(
                "SELECT r.room, r.head, r.created, r.snapshot_v, s.state,"
                " (SELECT ts FROM versions v WHERE v.room = r.room AND v.v = r.head)"
                " FROM rooms r LEFT JOIN snapshots s ON s.room = r.room AND s.v = r.snapshot_v"
                " ORDER BY r.room"
            )
            renames = await conn.fetch(
                "SELECT v.room, v.args FROM versions v JOIN rooms r ON r.room = v.room"
                " WHERE v.op = 'update_room' AND v.v > r.snapshot_v ORDER BY v.room, v.v"
            )
        by_room: dict[str, list[Any]] = {}
        for row in renames:
            by_room.setdefault(row[0], []).append(unpack(row[1]))
        out = []
        for room, head, created, _snap_v, state, last in rooms:
            snap_name = None if state is None else unpack(state).get("name")
            out.append(
                RoomSummary(room, head, created, last, name_after(snap_name, by_room.get(room, [])))
            )
        return out

    async def export_room(self, room: str) -> RoomDump | None:
        # One snapshot of the database for every read: no commit lands between.
        async with (
            self._conn() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            top = await conn.fetchrow(
                "SELECT head, created, snapshot_v FROM rooms WHERE room = $1", room
            )
            if top is None:
                return None
            head, created, snap_v = top
            state = await conn.fetchval(
                "SELECT state FROM snapshots WHERE room = $1 AND v = $2", room, snap_v
            )
            rows = await conn.fetch(
                "SELECT v, cmd_id, user_id, op, args, ops, inverse, events, result, undoable,"
                " undone, undoes, ts, views FROM versions WHERE room = $1 ORDER BY v",
                room,
            )
            token_rows = await conn.fetch(
                "SELECT user_id, token_hash FROM users WHERE room = $1", room
            )
        if state is None:
            raise StorageError(f"room {room!r} has no snapshot at version {snap_v}")
        versions = [
            VersionRecord(
                room=room, v=r[0], cmd_id=r[1], user=r[2], op=r[3], args=unpack(r[4]),
                ops=unpack(r[5]), inverse=unpack(r[6]), events=unpack(r[7]),
                result=unpack(r[8]), undoable=r[9], undoes=r[11], ts=r[12],
                views=None if r[13] is None else unpack(r[13]),
            )
            for r in rows
        ]  # fmt: skip
        undone = frozenset(r[0] for r in rows if r[10])
        tokens = {r[0]: bytes(r[1]) for r in token_rows}
        return RoomDump(room, head, created, snap_v, unpack(state), versions, undone, tokens)

    async def import_room(self, dump: RoomDump, admin: AdminRecord, replace: bool = False) -> None:
        """All or nothing. With `replace`, the old room goes in the same
        transaction; its owner node (cluster) is fenced at its next commit
        (the row it holds is new and has no owner)."""
        room = dump.room
        async with self._conn() as conn, conn.transaction():
            exists = await conn.fetchval("SELECT 1 FROM rooms WHERE room = $1 FOR UPDATE", room)
            if exists and not replace:
                raise RoomExists(f"room {room!r} already exists")
            await conn.execute("DELETE FROM rooms WHERE room = $1", room)
            for table in ("versions", "snapshots", "users"):
                await conn.execute(f"DELETE FROM {table} WHERE room = $1", room)
            for user, token_hash in dump.tokens.items():
                owner = await conn.fetchrow(
                    "SELECT room, user_id FROM users WHERE token_hash = $1", token_hash
                )
                if owner is not None:
                    raise TokenInUse(
                        f"the token hash of user {user} is already used by {owner[1]} of room "
                        f"{owner[0]!r}: import without token hashes, or delete that room"
                    )
                await conn.execute(
                    "INSERT INTO users (room, user_id, token_hash) VALUES ($1, $2, $3)",
                    room,
                    user,
                    token_hash,
                )
            await conn.execute(
                "INSERT INTO rooms (room, created, head, snapshot_v) VALUES ($1, $2, $3, $4)",
                room,
                dump.created,
                dump.head,
                dump.snapshot_v,
            )
            await conn.execute(
                "INSERT INTO snapshots (room, v, state) VALUES ($1, $2, $3)",
                room,
                dump.snapshot_v,
                packb(dump.snapshot),
            )
            await conn.executemany(
                "INSERT INTO versions (room, v, cmd_id, user_id, op, args, ops, inverse, events,"
                " result, undoable, undone, undoes, ts, views)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
                [
                    (room, r.v, r.cmd_id, r.user, r.op, packb(r.args), packb(r.ops),
                     packb(r.inverse), packb(r.events), packb(r.result), r.undoable,
                     r.v in dump.undone, r.undoes, r.ts,
                     None if r.views is None else packb(r.views))
                    for r in dump.versions
                ],
            )  # fmt: skip
            await self._admin(conn, admin)
        self._forget(room)  # a replaced room is claimed afresh, by whoever serves it next
