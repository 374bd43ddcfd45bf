"""Pytest fixtures for PostgreSQL (helpers in sync_server.testing.postgres).

- `pg_dsn` (session): a database for this run, created on the shared server
  and dropped at the end, or $VTT_SYNC_TEST_DATABASE as given. When no
  server answers, every test using it FAILS with a message saying how to
  start one: PostgreSQL tests are never skipped.
- `pg_db` (per test): `pg_dsn` with vtt-sync's tables emptied.
- `pg_cluster`: a throwaway server of the test's own (LocalCluster), started;
  for tests that crash it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from sync_server.storage.postgres import describe_dsn
from sync_server.testing.postgres import (
    UNREACHABLE,
    LocalCluster,
    admin_dsn,
    create_database,
    drop_database,
    empty_tables,
    wait_ready,
)

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even while an event
    loop runs in this thread (a sync fixture set up by an async one)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    given = os.environ.get("VTT_SYNC_TEST_DATABASE")
    if given:
        yield given
        return
    admin = admin_dsn()
    try:
        dsn, name = run_sync(create_database(admin))
    except Exception as exc:
        pytest.fail(
            UNREACHABLE.format(where=describe_dsn(admin), error=f"{type(exc).__name__}: {exc}"),
            pytrace=False,
        )
    try:
        yield dsn
    finally:
        run_sync(drop_database(name, admin))


@pytest.fixture
async def pg_db(pg_dsn: str) -> str:
    await empty_tables(pg_dsn)
    return pg_dsn


@pytest.fixture
async def pg_cluster() -> AsyncIterator[LocalCluster]:
    cluster = LocalCluster()
    try:
        await asyncio.to_thread(cluster.init)
        await asyncio.to_thread(cluster.start)
        await wait_ready(cluster.dsn)
        yield cluster
    finally:
        await asyncio.to_thread(cluster.destroy)
