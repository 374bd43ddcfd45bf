"""`vtt-sync serve --workers N` (sync_server/ops/workers.py): one supervisor,
N server processes on the same data, each room served by one of them, the
cluster's leases, fencing, redirects and drains doing the rest
(docs/cluster.md). Real processes on free ports of 127.0.0.1, every wait
bounded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import msgpack
import pytest

from client_stub import Client
from sync_server.storage.sqlite import DB_FILE, SqliteStorage
from sync_server.wire import protocol
from tests.helpers.server import (
    WAIT,
    create_table,
    open_ws,
    start_subprocess_server,
)
from tests.server.test_cluster import check_log, load_through_a_kill, read_log, watcher_view

LEASE = 2.0  # seconds: short, so that a dead worker's rooms move within a test

pytestmark = pytest.mark.timeout(120)


@attrs.define
class Workers:
    """A supervisor in a child process, and what it printed of its workers."""

    child: Any
    urls: list[str]  # each worker's own address (what redirects name)
    pids: list[int]

    @property
    def url(self) -> str:  # the port users open
        return self.child.url

    def output(self) -> str:
        """Everything printed, once the supervisor has exited."""
        rest, _ = self.child.proc.communicate(timeout=WAIT)
        return "".join(self.child.output) + rest


def start_workers(data_dir: Path, n: int = 2, *extra: str) -> Workers:
    child = start_subprocess_server(
        data_dir, "--workers", str(n), "--lease-seconds", str(LEASE), *extra
    )
    found = [
        re.search(r"worker (\d+): node \S+, pid (\d+), at (ws://\S+)", line)
        for line in child.output
    ]
    rows = sorted((int(m[1]), int(m[2]), m[3]) for m in found if m)
    assert [i for i, _, _ in rows] == list(range(n)), child.output
    return Workers(child, [u for _, _, u in rows], [p for _, p, _ in rows])


def stop(workers: Workers) -> int:
    """SIGTERM to the supervisor: every worker drains; its exit status."""
    workers.child.proc.send_signal(signal.SIGTERM)
    return workers.child.proc.wait(timeout=WAIT * 3)


async def stored_log(data_dir: Path, room: str = "r1") -> tuple[int, list[Any], dict[str, Any]]:
    """What the SQLite file holds of a room (read while the workers run:
    WAL lets a reader in beside them)."""
    return await read_log(SqliteStorage(data_dir, "NORMAL"), room)


def owners(data_dir: Path) -> dict[str, str | None]:
    conn = sqlite3.connect(data_dir / DB_FILE, timeout=WAIT)
    try:
        return dict(conn.execute("SELECT room, owner FROM room_leases").fetchall())
    finally:
        conn.close()


async def test_two_workers_serve_one_port_redirect_to_the_owner_and_drain(tmp_path) -> None:
    data = tmp_path / "data"
    workers = start_workers(data)
    try:
        w0, w1 = workers.urls
        t1 = await create_table(w0, room="r1")  # the GM's hello at worker 0: it claims r1
        t2 = await create_table(w1, room="r2")  # and worker 1 claims r2
        found = owners(data)
        assert found["r1"] != found["r2"] and found["r2"].endswith("/w1"), found
        # A raw hello for r2 at worker 0: a redirect to worker 1, then 4302.
        ws = await open_ws(w0)
        await ws.send(msgpack.packb(protocol.hello(t2.tokens["obs"], "r2")))
        assert msgpack.unpackb(await ws.recv()) == protocol.redirect(w1 + "/")
        await ws.wait_closed()
        assert ws.close_code == protocol.CLOSE_REDIRECT
        # Clients given the shared port reach both rooms, whichever worker
        # accepts them, following the redirect when it is the other one.
        gm1 = Client(workers.url, t1.tokens["gm"], "r1", backoff_initial=0.05)
        gm2 = Client(workers.url, t2.tokens["gm"], "r2", backoff_initial=0.05)
        for gm in (gm1, gm2):
            await gm.connect(timeout=WAIT)
        ack1 = await gm1.command("damage", char=t1.chars["c_p1"], amount=1, timeout=WAIT)
        ack2 = await gm2.command("damage", char=t2.chars["c_p1"], amount=2, timeout=WAIT)
        # The same data directory refuses a second, independent server.
        with pytest.raises(RuntimeError, match="in use by another vtt-sync server"):
            start_subprocess_server(data)
        # SIGTERM to the supervisor drains every worker: the rooms' leases
        # are released, the sessions closed with 1012, the supervisor exits 0.
        closed = [disconnected(gm) for gm in (gm1, gm2)]
        assert await asyncio.to_thread(stop, workers) == 0
        async with asyncio.timeout(WAIT):
            details = await asyncio.gather(*closed)
        assert all(str(protocol.CLOSE_SERVICE_RESTART) in str(d) for d in details), details
        for gm in (gm1, gm2):
            await gm.close()
        assert set(owners(data).values()) == {None}  # released, not left to expire
        for room, ack in (("r1", ack1), ("r2", ack2)):
            head, versions, _ = await stored_log(data, room)
            assert head == ack["v"] and [v for v, _, _ in versions] == list(range(1, head + 1))
        out = workers.output()
        assert "draining every worker" in out and "Traceback" not in out, out
    finally:
        with contextlib.suppress(Exception):
            workers.child.kill()


def disconnected(client: Client) -> asyncio.Future[str]:
    """Resolved with the detail of the client's next disconnection."""
    fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def seen(status: str, detail: str) -> None:
        if status == "disconnected" and not fut.done():
            fut.set_result(detail)

    client.on_status(seen)
    return fut


async def test_kill_9_of_a_worker_under_load_loses_nothing_acknowledged(tmp_path) -> None:
    """The worker serving a room is killed (SIGKILL: no drain, no release)
    while two clients of the shared port command it: the supervisor starts
    it again, the room is served again (claimed at once by the restarted
    worker under its node id, or by the other after the lease), every
    acknowledged command is stored once, and every client converges."""
    data = tmp_path / "data"
    workers = start_workers(data)
    try:
        t = await create_table(workers.urls[1])  # worker 1 serves r1
        assert owners(data)["r1"].endswith("/w1")
        clients = [
            Client(workers.url, t.tokens["gm"], "r1", backoff_initial=0.05, backoff_max=0.5)
            for _ in range(2)
        ]
        watcher = Client(workers.url, t.tokens["obs"], "r1", backoff_initial=0.05)
        acked, _ = await load_through_a_kill(
            clients,
            watcher,
            t.chars["c_npc"],
            lambda: os.kill(workers.pids[1], signal.SIGKILL),
            2 * LEASE + 3,
        )
        head, versions, state = await stored_log(data)
        check_log(head, versions, acked)
        for c in clients:
            await c.wait_version(head, timeout=WAIT)
            assert c.state == state
        await watcher.wait_version(head, timeout=WAIT)
        assert watcher.state == watcher_view(state, t.users["obs"])
        for c in (*clients, watcher):
            await c.close()
        assert await asyncio.to_thread(stop, workers) == 0
        out = workers.output()
        assert "worker 1 restarted" in out, out
    finally:
        with contextlib.suppress(Exception):
            workers.child.kill()


async def test_workers_left_alone_by_a_killed_supervisor_keep_the_lock_then_stop(
    tmp_path,
) -> None:
    """kill -9 of the supervisor: its workers still hold the data
    directory's lock (no independent server starts beside them), notice
    they are orphans, drain and exit; then the directory is free."""
    data = tmp_path / "data"
    workers = start_workers(data)
    for pid in workers.pids:  # held still while the directory is tried
        os.kill(pid, signal.SIGSTOP)
    try:
        workers.child.kill()
        with pytest.raises(RuntimeError, match="in use by another vtt-sync server"):
            start_subprocess_server(data)
    finally:
        for pid in workers.pids:
            os.kill(pid, signal.SIGCONT)
    async with asyncio.timeout(WAIT):
        while any(_alive(pid) for pid in workers.pids):
            await asyncio.sleep(0.05)
    alone = start_subprocess_server(data)
    assert alone.terminate() == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) counts as gone.
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1][0] != "Z"
    return True


async def test_workers_on_postgresql_are_nodes_of_one_database(tmp_path, pg_db) -> None:
    workers = start_workers(tmp_path / "data", 2, "--database", pg_db)
    try:
        w0, w1 = workers.urls
        t = await create_table(w1, room="r1")  # worker 1 claims r1
        ws = await open_ws(w0)
        await ws.send(msgpack.packb(protocol.hello(t.tokens["obs"], "r1")))
        assert msgpack.unpackb(await ws.recv()) == protocol.redirect(w1 + "/")
        await ws.wait_closed()
        async with Client(workers.url, t.tokens["gm"], "r1", backoff_initial=0.05) as gm:
            ack = await gm.command("damage", char=t.chars["c_p1"], amount=1, timeout=WAIT)
            assert ack["v"] == 7
        assert await asyncio.to_thread(stop, workers) == 0
    finally:
        with contextlib.suppress(Exception):
            workers.child.kill()


def test_a_bad_workers_setting_is_refused_before_anything_starts(tmp_path) -> None:
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "sync_server", "serve", "--workers", "2"),
            *("--host", "0.0.0.0", "--data-dir", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
        env=dict(os.environ, VTT_SYNC_ADMIN_TOKEN="test-admin-token-" + "x" * 24),
    )
    assert proc.returncode == 2 and "needs --public-url" in proc.stderr + proc.stdout
    assert not (tmp_path / DB_FILE).exists()


def test_a_worker_inherits_only_the_lock_its_supervisor_holds(tmp_path) -> None:
    """`DataDirLock.inherit`: the descriptor must be this directory's lock
    file, and hold its lock; a worker given anything else does not start."""
    from sync_server.storage import StorageError
    from sync_server.storage.datadir import LOCK_FILE, DataDirLock

    supervisor = DataDirLock(tmp_path)
    supervisor.acquire()
    try:
        worker = DataDirLock(tmp_path)
        assert supervisor.fd is not None
        worker.inherit(os.dup(supervisor.fd))
        worker.release()  # closes its descriptor only: the lock holds
        with pytest.raises(StorageError, match="in use"):
            DataDirLock(tmp_path).acquire()
        other = tmp_path / "other"
        other.mkdir()
        elsewhere = os.open(other / LOCK_FILE, os.O_RDWR | os.O_CREAT)
        try:
            with pytest.raises(StorageError, match="not the one"):
                DataDirLock(tmp_path).inherit(elsewhere)
        finally:
            os.close(elsewhere)
    finally:
        supervisor.release()
    unlocked = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
    try:
        with pytest.raises(StorageError, match="does not hold"):
            DataDirLock(tmp_path).inherit(unlocked)
    finally:
        os.close(unlocked)
