"""Room ownership on PostgreSQL: claims, leases, renewals, releases, and the
fence every commit passes (sync_server/cluster/leases.py, pg_store.py).

Leases are expired by moving `lease_until` into the past in the database
(the clock the leases are read by), not by sleeping; one test lets a short
real lease run out, with a bounded wait."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator

import asyncpg
import pytest

from sync_server.cluster.leases import (
    Claim,
    LeaseKeeper,
    Owner,
    SingleNodeLeases,
    leases_for,
)
from sync_server.cluster.pg_leases import PgLeases
from sync_server.core.auth import hash_token
from sync_server.hosting.clock import FakeClock
from sync_server.storage import (
    AdminRecord,
    Fenced,
    RoomDeleted,
    StorageError,
    VersionConflict,
)
from sync_server.storage.memory import MemoryStorage
from sync_server.storage.postgres import SCHEMA_VERSION, PgStorage
from sync_server.storage.sqlite import SqliteStorage
from sync_server.testing.contracts import load, record
from sync_server.testing.postgres import create_database, drop_database

WAIT = 10.0  # bound of every wait in this file (seconds)


def url(name: str) -> str:
    return f"ws://{name}.test:8765"


class PgNode:
    """One cluster node as the server composes it: its storage and the
    leases fencing it; attributes are the leases' first, then the storage's
    (so a test reads `a.claim(...)` and `a.commit(...)` alike)."""

    def __init__(self, store: PgStorage, leases: PgLeases) -> None:
        self.store, self.leases = store, leases

    def __getattr__(self, name: str):
        try:
            return getattr(self.leases, name)
        except AttributeError:
            return getattr(self.store, name)


LEASE_KW = ("lease_seconds", "clock")


@contextlib.asynccontextmanager
async def node(dsn: str, name: str, **kw) -> AsyncIterator[PgNode]:
    kw.setdefault("pool_min", 1)
    kw.setdefault("pool_max", 2)
    lease_kw = {k: kw.pop(k) for k in LEASE_KW if k in kw}
    store = PgStorage(dsn, application_name=f"vtt-sync {name}", **kw)
    leases = PgLeases(store, node_id=name, public_url=url(name), **lease_kw)
    await store.open()
    try:
        await leases.open()
        try:
            yield PgNode(store, leases)
        finally:
            await leases.close()
    finally:
        await store.close()


@pytest.fixture
async def a(pg_db: str) -> AsyncIterator[PgNode]:
    async with node(pg_db, "a") as store:
        yield store


@pytest.fixture
async def b(pg_db: str) -> AsyncIterator[PgNode]:
    async with node(pg_db, "b") as store:
        yield store


async def sql(dsn: str, query: str, *args):
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(query, *args)
    finally:
        await conn.close()


async def expire(dsn: str, room: str) -> None:
    """The lease runs out, by the database's clock."""
    await sql(
        dsn,
        "UPDATE rooms SET lease_until = clock_timestamp() - interval '1 second' WHERE room = $1",
        room,
    )


async def create(store: PgNode, room: str) -> None:
    """A room created from `store`'s node, not claimed."""
    await store.create_room(
        room, {"clock": 0}, "u1", hash_token(f"t-{room}"), AdminRecord(f"mk-{room}", "c", {}, {}, 0)
    )


async def heads(dsn: str, room: str) -> list[int]:
    return [r[0] for r in await sql(dsn, "SELECT v FROM versions WHERE room = $1 ORDER BY v", room)]


# --- claims -----------------------------------------------------------------


async def test_fifty_nodes_claiming_at_once_make_one_winner_per_epoch(pg_db: str) -> None:
    async with contextlib.AsyncExitStack() as stack:
        nodes = [
            await stack.enter_async_context(node(pg_db, f"n{i}", pool_min=1, pool_max=1))
            for i in range(50)
        ]
        await create(nodes[0], "r1")
        epochs: list[int] = []
        for round_ in range(4):
            results = await asyncio.gather(*(n.claim("r1") for n in nodes))
            winners = [(n, r) for n, r in zip(nodes, results, strict=True) if isinstance(r, Claim)]
            assert len(winners) == 1, (round_, results)
            winner, claim = winners[0]
            others = [r for r in results if not isinstance(r, Claim)]
            assert others == [Owner("r1", winner.node_id, winner.public_url)] * 49
            assert await nodes[7].owner("r1") == Owner("r1", winner.node_id, winner.public_url)
            assert [n.node_id for n in nodes if n.claim_of("r1")] == [winner.node_id]
            epochs.append(claim.epoch)
            # Next round: the lease runs out, or the winner lets the room go.
            if round_ % 2:
                await winner.release(["r1"])
            else:
                await expire(pg_db, "r1")
                winner._forget("r1")  # as its LeaseKeeper would, once past its deadline
        assert epochs == sorted(set(epochs)), epochs  # strictly increasing


async def test_a_second_claim_before_expiry_gets_the_owners_url(a: PgNode, b: PgNode) -> None:
    await create(a, "r1")
    first = await a.claim("r1")
    assert isinstance(first, Claim) and first.room == "r1"
    assert await b.claim("r1") == Owner("r1", "a", url("a"))
    assert b.claim_of("r1") is None
    assert await b.owner("r1") == Owner("r1", "a", url("a"))
    assert await b.claim("nope") is None and await b.owner("nope") is None


async def test_a_claim_starts_a_new_epoch_that_fences_the_previous_even_the_same_node(
    a: PgNode, pg_db: str
) -> None:
    """A node restarted under the same id takes its rooms back at once; the
    old process, if it still runs (paused), is fenced by the new epoch."""
    await create(a, "r1")
    old = await a.claim("r1")
    await a.commit("r1", [record(1)], None, 0)
    # (a short lease: the restart watches the old process's heartbeat for
    # one renewal round before it takes the id over, here half a second)
    async with node(pg_db, "a", lease_seconds=1.0) as restarted:
        new = await restarted.claim("r1")
        assert isinstance(new, Claim) and new.epoch > old.epoch
        with pytest.raises(Fenced):
            await a.commit("r1", [record(2)], None, 1)
        assert a.claim_of("r1") is None
        await restarted.commit("r1", [record(2)], None, 1)
    assert await heads(pg_db, "r1") == [1, 2]


async def test_a_claim_sets_the_lease_by_the_database_clock(a: PgNode, pg_db: str) -> None:
    await create(a, "r1")
    claim = await a.claim("r1")
    assert isinstance(claim, Claim)
    rows = await sql(
        pg_db,
        "SELECT owner, owner_url, epoch, extract(epoch FROM lease_until - clock_timestamp())"
        " FROM rooms WHERE room = 'r1'",
    )
    owner, owner_url, epoch, left = rows[0]
    assert (owner, owner_url, epoch) == ("a", url("a"), claim.epoch)
    assert 0 < left <= a.lease_seconds
    assert claim.deadline <= a.clock.monotonic() + a.lease_seconds


# --- fencing ----------------------------------------------------------------


async def test_after_another_node_claims_the_old_owners_commit_is_fenced_and_stores_nothing(
    a: PgNode, b: PgNode, pg_db: str
) -> None:
    await create(a, "r1")
    await a.claim("r1")
    await a.commit("r1", [record(1)], None, 0)
    await expire(pg_db, "r1")  # a paused past its lease...
    taken = await b.claim("r1")  # ...and b took the room
    assert isinstance(taken, Claim)
    with pytest.raises(Fenced, match="lost its claim"):
        await a.commit("r1", [record(2, token_set=(("u9", hash_token("x")),))], (2, {}), 1)
    assert await heads(pg_db, "r1") == [1]
    assert await a.find_token(hash_token("x")) is None
    assert a.claim_of("r1") is None
    with pytest.raises(Fenced, match="claim it first"):  # refused locally from now on
        await a.commit("r1", [record(2)], None, 1)
    await b.commit("r1", [record(2)], None, 1)
    assert (await load(b)).v == 2


async def test_an_expired_lease_nobody_took_still_refuses_the_commit(a: PgNode, pg_db: str) -> None:
    """A node that wakes after its lease ran out must claim again (and so
    reload) before it commits, even if no other node took the room: what it
    queued while paused is answered `internal`, never acknowledged."""
    await create(a, "r1")
    first = await a.claim("r1")
    await expire(pg_db, "r1")
    with pytest.raises(Fenced):
        await a.commit("r1", [record(1)], None, 0)
    assert await heads(pg_db, "r1") == []
    assert await a.owner("r1") == Owner("r1", None, None)
    again = await a.claim("r1")
    assert isinstance(again, Claim) and again.epoch > first.epoch
    await a.commit("r1", [record(1)], None, 0)


async def test_a_commit_without_a_claim_is_fenced(a: PgNode, pg_db: str) -> None:
    await create(a, "r1")
    with pytest.raises(Fenced):
        await a.commit("r1", [record(1)], None, 0)
    assert await heads(pg_db, "r1") == []


async def test_a_stale_head_under_a_valid_claim_is_a_plain_conflict(a: PgNode) -> None:
    await create(a, "r1")
    await a.claim("r1")
    await a.commit("r1", [record(1)], None, 0)
    with pytest.raises(VersionConflict) as caught:
        await a.commit("r1", [record(1, "again")], None, 0)
    assert not isinstance(caught.value, Fenced)
    assert a.claim_of("r1") is not None  # still the owner


async def test_every_acknowledged_commit_survives_a_takeover_under_load(
    a: PgNode, b: PgNode, pg_db: str
) -> None:
    """a commits as fast as it can; meanwhile its lease runs out and b
    claims. Every commit a saw succeed is in what b loads, b's head is
    exactly a's last success, and a succeeds no more once fenced."""
    await create(a, "r1")
    await a.claim("r1")
    acked: list[int] = []
    fenced = asyncio.Event()

    async def writer() -> None:
        v = 0
        while True:
            try:
                await a.commit("r1", [record(v + 1)], None, v)
            except Fenced:
                fenced.set()
                return
            v += 1
            acked.append(v)

    task = asyncio.get_running_loop().create_task(writer())
    async with asyncio.timeout(WAIT):
        while len(acked) < 20:
            await asyncio.sleep(0.005)
        await expire(pg_db, "r1")
        claim = await b.claim("r1")
        assert isinstance(claim, Claim)
        loaded = await load(b)
        await fenced.wait()
        await task
    assert loaded.v == acked[-1] and loaded.state["clock"] == acked[-1]
    assert await heads(pg_db, "r1") == acked == list(range(1, len(acked) + 1))


async def test_a_real_short_lease_runs_out_and_another_node_takes_over(pg_db: str) -> None:
    async with node(pg_db, "a", lease_seconds=0.3) as a, node(pg_db, "b") as b:
        await create(a, "r1")
        await a.claim("r1")
        assert isinstance(await b.claim("r1"), Owner)
        async with asyncio.timeout(WAIT):
            while (await b.owner("r1")).node_id is not None:
                await asyncio.sleep(0.05)
        assert isinstance(await b.claim("r1"), Claim)
        with pytest.raises(Fenced):
            await a.commit("r1", [record(1)], None, 0)


# --- renewals and releases --------------------------------------------------


async def test_renewal_is_one_batch_that_keeps_only_what_is_still_held(
    a: PgNode, b: PgNode, pg_db: str
) -> None:
    rooms = [f"r{i}" for i in range(1, 6)]
    for room in rooms:
        await create(a, room)
        await a.claim(room)
    before = dict(await sql(pg_db, "SELECT room, lease_until FROM rooms"))
    await expire(pg_db, "r2")  # expired, nobody took it
    await expire(pg_db, "r3")
    assert isinstance(await b.claim("r3"), Claim)  # taken
    await b.delete_room("r4", AdminRecord("del-r4", "delete_room", {}, {}, 0))  # deleted
    old_deadline = a.claim_of("r1").deadline
    kept = await a.renew(rooms)
    assert kept == {"r1", "r5"}
    assert set(a.held()) == {"r1", "r5"}
    assert a.claim_of("r1").deadline >= old_deadline
    after = dict(await sql(pg_db, "SELECT room, lease_until FROM rooms"))
    assert after["r1"] > before["r1"] and after["r5"] > before["r5"]
    assert (await a.owner("r3")).node_id == "b"
    assert await a.renew(["r2", "never-held"]) == set()


async def test_a_released_room_is_claimable_at_once_and_fences_its_old_owner(
    a: PgNode, b: PgNode
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
        await a.commit("r1", [record(1)], None, 0)
    assert await b.owner("r2") == Owner("r2", "a", url("a"))  # untouched


async def test_a_release_by_a_fenced_node_does_not_free_the_new_owners_room(
    a: PgNode, b: PgNode, pg_db: str
) -> None:
    await create(a, "r1")
    await a.claim("r1")
    await expire(pg_db, "r1")
    await b.claim("r1")
    await a.release(["r1"])  # a still believes it holds r1 (epoch of its claim)
    assert await b.owner("r1") == Owner("r1", "b", url("b"))


async def test_an_old_process_of_the_same_node_cannot_release_the_new_ones_claim(
    a: PgNode, pg_db: str
) -> None:
    await create(a, "r1")
    await a.claim("r1")
    async with node(pg_db, "a", lease_seconds=1.0) as restarted:  # (see above)
        await restarted.claim("r1")
        await a.release(["r1"])  # the old process, at its old epoch
        assert await restarted.owner("r1") == Owner("r1", "a", url("a"))
        assert await restarted.renew(["r1"]) == {"r1"}
        await restarted.commit("r1", [record(1)], None, 0)


async def test_closing_a_node_releases_its_rooms(pg_db: str, b: PgNode) -> None:
    async with node(pg_db, "a") as a:
        await create(a, "r1")
        await a.claim("r1")
    assert isinstance(await b.claim("r1"), Claim)


# --- admin operations from any node -----------------------------------------


async def test_a_room_deleted_from_another_node_fences_its_owner_with_room_deleted(
    a: PgNode, b: PgNode, pg_db: str
) -> None:
    await create(b, "r1")  # created on b, served by a
    first = await a.claim("r1")
    await a.commit("r1", [record(1)], None, 0)
    assert await b.find_token(hash_token("t-r1")) == ("r1", "u1")
    await b.delete_room("r1", AdminRecord("del", "delete_room", {}, {"room": "r1"}, 0))
    with pytest.raises(RoomDeleted):
        await a.commit("r1", [record(2)], None, 1)
    assert a.claim_of("r1") is None
    assert await a.owner("r1") is None and await a.find_token(hash_token("t-r1")) is None
    assert (await a.admin_result("del")).op == "delete_room"
    # Created again under the same id: a new room, with epochs never reused.
    await b.create_room(
        "r1", {"clock": 0}, "u1", hash_token("t2"), AdminRecord("mk2", "c", {}, {}, 0)
    )
    again = await b.claim("r1")
    assert isinstance(again, Claim) and again.epoch > first.epoch
    assert await heads(pg_db, "r1") == []


async def test_a_room_recreated_under_an_old_claim_fences_it(a: PgNode, b: PgNode) -> None:
    await create(a, "r1")
    await a.claim("r1")
    await b.delete_room("r1", AdminRecord("del", "delete_room", {}, {}, 0))
    await b.create_room(
        "r1", {"clock": 0}, "u1", hash_token("t2"), AdminRecord("mk2", "c", {}, {}, 0)
    )
    with pytest.raises(Fenced):
        await a.commit("r1", [record(1)], None, 0)


async def test_a_delete_waits_for_a_commit_in_flight_and_takes_its_versions(
    a: PgNode, b: PgNode, pg_db: str
) -> None:
    """The delete locks the room's row first: a commit holding it finishes,
    then everything it stored goes with the room (nothing orphaned for a
    room created again under the same id)."""
    await create(a, "r1")
    await a.claim("r1")
    conn = await asyncpg.connect(pg_db)
    try:
        tx = conn.transaction()
        await tx.start()  # a commit in flight: the row is held, a version written
        await conn.execute("UPDATE rooms SET head = 1 WHERE room = 'r1'")
        await conn.execute(
            "INSERT INTO versions (room, v, user_id, op, args, ops, inverse, events, result,"
            " undoable, ts) VALUES ('r1', 1, 'u1', 'x', '', '', '', '', '', false, 0)"
        )
        deleting = asyncio.get_running_loop().create_task(
            b.delete_room("r1", AdminRecord("del", "delete_room", {}, {}, 0))
        )
        async with asyncio.timeout(WAIT):  # until the delete waits for the row
            while not await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            ):
                await asyncio.sleep(0.01)
        assert not deleting.done()
        await tx.commit()
    finally:
        await conn.close()
    async with asyncio.timeout(WAIT):
        await deleting
    assert await heads(pg_db, "r1") == []
    assert await sql(pg_db, "SELECT * FROM snapshots WHERE room = 'r1'") == []


async def test_admin_results_room_ids_and_tokens_are_seen_from_every_node(
    a: PgNode, b: PgNode
) -> None:
    await create(a, "r1")
    assert await b.room_ids() == {"r1"}
    assert await b.find_token(hash_token("t-r1")) == ("r1", "u1")
    assert (await b.admin_result("mk-r1")).op == "c"
    with pytest.raises(StorageError, match="already there"):
        await create(b, "r1")


# --- the lease keeper ---------------------------------------------------------


async def test_the_keeper_renews_and_reports_rooms_lost(a: PgNode, b: PgNode, pg_db: str) -> None:
    lost: list[set[str]] = []
    keeper = LeaseKeeper(a, lost.append)
    assert keeper.interval == a.lease_seconds / 3
    for room in ("r1", "r2"):
        await create(a, room)
        await a.claim(room)
    assert await keeper.tick() == set() and lost == []
    await expire(pg_db, "r2")
    await b.claim("r2")
    assert await keeper.tick() == {"r2"} and lost == [{"r2"}]
    assert set(a.held()) == {"r1"}


async def test_the_keeper_drops_rooms_past_their_deadline_while_the_database_is_away(
    pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    lost: list[set[str]] = []
    async with node(pg_db, "a", clock=clock) as a:
        await create(a, "r1")
        await a.claim("r1")

        async def unreachable(rooms):
            raise StorageError("PostgreSQL at ... failed: ConnectionRefusedError")

        monkeypatch.setattr(a, "renew", unreachable)
        keeper = LeaseKeeper(a, lost.append, clock=clock)
        clock.advance(a.lease_seconds - 1)
        assert await keeper.tick() == set()  # not yet: the lease may still hold
        clock.advance(1)
        assert await keeper.tick() == {"r1"} and lost == [{"r1"}]
        with pytest.raises(Fenced):
            await a.commit("r1", [record(1)], None, 0)


async def test_one_node_on_its_own_storage_always_holds_its_rooms(tmp_path) -> None:
    leases = leases_for(SqliteStorage(tmp_path))
    assert isinstance(leases, SingleNodeLeases) and isinstance(
        leases_for(MemoryStorage()), SingleNodeLeases
    )
    claim = await leases.claim("r1")
    assert claim == Claim("r1", 0, math.inf) and leases.claim_of("r1") == claim
    assert await leases.renew(["r1", "r2"]) == {"r1", "r2"}
    assert leases.expired(1e18) == set()
    keeper = LeaseKeeper(leases, lambda rooms: None)
    keeper.start()  # never renews: nothing to keep
    await keeper.stop()


def test_a_cluster_store_gets_leases_on_its_database_that_fence_it() -> None:
    store = PgStorage("postgresql://x@127.0.0.1:1/db")
    leases = leases_for(store, node_id="n", public_url="ws://n")
    assert isinstance(leases, PgLeases) and (leases.node_id, leases.public_url) == ("n", "ws://n")
    assert store.leases is leases and leases_for(store) is leases


# --- schema -------------------------------------------------------------------


@pytest.fixture
async def fresh_db(pg_dsn: str) -> AsyncIterator[str]:
    """An empty database of the test's own (pg_dsn proves the server is up)."""
    dsn, name = await create_database()
    try:
        yield dsn
    finally:
        await drop_database(name)


async def test_the_schema_is_created_once_even_by_nodes_starting_together(fresh_db: str) -> None:
    stores = [PgStorage(fresh_db) for i in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    for s in stores:
        await s.close()
    assert await sql(fresh_db, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    async with node(fresh_db, "again") as again:  # opening again migrates nothing
        assert await again.room_ids() == set()


async def test_a_database_newer_than_the_code_is_refused_clearly(fresh_db: str) -> None:
    async with node(fresh_db, "a"):
        pass
    await sql(fresh_db, "UPDATE schema_version SET version = $1", SCHEMA_VERSION + 1)
    store = PgStorage(fresh_db)
    with pytest.raises(StorageError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        await store.open()
    with pytest.raises(StorageError, match="closed"):
        await store.room_ids()


async def test_an_unreachable_database_is_a_clear_error_not_a_hang() -> None:
    from sync_server.testing.postgres import free_port

    store = PgStorage(f"postgresql://someone:secret@127.0.0.1:{free_port()}/db", op_timeout=2)
    with pytest.raises(StorageError, match="cannot connect to PostgreSQL") as caught:
        await store.open()
    assert "secret" not in str(caught.value) and "someone" not in str(caught.value)
