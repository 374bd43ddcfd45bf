"""PostgreSQL failing under load, at the storage level, on a throwaway
server of the test's own (never the shared one): crashed with
`pg_ctl stop -m immediate` then started again, or frozen (SIGSTOP) then
resumed.

What must hold: every commit that returned is stored after the restart;
every commit that raised did so as a `StorageError` (which the server
answers `internal`, retry) within the storage's timeout rather than
hanging, and is stored entirely or not at all (a COMMIT the connection
lost may have landed: the client's retry is then answered by
deduplication). Each writer commits two versions at a time, so "half
there" would show."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import asyncpg
import attrs

from sync_server.cluster.leases import Claim
from sync_server.cluster.pg_leases import PgLeases
from sync_server.core.auth import hash_token
from sync_server.storage import AdminRecord, StorageError, VersionConflict
from sync_server.storage.postgres import PgStorage
from sync_server.testing.contracts import record
from sync_server.testing.postgres import LocalCluster

ROOMS = 4
WAIT = 30.0  # bound of every wait here (seconds): a hang fails the test
OP_TIMEOUT = 1.0  # the storage's bound on one call, short to keep the test fast


@attrs.define
class Load:
    """Writers committing two versions at a time into each room."""

    store: PgStorage
    acked: list[tuple[str, int, int]] = attrs.Factory(list)
    failed: list[tuple[str, int, int, StorageError]] = attrs.Factory(list)
    stop: asyncio.Event = attrs.Factory(asyncio.Event)
    # Commits refused because the head moved: a commit that timed out
    # landed after all, later than the head was read again (possible only
    # when the database was frozen, not crashed). Nothing of the refused
    # one is stored, by the fence.
    conflicts: int = 0

    async def head(self, room: str) -> int:
        """The stored head, once the database answers again."""
        while True:
            try:
                stored = await self.store.load_room(room, 0, 0)
                assert stored is not None
                return max([stored.snapshot_v, *(row.v for row in stored.log)])
            except StorageError:
                await asyncio.sleep(0.05)

    async def writer(self, room: str) -> None:
        head = 0
        while not self.stop.is_set():
            batch = [record(head + i, f"{room}-{head + i}", room=room) for i in (1, 2)]
            try:
                await self.store.commit(room, batch, None, head)
            except VersionConflict:
                self.conflicts += 1
                head = await self.head(room)
            except StorageError as exc:
                self.failed.append((room, head + 1, head + 2, exc))
                head = await self.head(room)
            else:
                self.acked.append((room, head + 1, head + 2))
                head += 2

    def failures_since(self, mark: int) -> set[str]:
        return {room for room, *_ in self.failed[mark:]}


async def until(predicate, what: str) -> None:
    try:
        async with asyncio.timeout(WAIT):
            while not predicate():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


@contextlib.asynccontextmanager
async def loaded(cluster: LocalCluster):
    store = PgStorage(cluster.dsn, op_timeout=OP_TIMEOUT, pool_min=1, pool_max=ROOMS)
    # The leases outlive the outage: only storage is tested here.
    leases = PgLeases(store, node_id="a", public_url="ws://a", lease_seconds=120)
    await store.open()
    await leases.open()
    rooms = [f"r{i}" for i in range(ROOMS)]
    for room in rooms:
        await store.create_room(
            room, {"clock": 0}, "u1", hash_token(room), AdminRecord(room, "c", {}, {}, 0)
        )
        assert isinstance(await leases.claim(room), Claim)
    load = Load(store)
    tasks = [asyncio.get_running_loop().create_task(load.writer(room)) for room in rooms]
    try:
        yield load
    finally:
        load.stop.set()
        async with asyncio.timeout(WAIT):
            await asyncio.gather(*tasks)
        await leases.close()
        await store.close()
    await check_stored(cluster.dsn, load)


async def check_stored(dsn: str, load: Load) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT room, v, cmd_id FROM versions")
        heads = dict(await conn.fetch("SELECT room, head FROM rooms"))
    finally:
        await conn.close()
    stored = {(room, v): cmd for room, v, cmd in rows}
    for room, first, last in load.acked:  # nothing acknowledged is lost
        for v in (first, last):
            assert stored.get((room, v)) == f"{room}-{v}", (room, v)
    for room, first, last, exc in load.failed:  # all or nothing
        assert isinstance(exc, StorageError)
        halves = [(room, v) in stored for v in (first, last)]
        assert halves in ([True, True], [False, False]), (room, first, halves, exc)
    for room, head in heads.items():  # no hole, nothing past the head
        assert sorted(v for r, v in stored if r == room) == list(range(1, head + 1))


async def test_a_crash_of_postgresql_under_load_loses_nothing_acknowledged(
    pg_cluster: LocalCluster,
) -> None:
    async with loaded(pg_cluster) as load:
        await until(lambda: len(load.acked) >= 40, "commits before the crash")
        mark = len(load.failed)
        await asyncio.to_thread(pg_cluster.stop, "immediate")
        down_at = len(load.acked)
        await until(lambda: len(load.failures_since(mark)) == ROOMS, "every writer to fail")
        await asyncio.to_thread(pg_cluster.start)
        await until(lambda: len(load.acked) >= down_at + 40, "commits after the restart")
    assert len(load.failed) >= ROOMS
    assert load.conflicts == 0  # a crashed server finishes nothing after it restarts


def _cluster_pids(cluster: LocalCluster) -> list[int]:
    """The postmaster and every process it started."""
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == postmaster:
                children.append(int(stat.parent.name))
    return [postmaster, *children]


async def test_a_frozen_postgresql_times_commits_out_instead_of_hanging(
    pg_cluster: LocalCluster,
) -> None:
    async with loaded(pg_cluster) as load:
        await until(lambda: len(load.acked) >= 40, "commits before the freeze")
        mark = len(load.failed)
        pids = _cluster_pids(pg_cluster)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            frozen_at = len(load.acked)
            await until(lambda: len(load.failures_since(mark)) == ROOMS, "every writer to time out")
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        await until(lambda: len(load.acked) >= frozen_at + 40, "commits after the thaw")
    assert all(isinstance(exc, StorageError) for *_, exc in load.failed)
