"""Room ownership on PostgreSQL (cluster/pg_leases.py, storage/postgres.py):
what is PostgreSQL's own. The contract every cluster backend shares runs in
tests/server/test_lease_contract.py; here, the database's clock (leases
are the database's time: one test lets a short real lease run out, with a
bounded wait), the node register, deletes from any node, the schema.

`node` composes a node as the server does (a `PgStorage` and the
`PgLeases` fencing it); test_pg_group_commit.py uses it too."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator

import asyncpg
import pytest

from sync_server.clock import FakeClock
from sync_server.cluster.leases import (
    Claim,
    LeaseKeeper,
    Owner,
    SingleNodeLeases,
)
from sync_server.cluster.pg_leases import PgLeases
from sync_server.core.auth import hash_token
from sync_server.hosting.server import leases_for
from sync_server.storage import (
    AdminRecord,
    Fenced,
    StorageError,
)
from sync_server.storage.memory import MemoryStorage
from sync_server.storage.postgres import SCHEMA_VERSION, PgStorage
from sync_server.storage.sqlite import SqliteStorage
from sync_server.testing.contracts import record
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


# --- the database's clock ---------------------------------------------------


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


# --- one node id, two processes ---------------------------------------------


async def test_an_old_process_of_the_same_node_cannot_release_the_new_ones_claim(
    a: PgNode, pg_db: str
) -> None:
    await create(a, "r1")
    await a.claim("r1")
    # (a short lease: the restart watches the old process's heartbeat for
    # one renewal round before it takes the id over, here half a second)
    async with node(pg_db, "a", lease_seconds=1.0) as restarted:
        await restarted.claim("r1")
        await a.release(["r1"])  # the old process, at its old epoch
        assert await restarted.owner("r1") == Owner("r1", "a", url("a"))
        assert await restarted.renew(["r1"]) == {"r1"}
        await restarted.commit("r1", [record(1)], None, 0)


# --- admin operations from any node -----------------------------------------


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
