"""Issue 19, item 3: one GM, or one player, must not exhaust a node.
Every bound here is a named limit (sync_server/core/limits.py,
docs/security.md); the costs they bound are measured by the benchmarks
(bench/isolation_bench.py, bench/memory_bench.py), never timed here."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import urllib.request
from typing import Any

import msgpack
import pytest
from websockets.asyncio.client import connect as ws_connect

from rules import validate
from sync_server.clock import FakeClock
from sync_server.core.auth import RecentTokens
from sync_server.core.limits import DEDUP_WINDOW_SECONDS, Limits
from sync_server.hosting.admin_http import export_text
from sync_server.storage import StorageError, transfer
from sync_server.testing.contracts import stored_patches
from sync_server.testing.core import command, new_core
from sync_server.wire.codec import Codec
from sync_server.wire.protocol import MSGPACK
from tests.helpers.server import (
    ADMIN_TOKEN,
    SHEET,
    WAIT,
    connect_admin,
    create_table,
    on_both_transports,
    open_ws,
    running_server,
    spy_evaluations,
    status_patients,
)

pytestmark = on_both_transports  # issue 22: the fast transport keeps the protocol


def test_recent_tokens_are_pruned_in_expiry_order_and_capped() -> None:
    """A rotate_token loop: the map stays at its cap (the oldest go first),
    expired entries leave from the front, a recent one is still recalled."""
    clock = FakeClock()
    recent = RecentTokens(600.0, clock.monotonic, max_items=100)
    for i in range(1_000):
        recent.remember(("r1", "u1", f"c{i}"), "token", f"t{i}")
    assert len(recent) == 100
    assert recent.recall(("r1", "u1", "c0")) is None  # past the cap: gone
    assert recent.recall(("r1", "u1", "c999")) == ("token", "t999")
    clock.advance(599.0)
    recent.remember(("r1", "u1", "late"), "token", "late")
    assert len(recent) == 100  # nothing expired yet: the cap held it
    clock.advance(2.0)  # the first 99 expire; "late" does not
    recent.remember(("r1", "u1", "later"), "token", "later")
    assert len(recent) == 2
    assert recent.recall(("r1", "u1", "late")) == ("token", "late")
    assert recent.recall(("r1", "u1", "c999")) is None


def test_a_remembered_token_remembered_again_moves_to_the_end() -> None:
    clock = FakeClock()
    recent = RecentTokens(10.0, clock.monotonic, max_items=3)
    for key in ("a", "b", "c"):
        recent.remember(("r", "u", key), "token", key)
    recent.remember(("r", "u", "a"), "token", "a2")  # a is the newest now
    recent.remember(("r", "u", "d"), "token", "d")  # the cap drops b, the oldest
    assert recent.recall(("r", "u", "b")) is None
    assert recent.recall(("r", "u", "a")) == ("token", "a2")
    assert len(recent) == 3


# --- the dedup window: count and age ----------------------------------------


def test_the_dedup_window_is_bounded_by_count_and_age() -> None:
    """Issue 19: a busy room kept 100,000 ids (~43 MB); the window is now
    the last `dedup_window_versions` versions and `dedup_window_seconds`.
    Inside it a retry gets its first ack (docs/protocol.md, "Retries"), dup: true."""
    clock = FakeClock()
    core, gm = new_core(clock=clock, limits=Limits(dedup_window_versions=50))
    first = core.evaluate(command(gm, "advance_clock", cmd_id="first", seconds=6))
    core.commit()
    for _ in range(48):
        core.evaluate(command(gm, "advance_clock", seconds=6))
        core.commit()
    again = core.evaluate(command(gm, "advance_clock", cmd_id="first", seconds=6))
    assert again.outcome == "dup" and again.reply["v"] == first.reply["v"] == 1
    core.evaluate(command(gm, "advance_clock", seconds=6))
    core.commit()
    assert len(core.dedup) == 50 and ("u1", "first") in core.dedup
    core.evaluate(command(gm, "advance_clock", seconds=6))
    core.commit()
    assert len(core.dedup) == 50 and ("u1", "first") not in core.dedup  # by count
    clock.advance(DEDUP_WINDOW_SECONDS - 1)
    recent = core.evaluate(command(gm, "advance_clock", cmd_id="recent", seconds=6))
    core.commit()
    clock.advance(2.0)  # all but `recent` are older than the window now
    core.evaluate(command(gm, "advance_clock", seconds=6))
    core.commit()
    assert [k[1] for k in core.dedup][:1] == ["recent"] and len(core.dedup) == 2  # by age
    assert core.evaluate(command(gm, "advance_clock", cmd_id="recent")).reply == {
        **recent.reply,
        "dup": True,
    }


async def test_a_room_loads_only_its_dedup_window(tmp_path) -> None:
    """After a restart the window is what the load query read: the last
    `dedup_window_versions` ids, whose retries still get their first ack."""
    data = tmp_path / "data"
    async with running_server(data, dedup_window_versions=20) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        acks = [await gm.ok("advance_clock", {"seconds": 6}, id=f"clock-{i}") for i in range(40)]
        await gm.close()
    async with running_server(data, dedup_window_versions=20) as srv:
        t.url = srv.url
        gm = await t.connect("gm")
        host = await srv.rooms.get(t.room)
        assert len(host.core.dedup) == 20
        retry = await gm.cmd("advance_clock", {"seconds": 6}, id="clock-39")
        assert retry == {**acks[-1], "dup": True}
        await gm.close()


async def test_a_retry_older_than_the_window_spoils_no_other_command_of_its_batch(
    tmp_path,
) -> None:
    """Issue 19: a retry whose id the window no longer holds was refused by
    the log's unique index, and the whole batch it arrived in answered
    `internal`: a GM reusing old ids on purpose failed a player's commands.
    Now the retry gets its first ack (dup: true) and the rest are stored."""
    async with running_server(tmp_path, dedup_window_versions=3, rate=None) as srv:
        t = await create_table(srv.url)
        gm, p1 = await t.connect("gm"), await t.connect("p1")
        first = await gm.ok("advance_clock", {"seconds": 6}, id="old")
        for _ in range(4):
            await gm.ok("advance_clock", {"seconds": 6})
        host = await srv.rooms.get(t.room)
        assert ("u1", "old") not in host.core.dedup and t.users["gm"] == "u1"

        real_commit, gate, batches = srv.storage.commit, asyncio.Event(), []

        async def gated_commit(room, records, snapshot, expected):
            batches.append([r.cmd_id for r in records])
            if len(batches) == 1:
                await gate.wait()  # the next commands queue up behind this batch
            await real_commit(room, records, snapshot, expected)

        srv.storage.commit = gated_commit
        try:
            blocker = await gm.submit("advance_clock", {"seconds": 6})
            while not batches:
                await asyncio.sleep(0.01)
            mine = await p1.submit("rest", {"char": t.chars["c_p1"], "kind": "night"}, id="mine")
            retry = await gm.submit("advance_clock", {"seconds": 6}, id="old")
            after = await gm.submit("advance_clock", {"seconds": 6}, id="after")
            while len(host._items) < 3:
                await asyncio.sleep(0.01)
            gate.set()
            replies = await asyncio.wait_for(asyncio.gather(blocker, mine, retry, after), 10)
        finally:
            srv.storage.commit = real_commit
        assert ["mine", "old", "after"] in batches  # one batch, the old id in it
        assert [r["t"] for r in replies] == ["ack"] * 4, replies
        assert replies[2] == {**first, "dup": True}
        rows = await stored_patches(srv.storage, t.room, 0, host.v)
        assert [r.cmd_id for r in rows].count("old") == 1 and "mine" in [r.cmd_id for r in rows]
        await gm.close()
        await p1.close()


async def test_a_batch_stored_though_its_commit_failed_is_not_answered_as_duplicates(
    tmp_path,
) -> None:
    """The lookup of old ids after a refused commit answers only ids stored
    before the batch: a commit that landed but whose reply was lost (its ids
    stored past the head) stays `internal`, never a `dup` of itself."""
    async with running_server(tmp_path, rate=None) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        real_commit = srv.storage.commit

        async def lost_reply(room, records, snapshot, expected):
            await real_commit(room, records, snapshot, expected)
            raise StorageError("the connection dropped after the commit")

        srv.storage.commit = lost_reply
        try:
            reply = await gm.cmd("advance_clock", {"seconds": 6}, id="landed")
        finally:
            srv.storage.commit = real_commit
        assert reply["t"] == "error" and reply["code"] == "internal", reply
        await gm.close()


# --- the outbox budget: per room, server-wide ----------------------------------


@pytest.mark.parametrize("scope", ["server", "room"])
async def test_clients_that_read_nothing_hold_at_most_the_budget(tmp_path, scope) -> None:
    """Issue 19: 240 sockets that read nothing, each under its own bound,
    took RSS to 2 GiB. What all of them hold is bounded per room and
    server-wide: past it, the slowest readers are dropped first (their
    buffers freed at once) and everyone else is still served."""
    per_client, budget = 512 * 1024, 384 * 1024
    bounds = (
        {"outbox_total_max_bytes": budget}
        if scope == "server"
        else {"outbox_room_max_bytes": budget}
    )
    async with running_server(tmp_path, outbox_max_bytes=per_client, rate=None, **bounds) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        long_name = "n" * validate.MAX_NAME
        for i in range(60):  # a state of ~60 KiB: each snapshot is big
            await gm.ok(
                "add_character", {**SHEET, "name": f"{i:02d}{long_name}"[:100], "shown": "full"}
            )
        stalled = [await stalled_client(srv, t.tokens["p1"]) for _ in range(6)]
        for ws in stalled:  # each asks for more than the budget, under its own bound
            for _ in range(150):
                await ws.send(msgpack.packb({"t": "sync", "since": 10**9}))
        async with asyncio.timeout(WAIT):
            while srv.outbox_budget.dropped < 1:
                await gm.ok("update_room", {"name": "still served"})
        held = sum(s.outbox.buffered for s in srv.sessions if s.outbox is not None)
        assert held <= budget
        assert srv.outbox_budget.total <= budget
        assert (await gm.ok("update_room", {"name": "served"}))["t"] == "ack"
        for ws in stalled:
            ws.transport.abort()
        await gm.close()


async def stalled_client(srv, token: str):
    """A session that completed its hello, then reads nothing (a small
    receive buffer, reading paused)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", srv.port))
    ws = await ws_connect(srv.url, sock=sock, subprotocols=[MSGPACK], max_size=None)
    await ws.send(msgpack.packb({"t": "hello", "proto": 1, "token": token, "room": "r1"}))
    await ws.recv()  # the welcome
    ws.transport.pause_reading()
    return ws


# --- admin export and import: off the event loop ------------------------------


@pytest.mark.http_door  # the HTTP API / the admin's HTTP export
async def test_admin_export_and_import_run_off_the_event_loop(tmp_path, monkeypatch) -> None:
    """Issue 19: a 60k-version room file stalled every room ~1 s each way.
    Encoding the export and parsing and checking an import run on a worker
    thread (in slices for the encoder), never on the loop's thread; the
    file is byte for byte what `transfer.dumps` writes."""
    threads: dict[str, set[int]] = {"to_document": set(), "from_document": set()}
    real_to, real_from = transfer.to_document, transfer.from_document

    def to_document(*a, **kw):
        threads["to_document"].add(threading.get_ident())
        return real_to(*a, **kw)

    def from_document(*a, **kw):
        threads["from_document"].add(threading.get_ident())
        return real_from(*a, **kw)

    monkeypatch.setattr(transfer, "to_document", to_document)
    monkeypatch.setattr(transfer, "from_document", from_document)
    loop_thread = threading.get_ident()  # the server runs on this loop
    async with running_server(tmp_path / "a") as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        for _ in range(30):
            await gm.ok("advance_clock", {"seconds": 6})
        await gm.close()
        request = urllib.request.Request(
            srv.http_url + "/admin/export?room=r1",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        body = await asyncio.to_thread(lambda: urllib.request.urlopen(request).read())
        exported_on = set(threads["to_document"])
        dump = await srv.storage.export_room("r1")
        assert dump is not None
        doc = json.loads(body)
        sliced = export_text(dump, False, chunk=7)
        stamped = json.loads(sliced)["exported_at"]  # its own: the clock may have moved on
        assert sliced == transfer.dumps({**real_to(dump, False), "exported_at": stamped}).encode()
    async with running_server(tmp_path / "b") as srv:
        admin = await connect_admin(srv.url)
        text = body.decode()
        parts = [text[i : i + 30_000] for i in range(0, len(text), 30_000)]
        base = {"room": "r1", "upload": "u", "parts": len(parts)}
        for i, part in enumerate(parts):
            reply = await admin.cmd("import_room", {**base, "part": i, "data": part})
        assert reply["t"] == "ack" and reply["result"]["v"] == doc["head"]
        await admin.close()
    assert exported_on and loop_thread not in exported_on
    assert threads["from_document"] and loop_thread not in threads["from_document"]


# --- view classes: bounded work per patch --------------------------------------


async def test_a_patch_is_rendered_for_at_most_the_cap_of_views(tmp_path, monkeypatch) -> None:
    """Issue 19: players each owning a `status` character have a view each.
    A patch that concerns all of them is rendered and encoded for at most
    `max_view_classes_per_patch` views while it is published; the others
    get a snapshot of their view soon after (coalesced: one, whatever the
    patches meanwhile), and every mirror equals its view."""
    async with running_server(tmp_path, max_view_classes_per_patch=2, rate=None) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        players = [(c, char) for c, char, _ in await status_patients(gm, srv.url, t.room, 5)]
        obs = await t.connect("obs")
        encoded: list[str] = []
        real = Codec.encode

        def counting(self: Codec, frame: dict[str, Any]) -> bytes | str:
            encoded.append(frame.get("t"))
            return real(self, frame)

        monkeypatch.setattr(Codec, "encode", counting)
        ack = await gm.ok("advance_clock", {"seconds": 3600})  # every rest ends
        last = (await gm.ok("update_room", {"name": "after"}))["v"]
        for c in (obs, *(c for c, _ in players)):
            await c.wait_v(last)
            assert c.state == c.seen(gm.state), c.user
        # the GM's plain patch, and two views; three players got a snapshot
        assert encoded.count("patch") <= 1 + 2 + 2  # + the update_room (GM, public)
        snapshots = [c for c, _ in players if any(f["t"] == "snapshot" for f in c.frames)]
        assert len(snapshots) == 3
        assert all(f["v"] >= ack["v"] for c in snapshots for f in c.frames if f["t"] == "snapshot")
        for c in (gm, obs, *(c for c, _ in players)):
            await c.close()


async def test_a_version_stores_at_most_the_cap_of_players_views(tmp_path) -> None:
    """Issue 19: a century advance concerning 98 players rendered and stored
    98 views of it (and worked out 99 classes of affordances) before it was
    even sent, 330 ms per advance and undo. Now a version renders at most
    `max_stored_views_per_version` players' own views; the others are
    listed as needing a snapshot: they get one instead of the patch (even
    with room under the live cap), a resume across the version gets one,
    their affordances are worked out then, and every mirror, affordances
    included, equals its view, also after later commands."""
    async with running_server(
        tmp_path, max_stored_views_per_version=2, max_view_classes_per_patch=10, rate=None
    ) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        players = await status_patients(gm, srv.url, t.room, 5)
        obs = await t.connect("obs")
        before = gm.v
        ack = await gm.ok("advance_clock", {"seconds": 3600})  # every rest ends
        (row,) = await stored_patches(srv.storage, t.room, ack["v"] - 1, ack["v"])
        assert row.views is not None and len(row.views["resync"]) == 3
        assert len(row.views["players"]) <= 2
        for c, char, _ in players:  # later commands: diffs of the affordances known again
            await c.ok("rest", {"char": char, "kind": "short"})
        last = (await gm.ok("update_room", {"name": "after"}))["v"]
        for c in (obs, *(c for c, _, _ in players)):
            await c.wait_v(last)
            assert c.state == c.seen(gm.state), c.user
        resynced = {c.user for c, _, _ in players if any(f["t"] == "snapshot" for f in c.frames)}
        assert resynced == set(row.views["resync"])
        for c, _, token in players:  # a resume across the version: a snapshot for those
            ws = await open_ws(srv.url)
            hello = {"t": "hello", "proto": 1, "token": token, "room": t.room, "since": before}
            await ws.send(msgpack.packb(hello))
            welcome = msgpack.unpackb(await ws.recv())
            assert ("state" in welcome) == (c.user in resynced), welcome
            assert ("patches" in welcome) == (c.user not in resynced), welcome
            if "state" in welcome:
                assert welcome["state"] == c.seen(gm.state)
            await ws.close()
        for c in (gm, obs, *(c for c, _, _ in players)):
            await c.close()


@pytest.mark.parametrize("chars", [2, 3])
async def test_a_big_rooms_batches_are_evaluated_off_the_event_loop(
    tmp_path, monkeypatch, chars
) -> None:
    """Issue 19: one command of a big room (a century advance over 98
    patients, ~40 ms) was one slice of the event loop every other room
    waited behind. A room of `off_loop_min_characters` characters or more
    has its batches evaluated in a thread (its own queue waits; nothing
    else of it changes: answers and mirrors as before); a smaller one
    stays on the loop, where a command costs less than the hop."""
    threads = spy_evaluations(monkeypatch)
    # Every batch of a big room counts as heavy here (test_share.py: which are).
    limits = {"off_loop_min_characters": 3, "off_loop_min_seconds": 0.0}
    async with running_server(tmp_path, **limits, rate=None) as srv:
        t = await create_table(srv.url)  # three characters
        gm, obs = await t.connect("gm"), await t.connect("obs")
        if chars == 2:
            await gm.ok("remove_character", {"char": t.chars["c_npc"]})
        threads.clear()
        acks = await asyncio.gather(
            *[await gm.submit("advance_clock", {"seconds": 6}) for _ in range(5)]
        )
        assert all(a["t"] == "ack" for a in acks)
        undo = await gm.ok("undo")
        await obs.wait_v(undo["v"])
        assert obs.state == obs.seen(gm.state)
        main = threading.main_thread().name
        if chars >= 3:
            assert threads and main not in threads
        else:
            assert set(threads) == {main}
        await gm.close()
        await obs.close()
