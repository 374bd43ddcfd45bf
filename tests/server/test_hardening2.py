"""Hardening II: bounded work per command, bounded memory per client,
per-user rate limits that weigh what a request costs, one server per data
directory, authentication limits. Each test fails on the code before it."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sqlite3
import subprocess
import sys

import msgpack
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from rules import validate
from sync_server import Server
from sync_server.core.auth import WeakAdminToken
from sync_server.core.ratelimit import RateSpec
from sync_server.storage import StorageError
from sync_server.storage.sqlite import DB_FILE, JOURNAL_SIZE_LIMIT, SqliteStorage
from sync_server.wire.protocol import MSGPACK
from tests.helpers.server import (
    ADMIN_TOKEN,
    REPO,
    SHEET,
    WAIT,
    Closed,
    both_transports,
    create_table,
    hello_refused,
    open_ws,
    running_server,
    start_subprocess_server,
    test_config,
)

# --- 1. bounded work per command ------------------------------------------


async def test_the_freezing_command_is_refused_or_cheap(tmp_path) -> None:
    """The reported freeze: round_seconds 1, a dying character with a
    million PP, a clock jump of a million seconds. The sheet's maximum is
    now bounded, and a dying character with the most PP allowed costs one
    step and one event however long the jump."""
    async with running_server(tmp_path) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        await gm.ok("update_room", {"round_seconds": 1})
        big = await gm.cmd("add_character", {**SHEET, "name": "Titan", "pp_max": 1_000_000})
        assert big["code"] == "invalid_args" and str(validate.MAX_PP) in big["message"]
        cid = (await gm.ok("add_character", {**SHEET, "name": "Titan", "pp_max": validate.MAX_PP}))[
            "result"
        ]["char"]
        await gm.ok("damage", {"char": cid, "amount": 10_000})
        ack = await gm.ok("advance_clock", {"seconds": 1_000_010})
        patch = gm.patches[-1]
        assert patch["v"] == ack["v"] and len(patch["events"]) <= 4
        pp = [e for e in patch["events"] if e["kind"] == "pp"]
        assert pp == [
            {
                "kind": "pp",
                "char": cid,
                "delta": -validate.MAX_PP,
                "cause": "dying",
                "rounds": validate.MAX_PP,
                "at": pp[0]["at"],
            }
        ]
        assert gm.state["characters"][cid]["condition"] == "dead"
        await gm.close()


@both_transports
async def test_a_patch_over_the_bound_is_refused_and_changes_nothing(tmp_path) -> None:
    async with running_server(tmp_path, max_patch_bytes=4096) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        for i in range(10):
            cid = (await gm.ok("add_character", {**SHEET, "name": f"S{i}"}))["result"]["char"]
            await gm.ok("damage", {"char": cid, "amount": 35})
            await gm.ok("heal", {"char": cid, "amount": 0, "stabilize": True})
        await gm.ok("queue_rolls", {"rolls": [10] * 80})  # every hourly check: "stay"
        before_v, before = gm.v, gm.state
        reply = await gm.cmd("advance_clock", {"seconds": 8 * 3600})  # 160 rolls at once
        assert reply["code"] == "rule" and "4096" in reply["message"], reply
        fresh = await t.connect("obs")
        assert (fresh.v, fresh.state) == (before_v, fresh.seen(before))
        assert (await gm.ok("advance_clock", {"seconds": 3600}))["v"] == before_v + 1
        await fresh.close()
        await gm.close()


# --- 2. bounded memory per client --------------------------------------------


@both_transports
async def test_clients_that_stopped_reading_cost_at_most_their_bound(tmp_path) -> None:
    """Sessions that completed hello and stopped reading: every byte written
    for them counts (big replies included); past the bound they are closed
    with 1013 and the server holds nothing more for them, while the others
    are served."""
    bound = 128 * 1024
    async with running_server(tmp_path, outbox_max_bytes=bound, rate=None) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        long_name = "n" * validate.MAX_NAME
        for i in range(60):  # a state of ~60 KiB: each snapshot is big
            await gm.ok(
                "add_character", {**SHEET, "name": f"{i:02d}{long_name}"[:100], "shown": "full"}
            )
        stalled = []
        for _ in range(6):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", srv.port))
            ws = await ws_connect(srv.url, sock=sock, subprotocols=[MSGPACK], max_size=None)
            await ws.send(
                msgpack.packb({"t": "hello", "proto": 1, "token": t.tokens["p1"], "room": "r1"})
            )
            await ws.recv()  # the welcome; then this client reads nothing more
            ws.transport.pause_reading()
            stalled.append(ws)
        for ws in stalled:  # each asks for far more than its bound (and the kernel's buffers)
            for _ in range(150):
                await ws.send(msgpack.packb({"t": "sync", "since": 10**9}))
        async with asyncio.timeout(WAIT):
            while srv.metrics.slow_closes._value.get() < len(stalled):
                await gm.ok("update_room", {"name": "still served"})
        for session in srv.sessions:
            if session.outbox is not None:
                assert session.outbox.buffered <= bound
        for ws in stalled:
            ws.transport.abort()
        await gm.close()


# --- 3. rate limits per user, weighted ---------------------------------------


async def test_a_users_sessions_share_one_allowance(tmp_path) -> None:
    async with running_server(tmp_path, rate=RateSpec(5, 20)) as srv:
        t = await create_table(srv.url)
        sessions = [await t.connect("p1") for _ in range(8)]
        replies = await asyncio.gather(
            *[
                await s.submit("stop_rest", {"char": t.chars["c_p1"]})
                for s in sessions
                for _ in range(10)
            ]
        )
        accepted = [r for r in replies if r.get("code") != "rate_limited"]
        # 8 sessions x 10 requests: one user's burst of 20 (less the 8
        # hellos), not 8 bursts.
        assert len(accepted) <= 20
        p2 = await t.connect("p2")  # another user has an allowance of its own
        assert (await p2.cmd("stop_rest", {"char": t.chars["c_p2"]}))["code"] == "rule"
        for s in [*sessions, p2]:
            await s.close()


async def test_hellos_and_syncs_count_against_the_user(tmp_path) -> None:
    async with running_server(tmp_path, rate=RateSpec(2, 10)) as srv:
        t = await create_table(srv.url)
        first = await t.connect("obs")
        held_v, held = first.v, first.state
        await first.close()
        outcome = None
        for _ in range(20):  # a reconnect loop with `since`
            try:
                c = await t.connect("obs", since=held_v, base=held)
            except Closed as refused:
                outcome = str(refused)
                break
            await c.close()
        assert outcome is not None and "rate_limited" in outcome
        c = None
        async with asyncio.timeout(WAIT):  # the allowance refills
            while c is None:
                try:
                    c = await t.connect("obs")
                except Closed:
                    await asyncio.sleep(0.2)
        limited = 0
        for _ in range(12):
            await c.send({"t": "sync", "since": 0})
        async with asyncio.timeout(WAIT):
            while limited + c.sync_replies.qsize() < 12:
                frame = await c.loose_errors.get()
                limited += frame["code"] == "rate_limited"
        assert limited >= 1
        await c.close()


# --- 4. one server per data directory ----------------------------------------


async def test_a_second_server_on_the_same_data_directory_is_refused(tmp_path) -> None:
    data = tmp_path / "data"
    async with running_server(data):
        second = Server(test_config(data))
        with pytest.raises(StorageError) as refused:
            await second.start()
        message = str(refused.value)
        assert str(data) in message and f"pid {os.getpid()}" in message
        child = subprocess.run(
            [sys.executable, "-m", "sync_server", "serve", "--port", "0", "--data-dir", str(data)],
            cwd=REPO,
            env={**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN},
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
        assert child.returncode == 2 and f"pid {os.getpid()}" in child.stderr
    async with running_server(data):  # released at close
        pass


async def test_a_killed_server_leaves_no_stale_lock(tmp_path) -> None:
    data = tmp_path / "data"
    child = start_subprocess_server(data)
    child.kill()
    async with running_server(data) as srv:
        assert srv.health()["status"] == "ok"


# --- 5. authentication ----------------------------------------------------------


async def test_failed_hellos_are_logged_and_limited_per_address(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="sync_server")
    guess = "guess-" + "g" * 30
    async with running_server(
        tmp_path, hello_failure_rate=RateSpec(2, 5), hello_penalty_seconds=0.05
    ) as srv:
        await create_table(srv.url)
        codes = []
        for _ in range(8):
            frame, code = await hello_refused(
                srv.url, {"t": "hello", "proto": 1, "token": guess, "room": "r1"}
            )
            codes.append((frame["code"] if frame else None, code))
        assert codes[:5] == [("unauthenticated", 4401)] * 5
        assert ("rate_limited", 1008) in codes[5:]
    lines = [r.getMessage() for r in caplog.records if "hello refused" in r.getMessage()]
    assert any("127.0.0.1" in line and "bad token or room" in line for line in lines)
    assert all(guess not in r.getMessage() for r in caplog.records)


async def test_an_over_long_token_gets_a_clear_error(vtt_server) -> None:
    frame, code = await hello_refused(
        vtt_server.url, {"t": "hello", "proto": 1, "token": "t" * 5000, "room": "r1"}
    )
    assert code == 4401 and "at most 256" in frame["message"]


async def test_a_short_admin_token_is_refused_at_start(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VTT_SYNC_ADMIN_TOKEN", "short-secret")
    srv = Server(test_config(tmp_path, admin_token=None))
    with pytest.raises(WeakAdminToken, match="at least 32"):
        await srv.start()
    child = subprocess.run(
        [sys.executable, "-m", "sync_server", "serve", "--port", "0", "--data-dir", str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "VTT_SYNC_ADMIN_TOKEN": "short-secret"},
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert child.returncode == 2 and "at least 32" in child.stderr
    assert "short-secret" not in child.stderr


@both_transports
async def test_websocket_upgrades_check_the_origin(tmp_path) -> None:
    async with running_server(tmp_path, allowed_origins={"https://foundry.example"}) as srv:
        t = await create_table(srv.url)
        with pytest.raises(InvalidStatus) as refused:
            await open_ws(srv.url, origin="https://evil.example")
        assert refused.value.response.status_code == 403
        for origin in (None, f"http://127.0.0.1:{srv.port}", "https://foundry.example"):
            ws = await open_ws(srv.url, origin=origin)
            await ws.send(
                msgpack.packb({"t": "hello", "proto": 1, "token": t.tokens["obs"], "room": "r1"})
            )
            assert msgpack.unpackb(await ws.recv())["t"] == "welcome"
            await ws.close()


# --- 6. start-up and storage --------------------------------------------------------


async def test_an_empty_database_file_is_refused(tmp_path) -> None:
    (tmp_path / DB_FILE).write_bytes(b"")
    with pytest.raises(StorageError, match="the database file is empty"):
        await SqliteStorage(tmp_path).open()
    child = subprocess.run(
        [sys.executable, "-m", "sync_server", "serve", "--port", "0", "--data-dir", str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN},
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert child.returncode == 2 and "the database file is empty" in child.stderr


async def test_the_wal_shrinks_after_a_large_transaction(tmp_path) -> None:
    store = SqliteStorage(tmp_path)
    await store.open()
    try:
        assert store._conn is not None
        limit = store._conn.execute("PRAGMA journal_size_limit").fetchone()[0]
        assert limit == JOURNAL_SIZE_LIMIT
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / DB_FILE) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@both_transports
async def test_the_server_header_names_no_versions(vtt_server) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", vtt_server.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)).decode()
    writer.close()
    server = [line for line in head.split("\r\n") if line.lower().startswith("server:")]
    assert server == ["Server: vtt-sync"]


async def test_closed_sessions_answer_no_more(vtt_table) -> None:
    """A connection refused for too many requests gets one clear error."""
    ws = await open_ws(vtt_table.url)
    await ws.send(
        msgpack.packb({"t": "hello", "proto": 1, "token": vtt_table.tokens["gm"], "room": "r1"})
    )
    welcome = msgpack.unpackb(await ws.recv())
    assert welcome["t"] == "welcome"
    await ws.close()
    with pytest.raises(ConnectionClosed):
        await ws.recv()
