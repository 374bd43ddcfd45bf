"""Cluster mode: several nodes on one PostgreSQL database, each room served
by exactly one at a time (docs/cluster.md). Real nodes (in-process, and
child processes for the crashes), real sockets on 127.0.0.1, a database of
this test run's own (the `pg_db` fixture); every wait bounded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest

from client_stub import Client
from sync_server.cluster.pg_leases import PgLeases
from sync_server.storage import StorageError, replay
from sync_server.storage.postgres import PgStorage
from sync_server.testing.server import without_affordances
from sync_server.wire import protocol
from tests.helpers.server import (
    WAIT,
    connect_admin,
    create_table,
    open_ws,
    running_server,
    start_subprocess_server,
)

LEASE = 2.0  # seconds: short, so that failovers happen within a test


def node(tmp_path: Path, name: str, dsn: str, **kw: Any) -> Any:
    return running_server(tmp_path / name, database=dsn, node_id=name, lease_seconds=LEASE, **kw)


async def stored_log(dsn: str, room: str = "r1") -> tuple[int, list[Any], dict[str, Any]]:
    """What the database holds of a room: head, every version's (v, user,
    cmd_id), and the state replayed from it."""
    return await read_log(PgStorage(dsn), room)


async def read_log(store: Any, room: str) -> tuple[int, list[Any], dict[str, Any]]:
    """`stored_log` from any storage (opened and closed here)."""
    await store.open()
    try:
        dump = await store.export_room(room)
        stored = await store.load_room(room, 10_000, 10_000)
    finally:
        await store.close()
    assert dump is not None and stored is not None
    versions = [(r.v, r.user, r.cmd_id) for r in dump.versions]
    return dump.head, versions, replay(stored, 10_000).state


async def test_a_hello_at_another_node_is_redirected_and_a_drain_moves_the_room(
    tmp_path, pg_db
) -> None:
    async with node(tmp_path, "a", pg_db) as a, node(tmp_path, "b", pg_db) as b:
        t = await create_table(a.url)  # the GM's session on a: a claims r1
        # a raw hello at b: a redirect to a, then 4302
        ws = await open_ws(b.url)
        await ws.send(msgpack.packb(protocol.hello(t.tokens["obs"], "r1")))
        frame = msgpack.unpackb(await ws.recv())
        assert frame == protocol.redirect(a.leases.public_url)
        await ws.wait_closed()
        assert ws.close_code == protocol.CLOSE_REDIRECT
        # the Python client follows it, and stays through a drain of a
        statuses: list[str] = []
        async with Client(b.url, t.tokens["gm"], "r1", backoff_initial=0.05) as gm:
            gm.on_status(lambda status, _detail: statuses.append(status))
            assert gm.version == 6 and gm.role == "gm"
            ack = await gm.command("damage", char=t.chars["c_p1"], amount=1)
            assert set(b.rooms.hosts) == set() and set(a.rooms.hosts) == {"r1"}
            await a.close()  # draining: a gives r1 up, its sessions get 1012
            ack2 = await gm.command("damage", char=t.chars["c_p1"], amount=1, timeout=WAIT)
            assert ack2["v"] == ack["v"] + 1 and set(b.rooms.hosts) == {"r1"}
            assert statuses.count("connected") >= 1
        head, versions, state = await stored_log(pg_db)
        assert head == ack2["v"] and [v for v, _, _ in versions] == list(range(1, head + 1))
        assert state["characters"][t.chars["c_p1"]]["pe"] == 13


async def test_admin_operations_work_from_any_node(tmp_path, pg_db) -> None:
    async with node(tmp_path, "a", pg_db) as a, node(tmp_path, "b", pg_db) as b:
        t = await create_table(a.url)  # created through a
        gm = await t.connect("gm")  # a serves r1
        admin_b = await connect_admin(b.url)
        again = await admin_b.cmd("create_room", {"room": "r1", "name": "again"})
        assert again["code"] == "conflict"  # b knows r1, created by a
        gone = await admin_b.ok("delete_room", {"room": "r1"})
        assert gone["result"] == {"room": "r1"}
        code, _ = await gm.closed()  # a finds out at its next renewal at the latest
        assert code == protocol.CLOSE_ROOM_DELETED
        assert await a.rooms.has("r1") is False and a.rooms.hosts == {}
        await admin_b.close()


# --- crashes, with nodes in child processes --------------------------------


def spawn(tmp_path: Path, name: str, dsn: str) -> Any:
    return start_subprocess_server(
        tmp_path / name,
        "--database", dsn, "--node-id", name, "--lease-seconds", str(LEASE),
    )  # fmt: skip


# Once the room is served again after a kill, the clients go on for this
# long, then stop: the new owner's commits under the same load, without
# the seconds of load that would follow until the bound of a failover.
SERVED_AGAIN_LOAD_SECONDS = 1.0


async def _load(
    client: Client,
    char: str,
    until: float,
    acked: list[int],
    refused: list[str],
    stop: asyncio.Event | None = None,
):
    n = 0
    while time.monotonic() < until and not (stop and stop.is_set()):
        n += 1
        try:
            ack = await client.command("damage", char=char, amount=0, timeout=WAIT)
            acked.append(ack["v"])
        except Exception as exc:
            refused.append(type(exc).__name__)
            await asyncio.sleep(0.05)


async def test_kill_9_of_the_owner_under_load_loses_nothing_acknowledged(tmp_path, pg_db) -> None:
    nodes = {name: spawn(tmp_path, name, pg_db) for name in ("n1", "n2", "n3")}
    try:
        t = await create_table(nodes["n1"].url)
        for room in ("r2", "r3"):
            await create_table(nodes["n2"].url, room=room)
        # clients of r1 come in at n1 (the owner) and n3 (redirected)
        # Each client knows every node (as behind a load balancer), starting
        # with its own: one at the owner, one redirected there from n3.
        urls = [nodes[n].url for n in ("n1", "n2", "n3")]
        clients = [
            Client(urls, t.tokens["gm"], "r1", backoff_initial=0.05, backoff_max=0.5),
            Client(
                urls[2:] + urls[:2], t.tokens["gm"], "r1", backoff_initial=0.05, backoff_max=0.5
            ),
        ]
        watcher = Client(urls[2:] + urls[:2], t.tokens["obs"], "r1", backoff_initial=0.05)
        acked, served_again = await load_through_a_kill(
            clients, watcher, t.chars["c_npc"], nodes["n1"].kill, 3 * LEASE + 3
        )
        assert served_again < LEASE + 3, served_again  # failover within the lease and a bit
        head, versions, state = await stored_log(pg_db)
        check_log(head, versions, acked)
        await watcher.wait_version(head, timeout=WAIT)
        fresh = Client(nodes["n2"].url, t.tokens["gm"], "r1")
        await fresh.connect(timeout=WAIT)
        assert without_affordances(fresh.state) == state
        for c in clients:
            await c.wait_version(head, timeout=WAIT)
            assert without_affordances(c.state) == state
        assert without_affordances(watcher.state) == watcher_view(state, t.users["obs"])
        for c in (*clients, watcher, fresh):
            await c.close()
    finally:
        for child in nodes.values():
            with contextlib.suppress(Exception):
                child.kill()


async def load_through_a_kill(
    clients: list[Client], watcher: Client, char: str, kill: Any, seconds: float
) -> tuple[list[int], float]:
    """The clients command the room, for `seconds` at most; after one,
    `kill()` (a SIGKILL of the room's server); once a command is
    acknowledged again, for SERVED_AGAIN_LOAD_SECONDS more. Returns the
    versions acknowledged and how long after the kill a command was
    acknowledged again."""
    for c in (*clients, watcher):
        await c.connect(timeout=WAIT)
    acked: list[int] = []
    refused: list[str] = []
    until = time.monotonic() + seconds
    stop = asyncio.Event()
    load = [asyncio.create_task(_load(c, char, until, acked, refused, stop)) for c in clients]
    await asyncio.sleep(1.0)
    killed_at = time.monotonic()
    kill()  # SIGKILL: no drain, no release
    served_again = None
    async with asyncio.timeout(LEASE + WAIT):
        while served_again is None:
            before = len(acked)
            await asyncio.sleep(0.05)
            if len(acked) > before and time.monotonic() - killed_at > 0.1:
                served_again = time.monotonic() - killed_at
    await asyncio.sleep(SERVED_AGAIN_LOAD_SECONDS)
    stop.set()
    await asyncio.gather(*load)
    return acked, served_again


def check_log(head: int, versions: list[Any], acked: list[int]) -> None:
    """Nothing acknowledged is lost, nothing is stored twice."""
    assert [v for v, _, _ in versions] == list(range(1, head + 1))  # contiguous
    ids = [cmd_id for _, _, cmd_id in versions if cmd_id is not None]
    assert len(ids) == len(set(ids))  # every command at most once
    assert sorted(acked) == sorted(set(acked)) and set(acked) <= set(range(1, head + 1))


def watcher_view(state: dict[str, Any], user: str) -> dict[str, Any]:
    import rules

    return rules.view_state(state, rules.Viewer(user, "observer"))


async def test_a_paused_owner_wakes_up_fenced(tmp_path, pg_db) -> None:
    """SIGSTOP the owner past its lease, let another node take the room and
    commit, SIGCONT the first: what it had queued is never acknowledged,
    and it stops serving the room."""
    a, b = spawn(tmp_path, "a", pg_db), spawn(tmp_path, "b", pg_db)
    try:
        t = await create_table(a.url)
        on_a = await _raw_gm(a.url, t)
        os.kill(a.proc.pid, signal.SIGSTOP)
        try:
            # sent while a is paused: it waits in a's socket
            await on_a.send(
                msgpack.packb(
                    protocol.cmd("while-paused", "damage", {"char": t.chars["c_npc"], "amount": 1})
                )
            )
            await asyncio.sleep(LEASE + 0.5)
            async with Client(b.url, t.tokens["gm"], "r1") as gm_b:  # b takes r1 over
                ack = await gm_b.command("damage", char=t.chars["c_npc"], amount=2)
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        frames = []
        with contextlib.suppress(Exception):
            async with asyncio.timeout(WAIT):
                async for raw in on_a:
                    frames.append(msgpack.unpackb(raw))
        replies = [f for f in frames if f.get("id") == "while-paused"]
        assert all(f["t"] == "error" and f["code"] == "internal" for f in replies), frames
        assert on_a.close_code == protocol.CLOSE_SERVICE_RESTART, (on_a.close_code, frames)
        head, versions, _ = await stored_log(pg_db)
        assert head == ack["v"] and "while-paused" not in [c for _, _, c in versions]
    finally:
        for child in (a, b):
            with contextlib.suppress(Exception):
                os.kill(child.proc.pid, signal.SIGCONT)
                child.kill()


async def _raw_gm(url: str, t: Any) -> Any:
    ws = await open_ws(url)
    await ws.send(msgpack.packb(protocol.hello(t.tokens["gm"], "r1")))
    welcome = msgpack.unpackb(await ws.recv())
    assert welcome["t"] == "welcome"
    return ws


@pytest.mark.timeout(120)
async def test_postgresql_killed_under_load_loses_nothing_acknowledged(
    tmp_path, pg_cluster
) -> None:
    """The database itself crashes (`pg_ctl stop -m immediate`, a server of
    this test's own) and comes back: commands meanwhile get `internal`, none
    is acknowledged without being stored, and the room goes on."""
    dsn = pg_cluster.dsn
    async with node(tmp_path, "solo", dsn) as srv:
        t = await create_table(srv.url)
        async with Client(srv.url, t.tokens["gm"], "r1", backoff_initial=0.1) as gm:
            acked: list[int] = []
            refused: list[str] = []
            until = time.monotonic() + 6
            stop = asyncio.Event()
            load = asyncio.create_task(_load(gm, t.chars["c_npc"], until, acked, refused, stop))
            await asyncio.sleep(1.0)
            await asyncio.to_thread(pg_cluster.stop, "immediate")
            await asyncio.sleep(1.0)
            await asyncio.to_thread(pg_cluster.start)
            served = len(acked)
            async with asyncio.timeout(WAIT):  # the room is served again: a while more
                while len(acked) == served and not load.done():
                    await asyncio.sleep(0.05)
            await asyncio.sleep(SERVED_AGAIN_LOAD_SECONDS)
            stop.set()
            await load
            assert refused  # the outage was felt: internal (retry)
            ack = await gm.command("damage", char=t.chars["c_npc"], amount=0, timeout=WAIT)
    head, versions, _ = await stored_log(dsn)
    assert [v for v, _, _ in versions] == list(range(1, head + 1))
    assert set(acked) | {ack["v"]} <= set(range(1, head + 1))


async def test_an_idle_room_gives_its_lease_up(tmp_path, pg_db) -> None:
    """Ownership does not pile up on one node: an idle room is unloaded and
    its lease released, so the next hello anywhere claims it at once."""
    from sync_server.clock import FakeClock

    clock = FakeClock()
    async with (
        node(tmp_path, "a", pg_db, clock=clock, room_idle_unload_seconds=60) as a,
        node(tmp_path, "b", pg_db) as b,
    ):
        t = await create_table(a.url)
        owner = await a.leases.owner("r1")
        assert owner is not None and owner.node_id == "a"
        clock.advance(61)
        assert await a.rooms.unload_idle() == ["r1"]
        owner = await a.leases.owner("r1")
        assert owner is not None and owner.node_id is None  # released, not expired
        async with Client(b.url, t.tokens["gm"], "r1") as gm:  # b claims it at once
            assert gm.version == 6 and set(b.rooms.hosts) == {"r1"}
            owner = await b.leases.owner("r1")
            assert owner is not None and owner.node_id == "b"


async def test_a_second_node_under_a_live_nodes_id_refuses_to_start_naming_it(
    tmp_path, pg_db
) -> None:
    """Two nodes with one --node-id (the default hostname:port, on cloned
    machines) would take each other's rooms for ever: the second sees the
    first's heartbeat and refuses to start, naming it. Once the first stops
    cleanly, the id is free at once; a crashed first (no heartbeat) is
    taken over after one renewal round."""
    async with node(tmp_path, "a", pg_db) as a:
        with pytest.raises(StorageError) as refused:
            async with running_server(
                tmp_path / "clone", database=pg_db, node_id="a", lease_seconds=LEASE
            ):
                pass
        message = str(refused.value)
        assert "node id 'a' is in use by another running node" in message
        assert a.leases.public_url in message and "--node-id" in message
        t = await create_table(a.url)  # the first node still serves its rooms
        gm = await t.connect("gm")
        await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 1})
        await gm.close()
    async with running_server(
        tmp_path / "clone", database=pg_db, node_id="a", lease_seconds=LEASE
    ) as again:
        assert again.leases.node_id == "a"
    # a crashed node: its row stays, its heartbeat does not move
    store = PgStorage(pg_db)
    await store.open()
    await PgLeases(store, node_id="b", public_url="ws://b.test").open()
    await store._terminate()  # no clean close: the row remains
    async with node(tmp_path, "b", pg_db) as b:
        assert b.leases.node_id == "b"
