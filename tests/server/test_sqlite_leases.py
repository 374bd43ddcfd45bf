"""Room ownership among processes sharing one SQLite file (workers mode,
sync_server/cluster/sqlite_leases.py): the same contract as PostgreSQL's
leases (tests/server/test_pg_leases.py), the fence in the storage's own
commit transaction.

Each "node" is a `SqliteStorage` plus its `SqliteLeases` on the same data
directory, with connections of its own, as a worker process has; leases are
expired by moving `until` into the past in the file, not by sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sync_server.cluster.leases import Claim, LeaseKeeper, Leases, Owner
from sync_server.cluster.sqlite_leases import SqliteLeases
from sync_server.core.auth import hash_token
from sync_server.hosting.clock import FakeClock
from sync_server.storage import AdminRecord, Fenced, RoomDeleted, VersionConflict
from sync_server.storage.sqlite import DB_FILE, SqliteStorage
from sync_server.testing.contracts import load, record

WAIT = 10.0


def url(name: str) -> str:
    return f"ws://127.0.0.1:1/{name}"


@contextlib.asynccontextmanager
async def node(data_dir: Path, name: str, **kw) -> AsyncIterator[SqliteLeases]:
    store = SqliteStorage(data_dir, "NORMAL")
    await store.open()
    leases = SqliteLeases(store, name, url(name), **kw)
    await leases.open()
    try:
        yield leases
    finally:
        await leases.close()
        await store.close()


@pytest.fixture
async def a(tmp_path: Path) -> AsyncIterator[SqliteLeases]:
    async with node(tmp_path, "a") as leases:
        yield leases


@pytest.fixture
async def b(tmp_path: Path, a: SqliteLeases) -> AsyncIterator[SqliteLeases]:
    async with node(tmp_path, "b") as leases:
        yield leases


def sql(data_dir: Path, query: str, *args) -> list:
    conn = sqlite3.connect(data_dir / DB_FILE, timeout=WAIT)
    try:
        with conn:
            return conn.execute(query, args).fetchall()
    finally:
        conn.close()


def expire(data_dir: Path, room: str) -> None:
    """The lease runs out (by the wall clock the leases are read by)."""
    sql(data_dir, "UPDATE room_leases SET until = 0 WHERE room = ?", room)


async def create(leases: SqliteLeases, room: str, again: str = "") -> None:
    await leases.storage.create_room(
        room,
        {"clock": 0},
        "u1",
        hash_token(f"t-{room}{again}"),
        AdminRecord(f"mk-{room}{again}", "c", {}, {}, 0),
    )


def heads(data_dir: Path, room: str) -> list[int]:
    return [r[0] for r in sql(data_dir, "SELECT v FROM versions WHERE room = ? ORDER BY v", room)]


def test_sqlite_leases_are_leases(tmp_path: Path) -> None:
    leases = SqliteLeases(SqliteStorage(tmp_path), "n")
    assert isinstance(leases, Leases)


# --- claims -----------------------------------------------------------------


async def test_eight_nodes_claiming_at_once_make_one_winner_per_epoch(tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as stack:
        nodes = [await stack.enter_async_context(node(tmp_path, f"n{i}")) for i in range(8)]
        await create(nodes[0], "r1")
        epochs: list[int] = []
        for round_ in range(4):
            results = await asyncio.gather(*(n.claim("r1") for n in nodes))
            winners = [(n, r) for n, r in zip(nodes, results, strict=True) if isinstance(r, Claim)]
            assert len(winners) == 1, (round_, results)
            winner, claim = winners[0]
            others = [r for r in results if not isinstance(r, Claim)]
            assert others == [Owner("r1", winner.node_id, winner.public_url)] * 7
            assert [n.node_id for n in nodes if n.claim_of("r1")] == [winner.node_id]
            epochs.append(claim.epoch)
            if round_ % 2:
                await winner.release(["r1"])
            else:
                expire(tmp_path, "r1")
                winner.expired(float("inf"))  # as its LeaseKeeper would, past its deadline
        assert epochs == sorted(set(epochs)), epochs


async def test_a_second_claim_before_expiry_gets_the_owners_url(
    a: SqliteLeases, b: SqliteLeases
) -> None:
    await create(a, "r1")
    first = await a.claim("r1")
    assert isinstance(first, Claim) and first.deadline <= a.clock.monotonic() + a.lease_seconds
    assert await b.claim("r1") == Owner("r1", "a", url("a"))
    assert b.claim_of("r1") is None
    assert await b.owner("r1") == Owner("r1", "a", url("a"))
    assert await b.claim("nope") is None and await b.owner("nope") is None


async def test_a_claim_fences_the_previous_one_even_of_the_same_node(
    a: SqliteLeases, tmp_path: Path
) -> None:
    """A worker restarted under the same node id takes its rooms back at
    once; the old process, if it still ran, would be fenced."""
    await create(a, "r1")
    old = await a.claim("r1")
    await a.storage.commit("r1", [record(1)], None, 0)
    async with node(tmp_path, "a") as restarted:
        new = await restarted.claim("r1")
        assert isinstance(new, Claim) and new.epoch > old.epoch
        with pytest.raises(Fenced):
            await a.storage.commit("r1", [record(2)], None, 1)
        assert a.claim_of("r1") is None
        await restarted.storage.commit("r1", [record(2)], None, 1)
    assert heads(tmp_path, "r1") == [1, 2]


# --- fencing ----------------------------------------------------------------


async def test_after_another_node_claims_the_old_owners_commit_stores_nothing(
    a: SqliteLeases, b: SqliteLeases, tmp_path: Path
) -> None:
    await create(a, "r1")
    await a.claim("r1")
    await a.storage.commit("r1", [record(1)], None, 0)
    expire(tmp_path, "r1")  # a paused past its lease...
    assert isinstance(await b.claim("r1"), Claim)  # ...and b took the room
    with pytest.raises(Fenced, match="lost its claim"):
        await a.storage.commit("r1", [record(2, token_set=(("u9", hash_token("x")),))], (2, {}), 1)
    assert heads(tmp_path, "r1") == [1]
    assert await a.storage.find_token(hash_token("x")) is None
    assert a.claim_of("r1") is None
    with pytest.raises(Fenced):  # refused from now on
        await a.storage.commit("r1", [record(2)], None, 1)
    await b.storage.commit("r1", [record(2)], None, 1)
    assert (await load(b.storage)).v == 2


async def test_an_expired_lease_nobody_took_still_refuses_the_commit(
    a: SqliteLeases, tmp_path: Path
) -> None:
    await create(a, "r1")
    first = await a.claim("r1")
    expire(tmp_path, "r1")
    with pytest.raises(Fenced):
        await a.storage.commit("r1", [record(1)], None, 0)
    assert heads(tmp_path, "r1") == []
    assert await a.owner("r1") == Owner("r1", None, None)
    again = await a.claim("r1")
    assert isinstance(again, Claim) and again.epoch > first.epoch
    await a.storage.commit("r1", [record(1)], None, 0)


async def test_a_commit_without_a_claim_is_fenced(a: SqliteLeases, tmp_path: Path) -> None:
    await create(a, "r1")
    with pytest.raises(Fenced, match="claim it first"):
        await a.storage.commit("r1", [record(1)], None, 0)
    assert heads(tmp_path, "r1") == []


async def test_a_stale_head_under_a_valid_claim_is_a_plain_conflict(a: SqliteLeases) -> None:
    await create(a, "r1")
    await a.claim("r1")
    await a.storage.commit("r1", [record(1)], None, 0)
    with pytest.raises(VersionConflict) as caught:
        await a.storage.commit("r1", [record(1, "again")], None, 0)
    assert not isinstance(caught.value, Fenced)
    assert a.claim_of("r1") is not None


async def test_a_fenced_commit_in_a_group_leaves_the_others_stored(
    a: SqliteLeases, b: SqliteLeases, tmp_path: Path
) -> None:
    """Commits of several rooms share one transaction: the fenced one is
    refused alone."""
    for room in ("r1", "r2"):
        await create(a, room)
        await a.claim(room)
    expire(tmp_path, "r1")
    await b.claim("r1")
    results = await asyncio.gather(
        a.storage.commit("r1", [record(1)], None, 0),
        a.storage.commit("r2", [record(1, room="r2")], None, 0),
        return_exceptions=True,
    )
    assert isinstance(results[0], Fenced) and results[1] is None
    assert heads(tmp_path, "r1") == [] and heads(tmp_path, "r2") == [1]


async def test_every_acknowledged_commit_survives_a_takeover_under_load(
    a: SqliteLeases, b: SqliteLeases, tmp_path: Path
) -> None:
    await create(a, "r1")
    await a.claim("r1")
    acked: list[int] = []
    fenced = asyncio.Event()

    async def writer() -> None:
        v = 0
        while True:
            try:
                await a.storage.commit("r1", [record(v + 1)], None, v)
            except Fenced:
                fenced.set()
                return
            v += 1
            acked.append(v)

    task = asyncio.get_running_loop().create_task(writer())
    async with asyncio.timeout(WAIT):
        while len(acked) < 20:
            await asyncio.sleep(0.005)
        expire(tmp_path, "r1")
        assert isinstance(await b.claim("r1"), Claim)
        loaded = await load(b.storage)
        await fenced.wait()
        await task
    assert loaded.v == acked[-1] and loaded.state["clock"] == acked[-1]
    assert heads(tmp_path, "r1") == acked == list(range(1, len(acked) + 1))


async def test_a_real_short_lease_runs_out_and_another_node_takes_over(tmp_path: Path) -> None:
    async with node(tmp_path, "a", lease_seconds=0.3) as a, node(tmp_path, "b") as b:
        await create(a, "r1")
        await a.claim("r1")
        assert isinstance(await b.claim("r1"), Owner)
        async with asyncio.timeout(WAIT):
            while (await b.owner("r1")).node_id is not None:  # type: ignore[union-attr]
                await asyncio.sleep(0.05)
        assert isinstance(await b.claim("r1"), Claim)
        with pytest.raises(Fenced):
            await a.storage.commit("r1", [record(1)], None, 0)


# --- renewals and releases --------------------------------------------------


async def test_renewal_keeps_only_what_is_still_held(
    a: SqliteLeases, b: SqliteLeases, tmp_path: Path
) -> None:
    rooms = [f"r{i}" for i in range(1, 6)]
    for room in rooms:
        await create(a, room)
        await a.claim(room)
    before = dict(sql(tmp_path, "SELECT room, until FROM room_leases"))
    expire(tmp_path, "r2")  # expired, nobody took it
    expire(tmp_path, "r3")
    assert isinstance(await b.claim("r3"), Claim)  # taken
    await b.storage.delete_room("r4", AdminRecord("del-r4", "delete_room", {}, {}, 0))
    old_deadline = a.claim_of("r1").deadline  # type: ignore[union-attr]
    assert await a.renew(rooms) == {"r1", "r5"}
    assert set(a.held()) == {"r1", "r5"}
    assert a.claim_of("r1").deadline >= old_deadline  # type: ignore[union-attr]
    after = dict(sql(tmp_path, "SELECT room, until FROM room_leases"))
    assert after["r1"] >= before["r1"] and after["r5"] >= before["r5"]
    assert (await a.owner("r3")) == Owner("r3", "b", url("b"))
    assert await a.renew(["r2", "never-held"]) == set()


async def test_a_released_room_is_claimable_at_once_and_fences_its_old_owner(
    a: SqliteLeases, b: SqliteLeases
) -> None:
    await create(a, "r1")
    await create(a, "r2")
    await a.claim("r1")
    await a.claim("r2")
    await a.release(["r1"])
    assert a.claim_of("r1") is None and a.claim_of("r2") is not None
    assert await b.owner("r1") == Owner("r1", None, None)
    assert isinstance(await b.claim("r1"), Claim)
    with pytest.raises(Fenced):
        await a.storage.commit("r1", [record(1)], None, 0)
    assert await b.owner("r2") == Owner("r2", "a", url("a"))


async def test_a_release_by_a_fenced_node_does_not_free_the_new_owners_room(
    a: SqliteLeases, b: SqliteLeases, tmp_path: Path
) -> None:
    await create(a, "r1")
    await a.claim("r1")
    expire(tmp_path, "r1")
    await b.claim("r1")
    await a.release(["r1"])  # a still believes it holds r1, at its old epoch
    assert await b.owner("r1") == Owner("r1", "b", url("b"))


async def test_closing_a_node_releases_its_rooms(tmp_path: Path, b: SqliteLeases) -> None:
    async with node(tmp_path, "c") as c:
        await create(c, "r1")
        await c.claim("r1")
    assert isinstance(await b.claim("r1"), Claim)


# --- rooms deleted or replaced ---------------------------------------------


async def test_a_room_deleted_by_another_node_fences_its_owner_with_room_deleted(
    a: SqliteLeases, b: SqliteLeases, tmp_path: Path
) -> None:
    await create(b, "r1")
    first = await a.claim("r1")
    await a.storage.commit("r1", [record(1)], None, 0)
    await b.storage.delete_room("r1", AdminRecord("del", "delete_room", {}, {}, 0))
    with pytest.raises(RoomDeleted):
        await a.storage.commit("r1", [record(2)], None, 1)
    assert a.claim_of("r1") is None and await a.owner("r1") is None
    # Created again under the same id: a new room, and epochs never reused.
    await create(b, "r1", again="2")
    again = await b.claim("r1")
    assert isinstance(again, Claim) and again.epoch > first.epoch
    assert heads(tmp_path, "r1") == []


async def test_a_room_recreated_under_an_old_claim_fences_it(
    a: SqliteLeases, b: SqliteLeases
) -> None:
    """The old owner's claim names a room that no longer exists: the
    trigger ended its lease with the deletion."""
    await create(a, "r1")
    await a.claim("r1")
    await b.storage.delete_room("r1", AdminRecord("del", "delete_room", {}, {}, 0))
    await create(b, "r1", again="2")
    with pytest.raises(Fenced):
        await a.storage.commit("r1", [record(1)], None, 0)


# --- the lease keeper ---------------------------------------------------------


async def test_the_keeper_renews_and_reports_rooms_lost(
    a: SqliteLeases, b: SqliteLeases, tmp_path: Path
) -> None:
    lost: list[set[str]] = []
    keeper = LeaseKeeper(a, lost.append)
    for room in ("r1", "r2"):
        await create(a, room)
        await a.claim(room)
    assert await keeper.tick() == set() and lost == []
    expire(tmp_path, "r2")
    await b.claim("r2")
    assert await keeper.tick() == {"r2"} and lost == [{"r2"}]
    assert set(a.held()) == {"r1"}


async def test_leases_follow_the_clock_they_are_given(tmp_path: Path) -> None:
    clock = FakeClock(start=2_000_000_000.0)
    async with node(tmp_path, "a", clock=clock) as a, node(tmp_path, "b", clock=clock) as b:
        await create(a, "r1")
        await a.claim("r1")
        clock.advance(a.lease_seconds - 1)
        assert isinstance(await b.claim("r1"), Owner)
        clock.advance(1)
        assert a.expired(clock.monotonic()) == {"r1"}
        assert isinstance(await b.claim("r1"), Claim)
