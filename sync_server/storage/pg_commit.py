"""The group commit's statement: the commits waiting together written as ONE
statement (postgres.py's docstring says why), composed of the parts a group
needs (`commit_sql`), with its parameters (`group_args`), and what each
commit of the group carries (`Commit`, under the claim it names).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Protocol

from sync_server.storage import VersionRecord
from sync_server.wire.codec import packb


class HeldClaim(Protocol):
    """What a commit reads of the claim it is written under (the leases'
    `Claim`, sync_server/cluster/leases.py): its epoch, which the statement
    checks against the room's. Storage states what it needs of the leases
    rather than import them: the cluster builds on storage, not the other
    way round."""

    @property
    def epoch(self) -> int: ...


# The group commit is one statement (postgres.py's docstring), composed of
# the parts a group needs: `fence`, the guarded update of the rooms' rows,
# and `ins`, the versions, always; marking undone versions, removing and
# setting token hashes, and writing snapshots only when a commit of the
# group does (each unused part would still cost planning and executor
# start-up: ~40% of the database's CPU per commit, measured). Every part
# keeps only the rows of rooms that passed the fence, so a room whose guard
# failed stores nothing while the others of its group land. Rooms are
# sorted, and so locked in one order by every statement locking several
# rooms (this one, renewals): two of them never wait for each other in a
# cycle. Parameters: $1 node, $2..$6 per room (room, expected head, new
# head, epoch, snapshot version or NULL), $7..$21 the records' columns,
# then each optional part's own.
COMMIT_FENCE = """
WITH fence AS (
    UPDATE rooms SET head = w.head, snapshot_v = greatest(rooms.snapshot_v, w.snap_v)
    FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
        AS w(room, expected, head, epoch, snap_v)
    WHERE rooms.room = w.room AND rooms.head = w.expected AND rooms.owner = $1
      AND rooms.epoch = w.epoch AND rooms.lease_until > clock_timestamp()
    RETURNING rooms.room
), ins AS (
    INSERT INTO versions (room, v, cmd_id, user_id, op, args, ops, inverse, events, result,
                          undoable, undone, undoes, ts, views)
    SELECT r.room, r.v, r.cmd_id, r.user_id, r.op, r.args, r.ops, r.inverse, r.events,
           r.result, r.undoable, r.undone, r.undoes, r.ts, r.views
    FROM unnest($7::text[], $8::bigint[], $9::text[], $10::text[], $11::text[], $12::bytea[],
                $13::bytea[], $14::bytea[], $15::bytea[], $16::bytea[], $17::boolean[],
                $18::boolean[], $19::bigint[], $20::float8[], $21::bytea[])
        AS r(room, v, cmd_id, user_id, op, args, ops, inverse, events, result, undoable,
             undone, undoes, ts, views)
    WHERE r.room IN (SELECT room FROM fence)
)"""
COMMIT_UNDO = """, undo AS (
    UPDATE versions SET undone = true
    FROM unnest({rooms}::text[], {vs}::bigint[]) AS u(room, v)
    WHERE u.room IN (SELECT room FROM fence) AND versions.room = u.room AND versions.v = u.v
)"""
COMMIT_TOKEN_DEL = """, tdel AS (
    DELETE FROM users USING unnest({rooms}::text[], {users}::text[]) AS d(room, user_id)
    WHERE d.room IN (SELECT room FROM fence)
      AND users.room = d.room AND users.user_id = d.user_id
)"""
COMMIT_TOKEN_SET = """, tset AS (
    INSERT INTO users (room, user_id, token_hash)
    SELECT t.room, t.user_id, t.token_hash
    FROM unnest({rooms}::text[], {users}::text[], {hashes}::bytea[])
        AS t(room, user_id, token_hash)
    WHERE t.room IN (SELECT room FROM fence)
    ON CONFLICT (room, user_id) DO UPDATE SET token_hash = excluded.token_hash
)"""
COMMIT_SNAPSHOT = """, snap AS (
    INSERT INTO snapshots (room, v, state)
    SELECT n.room, n.v, n.state
    FROM unnest({rooms}::text[], {vs}::bigint[], {states}::bytea[]) AS n(room, v, state)
    WHERE n.room IN (SELECT room FROM fence)
    ON CONFLICT (room, v) DO UPDATE SET state = excluded.state
), prune AS (
    DELETE FROM snapshots s USING unnest({rooms}::text[], {vs}::bigint[]) AS n(room, v)
    WHERE n.room IN (SELECT room FROM fence) AND s.room = n.room AND s.v < n.v
      AND s.v NOT IN (SELECT k.v FROM snapshots k WHERE k.room = n.room AND k.v < n.v
                      ORDER BY k.v DESC LIMIT {kept}::int - 1)
)"""
COMMIT_END = "\nSELECT coalesce(array_agg(room), '{}') FROM fence"


@functools.cache
def commit_sql(undo: bool, token_del: bool, token_set: bool, snapshot: bool) -> str:
    """The group commit statement with these optional parts; their
    parameters follow $21 in this order: undone (rooms, versions); token
    hashes removed (rooms, users); set (rooms, users, hashes); snapshots
    (rooms, versions, states, then the number kept)."""
    numbers = iter(range(22, 41))

    def param() -> str:
        return f"${next(numbers)}"

    sql = COMMIT_FENCE
    if undo:
        sql += COMMIT_UNDO.format(rooms=param(), vs=param())
    if token_del:
        sql += COMMIT_TOKEN_DEL.format(rooms=param(), users=param())
    if token_set:
        sql += COMMIT_TOKEN_SET.format(rooms=param(), users=param(), hashes=param())
    if snapshot:
        sql += COMMIT_SNAPSHOT.format(rooms=param(), vs=param(), states=param(), kept=param())
    return sql + COMMIT_END


class Commit:
    """A commit waiting for its group."""

    __slots__ = ("claim", "expected", "future", "node", "records", "room", "snapshot")

    def __init__(
        self,
        room: str,
        records: list[VersionRecord],
        snapshot: tuple[int, dict[str, Any]] | None,
        expected: int,
        node: str,
        claim: HeldClaim,
        future: asyncio.Future[None],
    ) -> None:
        self.room, self.records, self.snapshot = room, records, snapshot
        self.expected, self.node, self.claim, self.future = expected, node, claim, future


def group_args(node: str, group: list[Commit], kept: int) -> tuple[str, list[Any]]:
    """The statement and its parameters for a group (rooms sorted)."""
    rows = [(c, r) for c in group for r in c.records]
    args: list[Any] = [
        node,
        [c.room for c in group],
        [c.expected for c in group],
        [c.expected + len(c.records) for c in group],
        [c.claim.epoch for c in group],
        [c.snapshot[0] if c.snapshot is not None else None for c in group],
    ]
    undone_in_commit = [{r.undoes for r in c.records} for c in group]
    index = {id(c): i for i, c in enumerate(group)}
    args += [
        [c.room for c, _ in rows],
        [r.v for _, r in rows],
        [r.cmd_id for _, r in rows],
        [r.user for _, r in rows],
        [r.op for _, r in rows],
        [packb(r.args) for _, r in rows],
        [packb(r.ops) for _, r in rows],
        [packb(r.inverse) for _, r in rows],
        [packb(r.events) for _, r in rows],
        [packb(r.result) for _, r in rows],
        [r.undoable for _, r in rows],
        [r.v in undone_in_commit[index[id(c)]] for c, r in rows],  # undone in its own commit
        [r.undoes for _, r in rows],
        [r.ts for _, r in rows],
        [None if r.views is None else packb(r.views) for _, r in rows],
    ]
    undo = [(c.room, r.undoes) for c, r in rows if r.undoes is not None]
    token_del: list[tuple[str, str]] = []
    token_set: list[tuple[str, str, bytes]] = []
    for c in group:
        tokens: dict[str, bytes | None] = {}  # net effect of the commit, in order
        for r in c.records:
            for user in r.token_del:
                tokens[user] = None
            for user, token_hash in r.token_set:
                tokens[user] = token_hash
        token_del += [(c.room, u) for u, h in tokens.items() if h is None]
        token_set += [(c.room, u, h) for u, h in tokens.items() if h is not None]
    snaps = [(c.room, c.snapshot[0], packb(c.snapshot[1])) for c in group if c.snapshot]
    if undo:
        args += [[room for room, _ in undo], [v for _, v in undo]]
    if token_del:
        args += [[room for room, _ in token_del], [u for _, u in token_del]]
    if token_set:
        args += [[t[0] for t in token_set], [t[1] for t in token_set], [t[2] for t in token_set]]
    if snaps:
        args += [[t[0] for t in snaps], [t[1] for t in snaps], [t[2] for t in snaps], kept]
    sql = commit_sql(bool(undo), bool(token_del), bool(token_set), bool(snaps))
    return sql, args
