"""The SQLite storage on its own: group commit, atomicity of a failing job,
lazy loading and unloading of rooms, many rooms at startup."""

from __future__ import annotations

import asyncio
import time

import pytest

import rules
from sync_server.clock import FakeClock
from sync_server.core.auth import hash_token
from sync_server.hosting import room_host as rooms_module
from sync_server.storage import AdminRecord, StorageError, VersionRecord, replay
from sync_server.storage.sqlite import SqliteStorage
from tests.helpers.server import create_table, running_server


def _record(room: str, v: int, cmd_id: str) -> VersionRecord:
    return VersionRecord(
        room=room, v=v, cmd_id=cmd_id, user="u1", op="advance_clock", args={"seconds": 1},
        ops=[["set", ["clock"], v]], inverse=[["set", ["clock"], v - 1]], events=[],
        result={}, undoable=True, ts=time.time(),
    )  # fmt: skip


async def _make_room(store: SqliteStorage, room: str) -> None:
    state, gm = rules.new_room(room, room)
    await store.create_room(
        room,
        state.to_dict(),
        gm,
        hash_token("t-" + room),
        AdminRecord(f"mk-{room}", "create_room", {}, {}, 0.0),
    )


async def test_concurrent_commits_are_grouped(tmp_path) -> None:
    groups: list[int] = []
    store = SqliteStorage(tmp_path, "NORMAL", on_group=groups.append)
    await store.open()
    try:
        for i in range(20):
            await _make_room(store, f"r{i}")
        groups.clear()
        await asyncio.gather(
            *(store.commit(f"r{i}", [_record(f"r{i}", 1, "a")], None, 0) for i in range(20))
        )
        assert sum(groups) == 20 and max(groups) > 1  # fewer transactions than commits
        loaded = replay(await store.load_room("r7", 10, 10), 10)
        assert loaded is not None and loaded.v == 1 and loaded.state["clock"] == 1
        assert loaded.dedup[0].cmd_id == "a"
    finally:
        await store.close()


async def test_a_failing_job_does_not_sink_its_group(tmp_path) -> None:
    store = SqliteStorage(tmp_path, "NORMAL")
    await store.open()
    try:
        await _make_room(store, "a")
        await _make_room(store, "b")
        good = store.commit("a", [_record("a", 1, "x")], None, 0)
        bad = store.commit("b", [_record("b", 1, "y"), _record("b", 1, "z")], None, 0)  # dup v
        results = await asyncio.gather(good, bad, return_exceptions=True)
        assert results[0] is None and isinstance(results[1], Exception)
        assert replay(await store.load_room("a", 10, 10), 10).v == 1
        assert replay(await store.load_room("b", 10, 10), 10).v == 0  # all or nothing
    finally:
        await store.close()


async def test_many_rooms_start_fast_and_load_lazily(tmp_path) -> None:
    data = tmp_path / "data"
    store = SqliteStorage(data, "NORMAL")
    await store.open()
    await asyncio.gather(*(_make_room(store, f"room{i}") for i in range(2000)))
    await store.close()
    started = time.monotonic()
    async with running_server(data) as srv:
        assert time.monotonic() - started < 5
        assert srv.health()["rooms"] == 2000 and srv.rooms.hosts == {}
        await create_table(srv.url, room="busy")
        assert set(srv.rooms.hosts) == {"busy"}


async def test_idle_rooms_are_unloaded_and_reload(tmp_path) -> None:
    """Idle unloading on a fake clock: nothing sleeps, time is moved."""
    clock = FakeClock()
    async with running_server(tmp_path, clock=clock, room_idle_unload_seconds=300) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        ack = await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 2})
        clock.advance(301)
        assert await srv.rooms.unload_idle() == []  # a client is connected
        await gm.close()
        async with asyncio.timeout(5):
            while srv.registry.count("r1"):
                await asyncio.sleep(0.01)
        assert await srv.rooms.unload_idle() == []  # active 0 s ago (the close)
        clock.advance(299)
        assert await srv.rooms.unload_idle() == []
        clock.advance(2)
        assert await srv.rooms.unload_idle() == ["r1"]
        back = await t.connect("gm")
        assert back.v == ack["v"]
        dup = await back.cmd("damage", {"char": t.chars["c_p1"], "amount": 2}, id=ack["id"])
        assert dup["dup"] is True
        await back.close()


async def test_unusable_database_file_is_a_storage_error(tmp_path) -> None:
    (tmp_path / "vtt-sync.sqlite3").write_bytes(b"this is not a database" * 100)
    store = SqliteStorage(tmp_path)
    with pytest.raises(StorageError, match=r"vtt-sync\.sqlite3"):
        await store.open()


def test_invert_undoes_a_diff() -> None:
    import copy
    import random

    from rules import invert

    rng = random.Random(7)
    for _ in range(300):
        old = {
            k: rng.choice([1, "x", [1, 2], {"a": rng.randint(0, 2)}])
            for k in "abcd"
            if rng.random() < 0.7
        }
        new = copy.deepcopy(old)
        for k in "abcde":
            r = rng.random()
            if r < 0.3:
                new[k] = rng.choice([2, "y", [3], {"a": rng.randint(0, 2), "b": 1}])
            elif r < 0.5:
                new.pop(k, None)
        ops = rules.diff(old, new)
        back = rules.apply_ops(copy.deepcopy(new), invert(ops, old))
        assert back == old


@pytest.mark.parametrize("recreated", [False, True], ids=["deleted", "deleted-and-recreated"])
async def test_unloading_drops_only_the_host_it_found_idle(
    tmp_path, monkeypatch, recreated: bool
) -> None:
    async with running_server(tmp_path, room_idle_unload_seconds=-1.0) as srv:  # all idle
        await _unloading_drops_only_the_host_it_found_idle(srv, monkeypatch, recreated)


async def _unloading_drops_only_the_host_it_found_idle(
    vtt_server, monkeypatch, recreated: bool
) -> None:
    """`unload_idle` awaits each idle host's stop; meanwhile another room of
    its snapshot may be deleted (and re-created and loaded again). It must
    then leave that room alone: not raise KeyError (which would end the
    sweeper for good), nor drop the new host from `hosts` without stopping
    it (a live orphan, and a second host on the next load)."""
    rooms = vtt_server.rooms
    for room in ("a", "b"):
        ack = await vtt_server.admin_command("create_room", {"room": room, "name": room})
        assert ack["t"] == "ack", ack
    first, old_b = await rooms.get("a"), await rooms.get("b")
    assert first is not None and old_b is not None and list(rooms.hosts) == ["a", "b"]
    stop_first = first.stop
    new_b: list[rooms_module.RoomHost | None] = []

    async def stop_while_b_is_deleted() -> None:  # the interleaving, made deterministic
        await stop_first()
        assert (await vtt_server.admin_command("delete_room", {"room": "b"}))["t"] == "ack"
        if recreated:
            ack = await vtt_server.admin_command("create_room", {"room": "b", "name": "again"})
            assert ack["t"] == "ack", ack
            new_b.append(await rooms.get("b"))

    monkeypatch.setattr(first, "stop", stop_while_b_is_deleted)
    assert await rooms.unload_idle() == ["a"]
    assert old_b.closed
    if recreated:
        assert new_b[0] is not None and new_b[0] is not old_b and not new_b[0].closed
        assert rooms.hosts == {"b": new_b[0]}
        assert await rooms.get("b") is new_b[0]  # no second host for the room
    else:
        assert rooms.hosts == {}
