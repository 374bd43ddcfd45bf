"""Room ownership among processes sharing one SQLite file (workers mode,
sync_server/cluster/sqlite_leases.py): the same contract as PostgreSQL's
leases, the fence in the storage's own commit transaction. The contract
both backends share is tests/server/test_lease_contract.py; here, what is
SQLite's own: the leases' time is the clock they are given.

Each "node" is a `SqliteStorage` plus its `SqliteLeases` on the same data
directory, with connections of its own, as a worker process has; leases are
expired by moving `until` into the past in the file, not by sleeping."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sync_server.clock import FakeClock
from sync_server.cluster.leases import Claim, LeaseKeeper, Leases, Owner
from sync_server.cluster.sqlite_leases import SqliteLeases
from sync_server.core.auth import hash_token
from sync_server.storage import AdminRecord, Fenced
from sync_server.storage.sqlite import DB_FILE, SqliteStorage
from sync_server.testing.contracts import record

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


# --- time: the leases read the clock they are given -------------------------


async def test_leases_follow_the_clock_they_are_given(tmp_path: Path) -> None:
    clock = FakeClock(start=2_000_000_000.0)
    async with node(tmp_path, "a", clock=clock) as a, node(tmp_path, "b", clock=clock) as b:
        await create(a, "r1")
        first = await a.claim("r1")
        assert isinstance(first, Claim) and first.deadline == clock.monotonic() + a.lease_seconds
        clock.advance(a.lease_seconds - 1)
        assert isinstance(await b.claim("r1"), Owner)
        clock.advance(1)
        assert a.expired(clock.monotonic()) == {"r1"}
        assert isinstance(await b.claim("r1"), Claim)


async def test_a_kept_lease_holds_for_ever_and_a_stopped_keeper_lets_it_run_out(
    tmp_path: Path,
) -> None:
    """The whole loop on the fake clock with autojump (no real waiting): a's
    keeper renews every third of the lease, so b finds r1 held after a
    minute; once a's keeper stops, the lease runs out within a lease, b
    takes the room and a's commit is fenced."""
    # (a threshold: the renewals run on a thread, real I/O the jump waits for)
    clock = FakeClock(start=2_000_000_000.0, autojump_threshold=0.01)
    async with node(tmp_path, "a", clock=clock) as a, node(tmp_path, "b", clock=clock) as b:
        await create(a, "r1")
        claim = await a.claim("r1")
        assert isinstance(claim, Claim)
        lost: list[set[str]] = []
        keeper = LeaseKeeper(a, lost.append, clock)
        keeper.start()
        start = clock.monotonic()
        for _ in range(
            60
        ):  # a second at a time: a jump during a renewal moves 1 s, not past the lease
            await clock.sleep(1)
        assert clock.monotonic() == start + 60
        assert await b.claim("r1") == Owner("r1", "a", url("a")) and lost == []
        assert a.claim_of("r1") is not None and a.claim_of("r1").epoch == claim.epoch  # type: ignore[union-attr]
        await keeper.stop()
        await clock.sleep(a.lease_seconds + 1)  # (+1: past a renewal in flight at the stop)
        taken = await b.claim("r1")
        assert isinstance(taken, Claim) and taken.epoch > claim.epoch
        with pytest.raises(Fenced):
            await a.storage.commit("r1", [record(1)], None, 0)
