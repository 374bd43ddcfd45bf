"""Durability: restart on the same data dir, kill -9 during a burst,
graceful shutdown, tokens stored only as hashes (issue 3)."""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import sqlite3
import stat

from sync_server.core.auth import ADMIN_TOKEN_FILE
from sync_server.storage.sqlite import DB_FILE
from tests.helpers.server import (
    connect,
    create_table,
    on_both_transports,
    running_server,
    start_subprocess_server,
)

pytestmark = on_both_transports  # issue 22: the fast transport keeps the protocol


async def test_restart_keeps_state_versions_and_dedup(tmp_path) -> None:
    data = tmp_path / "data"
    async with running_server(data) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        hit = await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 25}, id="hit")
        added = await gm.ok("add_user", {"name": "Late", "role": "observer"}, id="late")
        await gm.ok("advance_clock", {"seconds": 3600})
        state, v = gm.state, gm.v
        await gm.close()
    async with running_server(data) as srv:
        assert srv.rooms.hosts == {}  # rooms load lazily, on first use
        t.url = srv.url
        gm = await t.connect("gm")
        assert gm.welcome["v"] == v and gm.state == state
        dup = await gm.cmd("damage", {"char": t.chars["c_p1"], "amount": 25}, id="hit")
        assert dup == {**hit, "dup": True}
        # a token-bearing ack after a restart: the result without the token
        dup_user = await gm.cmd("add_user", {"name": "Late", "role": "observer"}, id="late")
        assert dup_user["dup"] is True and dup_user["v"] == added["v"]
        assert dup_user["result"]["user"] == added["result"]["user"]
        assert "token" not in dup_user["result"]
        late = await connect(srv.url, added["result"]["token"], "r1")  # its token still works
        assert late.role == "observer"
        nxt = await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 1})
        assert nxt["v"] == v + 1
        # undo still works from the stored inverse ops
        await gm.ok("undo")
        assert gm.state == state
        await gm.close()
        await late.close()


async def test_many_snapshots_and_restart(tmp_path) -> None:
    data = tmp_path / "data"
    async with running_server(data, snapshot_every_versions=5) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        for i in range(23):
            await gm.ok("advance_clock", {"seconds": i + 1})
        state, v = gm.state, gm.v
        await gm.close()
    with sqlite3.connect(data / DB_FILE) as db:
        snaps = [r[0] for r in db.execute("SELECT v FROM snapshots ORDER BY v")]
    assert snaps == [20, 25]  # the latest two are kept
    async with running_server(data) as srv:
        t.url = srv.url
        obs = await t.connect("obs")
        assert (obs.v, obs.state) == (v, obs.seen(state))
        await obs.close()


async def test_tokens_are_stored_only_as_hashes(tmp_path) -> None:
    data = tmp_path / "data"
    async with running_server(data) as srv:
        t = await create_table(srv.url)
    blob = b"".join(p.read_bytes() for p in data.iterdir() if p.name.startswith(DB_FILE))
    for token in t.tokens.values():
        assert token.encode() not in blob


async def test_generated_admin_token_file_is_private_and_reused(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("VTT_SYNC_ADMIN_TOKEN", raising=False)
    data = tmp_path / "data"
    async with running_server(data, admin_token=None) as srv:
        first = srv.admin_token
        assert srv.admin_token_generated
    path = data / ADMIN_TOKEN_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    async with running_server(data, admin_token=None) as srv:
        assert srv.admin_token == first and not srv.admin_token_generated
        admin = await connect(srv.url, first, None)
        assert admin.role == "admin"
        await admin.close()
    monkeypatch.setenv("VTT_SYNC_ADMIN_TOKEN", "from-the-environment-0123456789abcd")
    async with running_server(data, admin_token=None) as srv:
        assert srv.admin_token == "from-the-environment-0123456789abcd"
        assert path.read_text().strip() == first  # the file is left alone


async def test_graceful_shutdown_commits_and_acks_in_flight_commands(tmp_path) -> None:
    data = tmp_path / "data"
    srv_cm = running_server(data)
    srv = await srv_cm.__aenter__()
    try:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        futs = [await gm.submit("advance_clock", {"seconds": 1}) for _ in range(50)]
        await futs[0]
    finally:
        await srv_cm.__aexit__(None, None, None)
    code, _ = await gm.closed()
    assert code == 1001
    replies = [f.result() if not f.exception() else None for f in futs if f.done()]
    acked = [r for r in replies if r and r["t"] == "ack"]
    assert len(acked) >= 1
    async with running_server(data) as srv:
        t.url = srv.url
        obs = await t.connect("obs")
        # every committed command was acked before the close, and vice versa
        assert obs.v == 6 + len(acked) == max(a["v"] for a in acked)
        assert obs.state["clock"] == len(acked)
        await obs.close()


async def test_kill_9_during_a_burst_loses_no_acked_version(tmp_path) -> None:
    data = tmp_path / "data"
    child = start_subprocess_server(data)  # default durability (synchronous=FULL)
    try:
        t = await create_table(child.url)
        gm = await t.connect("gm")
        futs = [await gm.submit("advance_clock", {"seconds": 1}, id=f"k-{i}") for i in range(400)]
        acked: list[dict] = []
        for fut in futs:  # kill once a quarter is acked, with the rest in flight
            acked.append(await fut)
            if len(acked) == 100:
                child.kill()
                break
        for fut in futs[100:]:  # whatever was already on its way
            if fut.done() and not fut.exception():
                acked.append(fut.result())
        await gm.closed()
    finally:
        if child.proc.poll() is None:
            child.kill()
    assert len(acked) >= 100
    child = start_subprocess_server(data)
    try:
        t.url = child.url
        gm = await t.connect("gm")
        assert gm.v >= max(a["v"] for a in acked)
        print(f"acked {len(acked)} of 400 before kill -9; {gm.v - 6} versions after restart")
        assert gm.state["clock"] == gm.v - 6  # every stored version is one advance
        retries = [await gm.submit("advance_clock", {"seconds": 1}, id=a["id"]) for a in acked]
        for a, fut in zip(acked, retries, strict=True):
            again = await fut
            assert again == {**a, "dup": True}
        await gm.close()
        assert child.terminate() == 0
    finally:
        if child.proc.poll() is None:
            child.kill()


async def test_sigterm_closes_clients_with_1001_and_exits_cleanly(tmp_path) -> None:
    child = start_subprocess_server(tmp_path / "data")
    try:
        t = await create_table(child.url)
        gm = await t.connect("gm")
        ack = await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 1})
        os.kill(child.proc.pid, signal.SIGTERM)
        code, _ = await gm.closed()
        assert code == 1001
        assert await asyncio.to_thread(child.proc.wait, 10) == 0
    finally:
        if child.proc.poll() is None:
            child.kill()
    child = start_subprocess_server(tmp_path / "data")
    try:
        t.url = child.url
        obs = await t.connect("obs")
        assert obs.v == ack["v"]
        await obs.close()
    finally:
        child.terminate()


async def test_unwritable_data_dir_is_a_clear_error(tmp_path) -> None:
    if os.geteuid() == 0:
        target = tmp_path / "file-not-dir"
        target.write_text("x")
        data = target / "data"  # a path under a regular file: never creatable
    else:
        data = tmp_path / "ro"
        data.mkdir()
        data.chmod(0o500)
    from sync_server.storage import StorageError

    try:
        async with running_server(data):
            raise AssertionError("the server started on an unusable data dir")
    except StorageError as exc:
        assert str(data.parent) in str(exc) or str(data) in str(exc)


async def test_a_failed_commit_refuses_the_commands_and_changes_nothing(
    vtt_server, vtt_table
) -> None:
    gm = await vtt_table.connect("gm")
    obs = await vtt_table.connect("obs")
    before_v, before = gm.v, copy.deepcopy(gm.state)
    real_commit = vtt_server.storage.commit

    async def broken(*args, **kwargs):
        raise OSError("disk full")

    vtt_server.storage.commit = broken
    try:
        futs = [
            await gm.submit("damage", {"char": vtt_table.chars["c_p1"], "amount": 1}, id=f"f-{i}")
            for i in range(5)
        ]
        replies = await asyncio.gather(*futs)
    finally:
        vtt_server.storage.commit = real_commit
    assert {r["code"] for r in replies} == {"internal"}
    # nothing was published, and the retry of the same ids now runs for real
    again = await gm.ok("damage", {"char": vtt_table.chars["c_p1"], "amount": 1}, id="f-0")
    assert "dup" not in again and again["v"] == before_v + 1
    await obs.wait_v(again["v"])
    assert [p["v"] for p in obs.patches] == [before_v + 1]
    assert (
        gm.state["characters"][vtt_table.chars["c_p1"]]["pe"]
        == before["characters"][vtt_table.chars["c_p1"]]["pe"] - 1
    )
    await gm.close()
    await obs.close()
