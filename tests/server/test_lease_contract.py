"""The lease contract (sync_server/testing/contracts/leases.py: `LEASE_CHECKS`,
`check_leases`, shipped with the product), run check by check on both
cluster backends of the project: SQLite's workers leases (several
processes on one file, cluster/sqlite_leases.py) and PostgreSQL's
(cluster/pg_leases.py). Each node is a storage and the leases fencing it,
with connections of its own, as the server composes them; a lease is made
to run out by moving its end into the past in the database, not by
sleeping. What only one backend does (the database's clock, the node
register, the schema) stays in test_sqlite_leases.py and test_pg_leases.py."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from sync_server.cluster.pg_leases import PgLeases
from sync_server.cluster.sqlite_leases import SqliteLeases
from sync_server.storage.postgres import PgStorage
from sync_server.storage.sqlite import DB_FILE, SqliteStorage
from sync_server.testing.contracts import (
    LEASE_CHECKS,
    LeaseNode,
    LeaseWorld,
    check_leases,
)
from sync_server.testing.postgres import empty_tables


def url(name: str) -> str:
    return f"ws://{name}.test:8765"


@contextlib.asynccontextmanager
async def serving(name: str, store, leases):
    """A node of either world: its leases opened on its open store; both
    closed after, whatever the check did."""
    try:
        await leases.open()
        try:
            yield LeaseNode(name, store, leases)
        finally:
            await leases.close()
    finally:
        await store.close()


class SqliteWorld:
    """Processes sharing one SQLite file (workers mode)."""

    def __init__(self, data_dir: Path, leases: type[SqliteLeases] = SqliteLeases) -> None:
        self.data_dir = data_dir
        self.leases = leases

    @contextlib.asynccontextmanager
    async def node(self, name: str, *, lease_seconds: float | None = None):
        store = SqliteStorage(self.data_dir, "NORMAL")
        await store.open()
        kw = {} if lease_seconds is None else {"lease_seconds": lease_seconds}
        leases = self.leases(store, name, url(name), **kw)
        async with serving(name, store, leases) as node:
            yield node

    async def expire(self, room: str) -> None:
        conn = sqlite3.connect(self.data_dir / DB_FILE, timeout=10)
        try:
            with conn:
                conn.execute("UPDATE room_leases SET until = 0 WHERE room = ?", (room,))
        finally:
            conn.close()


class PgWorld:
    """Nodes of a cluster on one PostgreSQL database."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    @contextlib.asynccontextmanager
    async def node(self, name: str, *, lease_seconds: float | None = None):
        store = PgStorage(self.dsn, application_name=f"vtt-sync {name}", pool_min=1, pool_max=2)
        kw = {} if lease_seconds is None else {"lease_seconds": lease_seconds}
        leases = PgLeases(store, node_id=name, public_url=url(name), **kw)
        await store.open()
        async with serving(name, store, leases) as node:
            yield node

    async def expire(self, room: str) -> None:
        conn = await asyncpg.connect(self.dsn)
        try:
            await conn.execute(
                "UPDATE rooms SET lease_until = clock_timestamp() - interval '1 second'"
                " WHERE room = $1",
                room,
            )
        finally:
            await conn.close()


async def _sqlite(tmp: Path, request: pytest.FixtureRequest) -> LeaseWorld:
    return SqliteWorld(tmp)


async def _postgres(tmp: Path, request: pytest.FixtureRequest) -> LeaseWorld:
    dsn = request.getfixturevalue("pg_dsn")  # fails loudly when PostgreSQL is absent
    await empty_tables(dsn)
    return PgWorld(dsn)


WORLDS: dict[str, Callable[[Path, pytest.FixtureRequest], Awaitable[LeaseWorld]]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(WORLDS))
async def world(request, tmp_path) -> LeaseWorld:
    return await WORLDS[request.param](tmp_path, request)


@pytest.mark.parametrize("check", LEASE_CHECKS, ids=lambda check: check.__name__)
async def test_the_lease_contract(
    world: LeaseWorld, check: Callable[[LeaseWorld], Awaitable[None]]
) -> None:
    await check(world)


async def test_check_leases_runs_every_check_in_a_fresh_world(tmp_path: Path) -> None:
    opened: list[Path] = []

    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[LeaseWorld]:
        opened.append(tmp_path / f"w{len(opened)}")
        opened[-1].mkdir()
        yield SqliteWorld(opened[-1])

    await check_leases(fresh)
    assert len(opened) == len(LEASE_CHECKS)


async def test_check_leases_names_the_check_a_backend_fails(tmp_path: Path) -> None:
    class Sticky(SqliteLeases):
        async def release(self, rooms) -> None:
            return None  # leases that never let a room go

    worlds = iter(range(len(LEASE_CHECKS)))

    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[LeaseWorld]:
        data_dir = tmp_path / f"w{next(worlds)}"
        data_dir.mkdir()
        yield SqliteWorld(data_dir, Sticky)

    with pytest.raises(AssertionError, match="lease contract, a_released_room_is_claimable"):
        await check_leases(fresh)
