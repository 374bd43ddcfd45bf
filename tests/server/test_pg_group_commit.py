"""PostgreSQL's group commit: commits waiting together are written in one
statement, yet each gets its own answer, as if written alone."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from sync_server.cluster.leases import Claim
from sync_server.core.auth import hash_token
from sync_server.storage import (
    AdminRecord,
    Fenced,
    RoomDeleted,
    StorageError,
    VersionConflict,
)
from sync_server.storage.postgres import PgStorage
from sync_server.testing.contracts import load, record
from tests.server.test_pg_leases import PgNode, create, expire, heads, node, sql


@contextlib.asynccontextmanager
async def grouping(dsn: str, **kw) -> AsyncIterator[tuple[PgNode, list[int]]]:
    groups: list[int] = []
    async with node(dsn, "a", on_group=groups.append, **kw) as store:
        yield store, groups


async def outcome(awaitable) -> str:
    try:
        await awaitable
    except Exception as exc:
        return type(exc).__name__
    return "ok"


async def test_one_group_many_answers(pg_db: str) -> None:
    """Ten rooms commit at once: one statement; the commits the guard
    refuses (another owner, a deleted room, a stale head) store nothing
    and get their own exception; the others land."""
    async with grouping(pg_db, snapshots_kept=1) as (a, groups), node(pg_db, "b") as b:
        rooms = [f"r{i}" for i in range(10)]
        for room in rooms:
            await create(a, room)
            assert isinstance(await a.claim(room), Claim)
            await a.commit(room, [record(1, room=room)], None, 0)
        groups.clear()
        for room in ("r1", "r2"):
            await expire(pg_db, room)
            await b.claim(room)
        await b.delete_room("r3", AdminRecord("del", "delete_room", {}, {}, 0))
        expected = {room: 1 for room in rooms} | {"r4": 0}  # r4: a stale head

        def commit(r: str):  # every kind of change: none may land for a refused room
            v = expected[r] + 1
            change = record(
                v,
                "x",
                room=r,
                undoable=False,
                undoes=1,
                token_set=(("u9", hash_token(f"x-{r}")),),
                token_del=("u1",),
            )
            return a.commit(r, [change], (v, {"clock": v}), expected[r])

        got = await asyncio.gather(*(outcome(commit(r)) for r in rooms))
        assert dict(zip(rooms, got, strict=True)) == {
            "r0": "ok",
            "r1": "Fenced",
            "r2": "Fenced",
            "r3": "RoomDeleted",
            "r4": "VersionConflict",
            **{f"r{i}": "ok" for i in range(5, 10)},
        }
        assert groups == [10]  # one statement
        for room in rooms:
            assert await heads(pg_db, room) == {
                "r3": [],
                "r1": [1],
                "r2": [1],
                "r4": [1],
            }.get(room, [1, 2])
        assert a.claim_of("r1") is None and a.claim_of("r4") is not None
        for room in ("r0", "r1", "r2", "r4", "r5"):
            landed = room in ("r0", "r5")
            assert (await a.find_token(hash_token(f"x-{room}")) is not None) == landed
            assert (await a.find_token(hash_token(f"t-{room}")) is None) == landed
            assert (await a.undo_target(room) is None) == landed
            assert (await a.load_room(room, 0, 0)).snapshot_v == (2 if landed else 0)
            snapshots = await sql(pg_db, "SELECT v FROM snapshots WHERE room = $1", room)
            assert [row[0] for row in snapshots] == ([2] if landed else [0])


async def test_a_commit_the_database_refuses_fails_alone(pg_db: str) -> None:
    async with grouping(pg_db) as (a, groups):
        rooms = ["r0", "r1", "r2", "r3"]
        for room in rooms:
            await create(a, room)
            await a.claim(room)
        await a.commit("r2", [record(1, "dup", room="r2")], None, 0)
        groups.clear()
        expected = {"r0": 0, "r1": 0, "r2": 1, "r3": 0}
        got = await asyncio.gather(
            *(outcome(a.commit(r, [record(expected[r] + 1, "dup", room=r)], None, expected[r]))
              for r in rooms)
        )  # fmt: skip
        assert got == ["ok", "ok", "StorageError", "ok"]
        assert groups == [1, 1, 1]  # refused whole, then commit by commit
        assert [await heads(pg_db, r) for r in rooms] == [[1], [1], [1], [1]]


async def test_one_rooms_commits_never_share_a_group_and_keep_their_order(pg_db: str) -> None:
    async with grouping(pg_db) as (a, groups):
        await create(a, "r1")
        await create(a, "r2")
        await a.claim("r1")
        await a.claim("r2")
        got = await asyncio.gather(
            a.commit("r1", [record(1)], None, 0),
            a.commit("r1", [record(2)], None, 1),  # builds on the first
            a.commit("r2", [record(1, room="r2")], None, 0),
            a.commit("r1", [record(3)], None, 2),
        )
        assert got == [None] * 4
        assert groups == [2, 1, 1]
        assert (await load(a)).v == 3


async def test_a_group_of_every_kind_of_change_lands_per_room(pg_db: str) -> None:
    async with grouping(pg_db) as (a, groups):
        for room in ("r1", "r2"):
            await create(a, room)
            await a.claim(room)
            await a.commit(room, [record(1, room=room), record(2, room=room)], None, 0)
        groups.clear()
        await asyncio.gather(
            a.commit(
                "r1",
                [record(3, undoes=2, undoable=False, token_set=(("u2", hash_token("p1")),))],
                (3, {"clock": 3}),
                2,
            ),
            a.commit("r2", [record(3, room="r2", token_del=("u1",))], (3, {"clock": 30}), 2),
        )
        assert groups == [2]
        assert (await a.undo_target("r1")).v == 1 and (await a.undo_target("r2")).v == 3
        assert await a.find_token(hash_token("p1")) == ("r1", "u2")
        assert await a.find_token(hash_token("t-r2")) is None  # r2's u1 removed
        assert await a.find_token(hash_token("t-r1")) == ("r1", "u1")  # r1's u1 kept
        assert (await a.load_room("r1", 0, 0)).snapshot == {"clock": 3}
        assert (await a.load_room("r2", 0, 0)).snapshot == {"clock": 30}


async def test_a_closed_store_refuses_commits(pg_db: str) -> None:
    store = PgStorage(pg_db)
    with pytest.raises(StorageError, match="closed"):
        await store.commit("r1", [record(1)], None, 0)
    assert issubclass(RoomDeleted, Fenced) and issubclass(Fenced, VersionConflict)
