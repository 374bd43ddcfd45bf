"""The storage contract (sync_server/testing/contracts/storage.py, shipped with the
product so that any backend can run it), run check by check on every
backend of the project. A new backend passes it before anything else uses
it: add it to `BACKENDS` (a factory that opens a fresh, empty store)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sync_server.cluster.pg_leases import PgLeases
from sync_server.storage import (
    Storage,
)
from sync_server.storage.memory import MemoryStorage
from sync_server.storage.postgres import PgStorage
from sync_server.storage.sqlite import SqliteStorage
from sync_server.testing.contracts import STORAGE_CHECKS, check_storage
from sync_server.testing.postgres import empty_tables


async def _sqlite(tmp: Path, request: pytest.FixtureRequest) -> Storage:
    return SqliteStorage(tmp, "NORMAL", snapshots_kept=2)


async def _memory(tmp: Path, request: pytest.FixtureRequest) -> Storage:
    return MemoryStorage(snapshots_kept=2)


async def _postgres(tmp: Path, request: pytest.FixtureRequest) -> Storage:
    dsn = request.getfixturevalue("pg_dsn")  # fails loudly when PostgreSQL is absent
    await empty_tables(dsn)
    store = PgStorage(dsn, snapshots_kept=2)
    PgLeases(store, node_id="contract", public_url="ws://contract")  # fences its commits
    return store


BACKENDS: dict[str, Callable[[Path, pytest.FixtureRequest], Awaitable[Storage]]] = {
    "sqlite": _sqlite,
    "memory": _memory,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(BACKENDS))
async def store(request, tmp_path) -> AsyncIterator[Storage]:
    s = await BACKENDS[request.param](tmp_path, request)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.mark.parametrize("check", STORAGE_CHECKS, ids=lambda check: check.__name__)
async def test_the_storage_contract(
    store: Storage, check: Callable[[Storage], Awaitable[None]]
) -> None:
    await check(store)


async def test_check_storage_runs_every_check_on_a_fresh_store() -> None:
    opened: list[MemoryStorage] = []

    def fresh() -> MemoryStorage:
        opened.append(MemoryStorage(snapshots_kept=2))
        return opened[-1]

    await check_storage(fresh)
    assert len(opened) == len(STORAGE_CHECKS) and len(set(map(id, opened))) == len(opened)


async def test_check_storage_names_the_check_a_backend_fails() -> None:
    class Forgetful(MemoryStorage):
        async def room_ids(self) -> set[str]:
            return set()  # a backend that loses its rooms

    with pytest.raises(AssertionError, match="storage contract, "):
        await check_storage(lambda: Forgetful(snapshots_kept=2))
