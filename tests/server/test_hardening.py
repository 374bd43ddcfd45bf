"""Hardening (issue 5), the parts not covered by test_session, test_limits,
test_roles and test_persistence: connection limits at their defaults,
admin-session slots under concurrent hellos, tokens in no frame to anyone
but their creator, tokens stored only as hashes (WAL included), no token in
a DEBUG log of a whole server run, kill -9 during concurrent load on
several rooms, and a data directory that fills up."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import logging
import os
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import msgpack
import pytest

from sync_server import Server
from sync_server.core.limits import MAX_ADMIN_CONNECTIONS, MAX_CONNECTIONS_PER_USER
from sync_server.storage.sqlite import DB_FILE
from sync_server.testing.server import without_affordances
from tests.helpers.server import (
    ADMIN_TOKEN,
    REPO,
    SHEET,
    WAIT,
    Client,
    Table,
    connect,
    connect_admin,
    create_table,
    hello_refused,
    open_ws,
    running_server,
    start_subprocess_server,
)

# --- connection limits ----------------------------------------------------


async def test_a_gm_with_five_screens_works_and_the_user_limit_holds_at_its_default(
    vtt_table: Table,
) -> None:
    screens = [await vtt_table.connect("gm", ("msgpack", "json")[i % 2]) for i in range(5)]
    p1 = await vtt_table.connect("p1")
    # every screen can command, and every screen sees every patch
    acks = [await s.ok("damage", {"char": vtt_table.chars["c_npc"], "amount": 1}) for s in screens]
    last = acks[-1]["v"]
    for c in (*screens, p1):
        await c.wait_v(last)
        assert c.state == c.seen(screens[0].state)
    # up to the default limit (a constant of limits.py), then 4429
    more = [await vtt_table.connect("gm") for _ in range(MAX_CONNECTIONS_PER_USER - len(screens))]
    hello = {"t": "hello", "proto": 1, "token": vtt_table.tokens["gm"], "room": "r1"}
    frame, code = await hello_refused(vtt_table.url, hello)
    assert frame is not None and (frame["code"], code) == ("rate_limited", 4429)
    assert frame["message"]
    # the refusal is per user: other users still get in, and the GM's
    # screens are unaffected
    p2 = await vtt_table.connect("p2")
    ack = await screens[0].ok("advance_clock", {"seconds": 6})
    await p2.wait_v(ack["v"])
    for c in (*screens, *more, p1, p2):
        await c.close()


async def test_admin_session_slots_hold_under_concurrent_hellos(vtt_server: Server) -> None:
    extra = 6

    async def hello() -> tuple[Any, dict[str, Any]]:
        ws = await open_ws(vtt_server.url)
        await ws.send(msgpack.packb({"t": "hello", "proto": 1, "token": ADMIN_TOKEN}))
        async with asyncio.timeout(WAIT):
            return ws, msgpack.unpackb(await ws.recv())

    opened = await asyncio.gather(*(hello() for _ in range(MAX_ADMIN_CONNECTIONS + extra)))
    welcomed = [ws for ws, f in opened if f["t"] == "welcome"]
    refused = [(ws, f) for ws, f in opened if f["t"] != "welcome"]
    assert len(welcomed) == MAX_ADMIN_CONNECTIONS
    assert len(refused) == extra
    for ws, f in refused:
        assert f["code"] == "rate_limited"
        async with asyncio.timeout(WAIT):
            await ws.wait_closed()
        assert ws.close_code == 4429
    assert vtt_server.admin_sessions == MAX_ADMIN_CONNECTIONS
    # a slot frees when a session ends
    await welcomed[0].close()
    async with asyncio.timeout(WAIT):
        while vtt_server.admin_sessions >= MAX_ADMIN_CONNECTIONS:
            await asyncio.sleep(0.01)
    again = await connect_admin(vtt_server.url)
    await again.close()
    for ws in welcomed[1:]:
        await ws.close()


# --- tokens ---------------------------------------------------------------


def _frames_text(c: Client) -> str:
    """Everything a client received, welcome included, as one string."""
    return json.dumps([c.welcome, *c.frames], ensure_ascii=False)


async def test_tokens_reach_no_one_but_the_gm_who_created_them(vtt_server: Server) -> None:
    t = await create_table(vtt_server.url)
    gm = await t.connect("gm", "json")
    # everyone else in the room, over both subprotocols; a second GM screen
    # of the same user too, and a second GM user
    second = (await gm.ok("add_user", {"name": "Co-GM", "role": "gm"}))["result"]
    others = [
        await t.connect("gm", "msgpack"),
        await connect(vtt_server.url, second["token"], t.room, "msgpack"),
        await t.connect("p1", "json"),
        await t.connect("p2", "msgpack"),
        await t.connect("obs", "json"),
    ]
    base_v, base = others[-1].v, copy.deepcopy(others[-1].state)
    added = await gm.ok("add_user", {"name": "Eve", "role": "player"}, id="add-eve")
    rotated = await gm.ok("rotate_token", {"user": t.users["p2"]}, id="rot-p2")
    again = await gm.cmd("add_user", {"name": "Eve", "role": "player"}, id="add-eve")
    assert again["dup"] and again["result"]["token"] == added["result"]["token"]
    secrets_ = [added["result"]["token"], rotated["result"]["token"]]
    # the creator got them in its acks, and only there
    assert [f["result"]["token"] for f in gm.frames if f.get("t") == "ack"][-3:] == [
        secrets_[0],
        secrets_[1],
        secrets_[0],
    ]
    for c in (gm, *others):
        if c.ws.close_code is None:
            await c.wait_v(rotated["v"])
    # later readers: a resume with since, a sync, a fresh welcome
    late = await t.connect("obs", since=base_v, base=base)
    await late.sync(base_v)
    await late.sync(10**9)  # a snapshot
    fresh = await t.connect("p1")
    patches = [f for f in gm.frames if f.get("t") == "patch"]
    assert patches and all(s not in json.dumps(patches) for s in secrets_)
    for c in (*others, late, fresh):
        text = _frames_text(c)
        assert c.frames or c is fresh, "the client received nothing"
        for s in [*secrets_, second["token"]]:
            assert s not in text
    # the GM's own token never came back to the second GM either
    assert t.tokens["gm"] not in _frames_text(others[1])
    for c in (gm, *others, late, fresh):
        await c.close()


def _db_bytes(data: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data.iterdir()) if p.name.startswith(DB_FILE))


async def test_tokens_are_stored_only_as_sha256_hashes_wal_included(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with running_server(data) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        rotated = (await gm.ok("rotate_token", {"user": t.users["p1"]}))["result"]["token"]
        tokens = [*t.tokens.values(), rotated, ADMIN_TOKEN]
        await gm.close()
        running = _db_bytes(data)  # the live files, WAL and shm included
        assert (data / (DB_FILE + "-wal")).exists()
    closed = _db_bytes(data)
    for blob in (running, closed):
        for token in tokens:
            assert token.encode() not in blob
            # nor a long piece of it
            assert token.encode()[:16] not in blob
    with sqlite3.connect(data / DB_FILE) as db:
        rows = dict(db.execute("SELECT user, token_hash FROM users WHERE room = 'r1'"))
    assert rows[t.users["p1"]] == hashlib.sha256(rotated.encode()).digest()
    assert rows[t.users["gm"]] == hashlib.sha256(t.tokens["gm"].encode()).digest()
    assert all(isinstance(h, bytes) and len(h) == 32 for h in rows.values())


def _scan_for_tokens(text: str, tokens: list[str]) -> list[str]:
    return [tok for tok in tokens if tok[:12] in text]


@pytest.mark.parametrize("fmt", ["text", "json"])
async def test_no_token_in_a_debug_log_of_a_whole_server_run(tmp_path: Path, fmt: str) -> None:
    """A child server at --log-level DEBUG, through a whole session: admin
    create_room and delete_room, add_user, rotate_token, remove_user,
    refused hellos, retries. Its whole output holds no token, and nothing
    had to be redacted (the code itself logs none; the filter is a backstop).
    In JSON, every line it wrote, on stdout and stderr, is one JSON object."""
    data = tmp_path / "data"
    child = start_subprocess_server(data, "--log-level", "DEBUG", "--log-format", fmt)
    tokens: list[str] = [ADMIN_TOKEN]
    try:
        t = await create_table(child.url)
        tokens += t.tokens.values()
        gm = await t.connect("gm", "json")
        eve = (await gm.ok("add_user", {"name": "Eve", "role": "player"}, id="e"))["result"]
        tokens.append(eve["token"])
        tokens.append(
            (await gm.cmd("add_user", {"name": "Eve", "role": "player"}, id="e"))["result"]["token"]
        )
        tokens.append((await gm.ok("rotate_token", {"user": t.users["p2"]}))["result"]["token"])
        await gm.ok("remove_user", {"user": eve["user"]})
        for bad in ("wrong-" + t.tokens["gm"], t.tokens["p2"], eve["token"]):
            await hello_refused(child.url, {"t": "hello", "proto": 1, "token": bad, "room": "r1"})
        admin = await connect_admin(child.url)
        other = (await admin.ok("create_room", {"room": "r2", "name": "Other"}))["result"]
        tokens.append(other["gm_token"])
        await admin.ok("delete_room", {"room": "r2"})
        await admin.close()
        await gm.close()
        health = child.url.replace("ws", "http") + "/healthz"

        def fetch() -> bytes:
            with urllib.request.urlopen(health, timeout=10) as r:
                return r.read()

        await asyncio.to_thread(fetch)
        assert child.terminate() == 0
    finally:
        if child.proc.poll() is None:
            child.kill()
    assert child.proc.stdout is not None
    output = "".join(child.output) + child.proc.stdout.read()
    assert "DEBUG" in output or '"level": "debug"' in output  # the level took effect
    assert _scan_for_tokens(output, tokens) == []
    assert "[redacted]" not in output
    if fmt == "json":
        lines = [json.loads(line) for line in output.splitlines()]  # each line parses
        events = [line.get("event") for line in lines]
        assert events[0] == "configuration" and "listening" in events
        assert lines[0]["settings"]["admin_token"] == "********"
        opened = [x for x in lines if x.get("event") == "session_opened"]
        closed = [x for x in lines if x.get("event") == "session_closed"]
        assert {(x["room"], x["role"]) for x in opened} >= {("r1", "gm"), (None, "admin")}
        assert len(closed) == len(opened)
        gm_closed = next(x for x in closed if x["role"] == "gm")
        assert gm_closed["closed_by"] == "client" and gm_closed["code"] == 1000
        assert gm_closed["peer"] == "127.0.0.1" and gm_closed["seconds"] >= 0
        summary = [x for x in lines if x.get("event") == "commands" and x["room"] == "r1"]
        assert summary and sum(x["total"] for x in summary) >= 7  # summed at shutdown at least
        assert summary[-1]["counts"]["rotate_token"] == {"ok": 1}
        assert any(x["level"] == "info" and "hello refused" in x["msg"] for x in lines)
        http = [x for x in lines if x.get("event") == "http"]
        assert any(x["path"] == "/healthz" and x["status"] == 200 for x in http)
        # websockets' per-request lines are DEBUG now, never INFO
        assert not [x for x in lines if x["level"] == "info" and x["logger"] == "sync_server.http"]


# --- crashes --------------------------------------------------------------


async def test_kill_9_during_concurrent_load_on_several_rooms(tmp_path: Path) -> None:
    data = tmp_path / "data"
    child = start_subprocess_server(data)  # default durability (synchronous=FULL)
    rooms = ("ka", "kb", "kc")
    acked: dict[str, list[dict[str, Any]]] = {r: [] for r in rooms}
    try:
        tables = {r: await create_table(child.url, room=r) for r in rooms}
        gms = {r: await tables[r].connect("gm") for r in rooms}
        players = {r: await tables[r].connect("p1", "json") for r in rooms}
        enough = asyncio.Event()
        sent: list[asyncio.Future[dict[str, Any]]] = []

        async def load(room: str, c: Client, op: str, args: dict[str, Any], n: int) -> None:
            futs = [await c.submit(op, args, id=f"{room}-{c.user}-{i}") for i in range(n)]
            sent.extend(futs)
            for fut in futs:
                try:
                    reply = await fut
                except Exception:
                    return  # the server died: the rest is unknown
                if reply["t"] == "ack":
                    acked[room].append(reply)
                if min(len(a) for a in acked.values()) >= 50:
                    enough.set()  # every room has acks, and more are in flight

        tasks = []
        for r in rooms:
            # two GM streams making versions, and a player's refused
            # commands (stop_rest while not resting: `rule`) in between
            npc = tables[r].chars["c_npc"]
            tasks.append(load(r, gms[r], "advance_clock", {"seconds": 1}, 300))
            tasks.append(load(r, gms[r], "damage", {"char": npc, "amount": 0}, 100))
            tasks.append(load(r, players[r], "stop_rest", {"char": tables[r].chars["c_p1"]}, 30))
        running = [asyncio.ensure_future(t) for t in tasks]
        async with asyncio.timeout(60):
            await enough.wait()
        child.kill()
        async with asyncio.timeout(60):
            await asyncio.gather(*running, return_exceptions=True)
        for c in (*gms.values(), *players.values()):
            await c.close()
        for fut in sent:  # those the kill left unanswered: retrieved, not warned about
            if fut.done() and not fut.cancelled():
                fut.exception()
    finally:
        if child.proc.poll() is None:
            child.kill()
    assert min(len(a) for a in acked.values()) >= 50, {r: len(a) for r, a in acked.items()}
    # the database opens and is sound, before the server touches it
    with contextlib.closing(sqlite3.connect(data / DB_FILE)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    child = start_subprocess_server(data)
    try:
        for r in rooms:
            tables[r].url = child.url
            gm = await tables[r].connect("gm")
            assert gm.v >= max(a["v"] for a in acked[r]), r
            # every acked command is there: its retry is a dup with the same ack
            retries = [await gm.submit("advance_clock", {}, id=a["id"]) for a in acked[r]]
            for a, fut in zip(acked[r], retries, strict=True):
                assert await fut == {**a, "dup": True}
            await gm.close()
        assert child.terminate() == 0
    finally:
        if child.proc.poll() is None:
            child.kill()


# --- a full data directory ---------------------------------------------------


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Any:
    path.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill up (needs root): {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def _fill(path: Path) -> Path:
    """Fill the file system with one file until ENOSPC; return the file."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"\0" * 4096
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, chunk)
    finally:
        os.close(fd)
    return filler


async def test_a_full_data_directory_refuses_commands_and_loses_nothing(
    tmp_path: Path, caplog
) -> None:
    mount = tmp_path / "small"
    with small_tmpfs(mount, "4m"):
        data = mount / "data"
        srv_cm = running_server(data, synchronous="FULL")
        srv = await srv_cm.__aenter__()
        try:
            t = await create_table(srv.url)
            gm = await t.connect("gm")
            obs = await t.connect("obs")
            before = await gm.ok("advance_clock", {"seconds": 60}, id="before")
            await obs.wait_v(before["v"])
            filler = _fill(mount)
            # commands that need room on disk, until one is refused (bounded)
            accepted: list[dict[str, Any]] = [before]
            refused: list[dict[str, Any]] = []
            big = {**SHEET, "name": "N" * 90}
            for i in range(400):
                reply = await gm.cmd("add_character", big, id=f"full-{i}")
                if reply["t"] == "ack":
                    accepted.append(reply)
                else:
                    refused.append(reply)
                    break
            assert refused, "the disk never filled up"
            err = refused[0]
            assert err["code"] == "internal" and "retry" in err["message"]
            # the room did not change: no patch went out for it, and a
            # fresh session sees the last acked version
            last = accepted[-1]["v"]
            await obs.wait_v(last)
            fresh = await t.connect("p1")
            assert fresh.v == last == obs.v
            assert without_affordances(fresh.state) == without_affordances(obs.state)
            assert f"full-{len(accepted) - 1}" not in {p["id"] for p in obs.patches}
            # a clear error in the server's log
            assert any(
                "full" in r.getMessage() and r.levelno >= logging.ERROR for r in caplog.records
            ), [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
            # space again: the refused command's retry runs for real
            filler.unlink()
            again = await gm.cmd("add_character", big, id=err["id"])
            assert again["t"] == "ack" and "dup" not in again and again["v"] == last + 1
            accepted.append(again)
            state = copy.deepcopy(gm.state)
            for c in (gm, obs, fresh):
                await c.close()
        finally:
            await srv_cm.__aexit__(None, None, None)
        # nothing acked was lost: after a restart, every ack is there
        with contextlib.closing(sqlite3.connect(data / DB_FILE)) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        async with running_server(data) as srv:
            t.url = srv.url
            gm = await t.connect("gm")
            assert gm.v == accepted[-1]["v"] and gm.state == state
            for a in accepted:
                dup = await gm.cmd("x", {}, id=a["id"])
                assert dup["dup"] and dup["v"] == a["v"]
            await gm.close()


def test_cli_reports_an_unusable_data_dir_clearly(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    proc = subprocess.run(
        [sys.executable, "-m", "sync_server", "serve", "--port", "0", "--data-dir", str(target)],
        cwd=REPO,
        env={**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN},
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
        check=False,
    )
    assert proc.returncode == 2
    assert "data directory" in proc.stderr and str(target) in proc.stderr
    assert "Traceback" not in proc.stderr
