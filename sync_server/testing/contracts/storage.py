"""The storage contract: what every `Storage` backend must do (durable,
all-or-nothing commits fenced on the expected head, replay, dedup, undo
targets, tokens, whole rooms exported and imported, the caller's own
objects), as checks run on a fresh store each (`check_storage`), and the
helpers the checks and the project's tests share (`record`, `load`,
`stored_patches`, `raises`).

A cluster backend (one that implements `Leases`) serves a room only while
it holds its claim: `make_room` claims each room it creates, through
`leases_for`, as the server does for every backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import attrs

import rules
from sync_server.cluster.leases import (
    Claim,
)
from sync_server.core.auth import hash_token
from sync_server.hosting.server import leases_for
from sync_server.storage import (
    AdminRecord,
    DedupEntry,
    PatchRow,
    RoomExists,
    Storage,
    StorageError,
    TokenInUse,
    UndoTarget,
    VersionConflict,
    VersionRecord,
    replay,
)

# `recent` that reaches back past any head: `load_room` reads the whole log.
ALL_VERSIONS = 2**62


def _v(target: UndoTarget | None) -> int | None:
    """An undo target's version, or None when there is none."""
    return None if target is None else target.v


@contextlib.contextmanager
def raises(kind: type[BaseException], match: str | None = None) -> Iterator[None]:
    """The block must raise `kind` (with `match` found in its message)."""
    try:
        yield
    except kind as exc:
        if match is not None and not re.search(match, str(exc)):
            raise AssertionError(f"{kind.__name__} raised, but {str(exc)!r} lacks {match!r}")
        return
    raise AssertionError(f"{kind.__name__} was not raised")


def record(v: int, cmd_id: str | None = None, *, user: str = "u1", **kw) -> VersionRecord:
    fields: dict[str, Any] = {
        "room": "r1",
        "v": v,
        "cmd_id": cmd_id if cmd_id is not None else f"c{v}",
        "user": user,
        "op": "advance_clock",
        "args": {"seconds": 1},
        "ops": [["set", ["clock"], v]],
        "inverse": [["set", ["clock"], v - 1]],
        "events": [{"kind": "clock", "from": v - 1, "to": v}],
        "result": {},
        "undoable": True,
        "ts": 1.0,
    }
    fields.update(kw)
    return VersionRecord(**fields)


async def make_room(store: Storage, room: str = "r1", token: str = "gm-token") -> dict:
    state = rules.new_room(room, "Room")[0].to_dict()
    await store.create_room(
        room,
        state,
        "u1",
        hash_token(token),
        AdminRecord(f"mk-{room}-{token}", "create_room", {}, {}, 0),
    )
    assert isinstance(await leases_for(store).claim(room), Claim)
    return state


async def stored_patches(
    store: Storage, room: str = "r1", after: int = 0, upto: int | None = None
) -> list[PatchRow]:
    """The logged versions after `after` (up to `upto`), read as the server
    reads them: through `load_room`, the whole log."""
    stored = await store.load_room(room, ALL_VERSIONS, 0)
    assert stored is not None, f"no room {room!r}"
    return [p for p in stored.log if p.v > after and (upto is None or p.v <= upto)]


async def load(store: Storage, room: str = "r1", recent: int = 100):
    stored = await store.load_room(room, recent, 1000)
    assert stored is not None
    assert stored is not None
    return replay(stored, recent)


async def a_new_room_is_at_version_zero(store: Storage) -> None:
    state = await make_room(store)
    assert await store.room_ids() == {"r1"}
    loaded = await load(store)
    assert (loaded.v, loaded.state, loaded.recent, loaded.dedup) == (0, state, [], [])
    assert await store.find_token(hash_token("gm-token")) == ("r1", "u1")
    assert await store.load_room("nope", 10, 10) is None


async def commits_append_versions_that_replay(store: Storage) -> None:
    await make_room(store)
    await store.commit("r1", [record(1), record(2)], None, 0)
    await store.commit("r1", [record(3)], None, 2)
    loaded = await load(store)
    assert loaded.v == 3 and loaded.state["clock"] == 3
    assert [p.v for p in loaded.recent] == [1, 2, 3]
    assert [(d.cmd_id, d.v) for d in loaded.dedup] == [("c1", 1), ("c2", 2), ("c3", 3)]
    assert [p.frame()["id"] for p in await stored_patches(store, "r1", 1, 3)] == ["c2", "c3"]


async def the_dedup_window_is_loaded_by_count_and_age(store: Storage) -> None:
    """Issue 19: loading a room reads the ids of its last `dedup_window`
    versions stored at or after `dedup_since`, not its whole log."""
    await make_room(store)
    await store.commit("r1", [record(v, ts=float(v * 100)) for v in range(1, 7)], None, 0)
    stored = await store.load_room("r1", 100, 4)
    assert stored is not None
    assert stored is not None
    assert [(d.cmd_id, d.ts) for d in stored.dedup] == [(f"c{v}", v * 100.0) for v in (3, 4, 5, 6)]
    stored = await store.load_room("r1", 100, 4, 500.0)
    assert stored is not None
    assert stored is not None and [d.cmd_id for d in stored.dedup] == ["c5", "c6"]
    assert [p.v for p in stored.log] == [1, 2, 3, 4, 5, 6]  # the log itself is whole


async def a_stored_command_is_found_past_the_dedup_window(store: Storage) -> None:
    """Issue 19: a command id is found by (user, id) in the whole log, with
    its version and result, also when the dedup window no longer holds it;
    another user's same id, another room's, or an unknown one is None."""
    await make_room(store)
    await make_room(store, "r2", token="gm-token-2")
    old = record(1, "old", result={"char": "c1"}, ts=5.0)
    await store.commit("r1", [old, *(record(v) for v in range(2, 7))], None, 0)
    stored = await store.load_room("r1", 100, 2)
    assert stored is not None and "old" not in [d.cmd_id for d in stored.dedup]
    found = await store.stored_command("r1", "u1", "old")
    assert found == DedupEntry("u1", "old", 1, {"char": "c1"}, 5.0)
    assert await store.stored_command("r1", "u2", "old") is None
    assert await store.stored_command("r2", "u1", "old") is None
    assert await store.stored_command("r1", "u1", "never") is None
    assert await store.stored_command("nope", "u1", "old") is None


async def a_commit_on_a_stale_head_is_fenced_and_stores_nothing(store: Storage) -> None:
    await make_room(store)
    await store.commit("r1", [record(1)], None, 0)
    with raises(VersionConflict):
        await store.commit("r1", [record(2, "other")], None, 0)  # another writer's view
    with raises(VersionConflict):
        await store.commit("r1", [record(5)], None, 4)  # ahead of the head
    loaded = await load(store)
    assert loaded.v == 1 and [d.cmd_id for d in loaded.dedup] == ["c1"]


async def a_commit_is_all_or_nothing(store: Storage) -> None:
    await make_room(store)
    await store.commit("r1", [record(1, "same")], None, 0)
    with raises(StorageError):  # a command id already stored
        await store.commit("r1", [record(2), record(3, "same")], None, 1)
    loaded = await load(store)
    assert loaded.v == 1
    await store.commit("r1", [record(2)], None, 1)  # the head did not move
    assert (await load(store)).v == 2


async def concurrent_commits_of_rooms_all_land(store: Storage) -> None:
    for i in range(8):
        await make_room(store, f"r{i}", f"t{i}")
    await asyncio.gather(
        *(store.commit(f"r{i}", [record(1, room=f"r{i}")], None, 0) for i in range(8))
    )
    for i in range(8):
        assert (await load(store, f"r{i}")).v == 1


async def snapshots_bound_the_replay_and_the_oldest_go(store: Storage) -> None:
    await make_room(store)
    state = (await load(store)).state
    for v in range(1, 10):
        snap = None
        if v % 3 == 0:
            state = {**state, "clock": v}
            snap = (v, state)
        await store.commit("r1", [record(v)], snap, v - 1)
    stored = await store.load_room("r1", 2, 1000)
    assert stored is not None
    assert stored is not None and stored.snapshot_v == 9 and stored.snapshot["clock"] == 9
    assert [row.v for row in stored.log] == [8, 9]  # the `recent` most recent, for resuming
    loaded = replay(stored, 2)
    assert loaded.v == 9 and loaded.state["clock"] == 9


async def a_hole_in_the_log_is_refused(store: Storage) -> None:
    await make_room(store)
    await store.commit("r1", [record(1), record(2)], None, 0)
    stored = await store.load_room("r1", 100, 100)
    assert stored is not None
    stored.log.pop(0)
    with raises(StorageError, match="version 1 missing"):
        replay(stored, 100)


async def token_changes_travel_with_their_version(store: Storage) -> None:
    await make_room(store)
    await store.commit("r1", [record(1, token_set=(("u2", hash_token("p-token")),))], None, 0)
    assert await store.find_token(hash_token("p-token")) == ("r1", "u2")
    await store.commit("r1", [record(2, token_set=(("u2", hash_token("new")),))], None, 1)
    assert await store.find_token(hash_token("p-token")) is None  # rotated
    assert await store.find_token(hash_token("new")) == ("r1", "u2")
    await store.commit("r1", [record(3, token_del=("u2",))], None, 2)
    assert await store.find_token(hash_token("new")) is None


async def token_changes_within_one_batch_apply_in_order(store: Storage) -> None:
    await make_room(store)
    await store.commit(
        "r1",
        [
            record(1, token_set=(("u2", hash_token("a")), ("u3", hash_token("b")))),
            record(2, token_del=("u2",)),
            record(3, token_set=(("u3", hash_token("c")),)),
            record(4, token_del=("u4",), token_set=(("u4", hash_token("d")),)),  # del, then set
        ],
        None,
        0,
    )
    found = [await store.find_token(hash_token(t)) for t in ("a", "b", "c", "d")]
    assert found == [None, None, ("r1", "u3"), ("r1", "u4")]


async def a_batch_with_every_kind_of_change_lands_whole_or_not_at_all(store: Storage) -> None:
    await make_room(store)
    state = (await load(store)).state
    await store.commit("r1", [record(1), record(2)], None, 0)
    batch = [
        record(3, undoable=False, undoes=2, token_set=(("u2", hash_token("p")),)),
        record(4, undoable=False, token_del=("u1",)),
    ]
    with raises(VersionConflict):  # stale head: none of it
        await store.commit("r1", batch, (4, {**state, "clock": 4}), 1)
    assert _v(await store.undo_target("r1")) == 2
    assert await store.find_token(hash_token("gm-token")) == ("r1", "u1")
    assert await store.find_token(hash_token("p")) is None
    await store.commit("r1", batch, (4, {**state, "clock": 4}), 2)
    assert _v(await store.undo_target("r1")) == 1
    assert await store.find_token(hash_token("gm-token")) is None
    assert await store.find_token(hash_token("p")) == ("r1", "u2")
    stored = await store.load_room("r1", 0, 1000)
    assert stored is not None
    assert stored.snapshot_v == 4 and stored.snapshot["clock"] == 4


async def creating_a_room_that_exists_is_refused_and_changes_nothing(store: Storage) -> None:
    await make_room(store)
    await store.commit("r1", [record(1)], None, 0)
    with raises(StorageError):
        await store.create_room(
            "r1", {}, "u9", hash_token("other"), AdminRecord("mk-again", "create_room", {}, {}, 0)
        )
    assert (await load(store)).v == 1
    assert await store.find_token(hash_token("other")) is None
    assert await store.admin_result("mk-again") is None


async def undo_targets_walk_back_past_undone_and_undoable_false(store: Storage) -> None:
    await make_room(store)
    await store.commit("r1", [record(1), record(2, undoable=False)], None, 0)
    target = await store.undo_target("r1")
    assert target is not None
    assert target is not None and target.v == 1 and target.inverse == [["set", ["clock"], 0]]
    await store.commit("r1", [record(3), record(4, undoable=False, undoes=3)], None, 2)
    assert _v(await store.undo_target("r1")) == 1
    await store.commit("r1", [record(5, undoable=False, undoes=1)], None, 4)
    assert await store.undo_target("r1") is None


async def deleting_a_room_removes_it_and_its_tokens(store: Storage) -> None:
    await make_room(store)
    await store.commit("r1", [record(1)], None, 0)
    await store.delete_room("r1", AdminRecord("del", "delete_room", {}, {"room": "r1"}, 0))
    assert await store.room_ids() == set()
    assert await store.load_room("r1", 10, 10) is None
    assert await store.find_token(hash_token("gm-token")) is None
    await make_room(store, token="again")  # the id can be used again
    assert (await load(store)).v == 0


async def admin_results_are_remembered(store: Storage) -> None:
    await make_room(store)
    found = await store.admin_result("mk-r1-gm-token")
    assert found is not None
    assert found is not None and found.op == "create_room"
    assert await store.admin_result("never") is None


async def what_a_backend_returns_is_the_callers_own(store: Storage) -> None:
    await make_room(store)
    await store.commit("r1", [record(1)], None, 0)
    first = await store.load_room("r1", 10, 10)
    assert first is not None
    first.snapshot["name"] = "changed by the caller"
    first.log[0].ops.append(["set", ["x"], 1])
    again = await load(store)
    assert again.state["name"] == "Room" and "x" not in again.state


# --- whole rooms: export and import (backups, moving a room) ------------------


async def _undo_room(store: Storage) -> None:
    """r1 with a log, a snapshot past v0, an undone version and two users' tokens."""
    await make_room(store)
    state = (await load(store)).state
    await store.commit("r1", [record(1, token_set=(("u2", hash_token("p-token")),))], None, 0)
    await store.commit("r1", [record(2), record(3, undoable=False)], (3, {**state, "clock": 3}), 1)
    await store.commit("r1", [record(4, undoable=False, undoes=2)], None, 3)


async def an_exported_room_imports_to_the_same_room(store: Storage) -> None:
    await _undo_room(store)
    before = await load(store)
    dump = await store.export_room("r1")
    assert dump is not None
    assert dump is not None and (dump.head, dump.snapshot_v) == (4, 3)
    assert [r.v for r in dump.versions] == [1, 2, 3, 4] and dump.undone == {2}
    assert dump.tokens == {"u1": hash_token("gm-token"), "u2": hash_token("p-token")}
    assert dump.versions[0].token_set == ()  # the hashes travel in `tokens` only
    await store.delete_room("r1", AdminRecord("del", "delete_room", {}, {}, 0))
    assert await store.find_token(hash_token("p-token")) is None
    await store.import_room(dump, AdminRecord("imp", "import_room", {}, {"room": "r1"}, 0))
    after = await load(store)
    assert (after.v, after.state) == (before.v, before.state)
    assert [(d.user, d.cmd_id, d.v) for d in after.dedup] == [
        (d.user, d.cmd_id, d.v) for d in before.dedup
    ]
    assert [p.frame() for p in await stored_patches(store, "r1", 0, 4)] == [
        p.frame() for p in before.recent
    ]
    target = await store.undo_target("r1")  # v2 was undone; v3 and v4 are not undoable
    assert target is not None and target.v == 1
    assert await store.find_token(hash_token("p-token")) == ("r1", "u2")
    assert getattr(await store.admin_result("imp"), "op", None) == "import_room"
    again = await store.export_room("r1")
    assert again is not None
    assert again == dump  # nothing lost on the way, the creation time included


async def import_refuses_an_existing_room_unless_replace(store: Storage) -> None:
    await _undo_room(store)
    dump = await store.export_room("r1")
    assert dump is not None
    await store.commit("r1", [record(5)], None, 4)
    with raises(RoomExists):
        await store.import_room(dump, AdminRecord("imp1", "import_room", {}, {}, 0))
    assert (await load(store)).v == 5  # untouched
    assert await store.admin_result("imp1") is None
    await store.commit("r1", [record(6, token_set=(("u3", hash_token("late")),))], None, 5)
    await store.import_room(dump, AdminRecord("imp2", "import_room", {}, {}, 0), replace=True)
    assert (await load(store)).v == 4  # back to the exported head
    assert await store.find_token(hash_token("late")) is None  # the old room's tokens went
    # A replaced room is served afresh (cluster: claimed again, a new epoch).
    assert isinstance(await leases_for(store).claim("r1"), Claim)
    await store.commit("r1", [record(5, "again")], None, 4)  # and it goes on from there


async def import_refuses_a_token_hash_of_another_room(store: Storage) -> None:
    await _undo_room(store)
    dump = await store.export_room("r1")
    assert dump is not None
    moved = attrs.evolve(dump, room="r9")
    with raises(TokenInUse, match="already used"):
        await store.import_room(moved, AdminRecord("imp", "import_room", {}, {}, 0))
    assert await store.room_ids() == {"r1"} and await store.admin_result("imp") is None
    assert await store.export_room("nope") is None
    await store.import_room(
        attrs.evolve(moved, tokens={}), AdminRecord("imp", "import_room", {}, {}, 0)
    )
    assert (await load(store, "r9")).state == (await load(store)).state


async def an_export_is_the_callers_own(store: Storage) -> None:
    await _undo_room(store)
    dump = await store.export_room("r1")
    assert dump is not None
    dump.snapshot["name"] = "changed"
    dump.versions[0].ops.append(["set", ["x"], 1])
    again = await store.export_room("r1")
    assert again is not None
    assert again.snapshot["name"] == "Room" and ["set", ["x"], 1] not in again.versions[0].ops


async def room_summaries_list_every_room_without_loading_it(store: Storage) -> None:
    """The admin's list: id, head, creation, when the head was written, and
    the name, a rename after the latest snapshot included."""
    await make_room(store, "r1")
    await make_room(store, "r2", token="gm-token-2")
    await store.commit("r1", [record(1, ts=50.0)], None, 0)
    rename = record(2, op="update_room", args={"name": "Thursday"}, ts=60.0)
    await store.commit("r1", [rename], None, 1)
    found = {s.room: s for s in await store.room_summaries()}
    assert set(found) == {"r1", "r2"}
    assert (found["r1"].v, found["r1"].last_activity, found["r1"].name) == (2, 60.0, "Thursday")
    assert (found["r2"].v, found["r2"].last_activity, found["r2"].name) == (0, None, "Room")
    assert found["r2"].created > 0
    await store.commit("r1", [record(3, ts=70.0)], (3, {"name": "Snap", "clock": 3}), 2)
    found = {s.room: s for s in await store.room_summaries()}
    assert (found["r1"].v, found["r1"].name) == (3, "Snap")  # the snapshot's, renames before it


# Every check, in order: each takes a fresh, empty, opened store.
STORAGE_CHECKS: list[Callable[[Storage], Awaitable[None]]] = [
    a_new_room_is_at_version_zero,
    commits_append_versions_that_replay,
    the_dedup_window_is_loaded_by_count_and_age,
    a_stored_command_is_found_past_the_dedup_window,
    a_commit_on_a_stale_head_is_fenced_and_stores_nothing,
    a_commit_is_all_or_nothing,
    concurrent_commits_of_rooms_all_land,
    snapshots_bound_the_replay_and_the_oldest_go,
    a_hole_in_the_log_is_refused,
    token_changes_travel_with_their_version,
    token_changes_within_one_batch_apply_in_order,
    a_batch_with_every_kind_of_change_lands_whole_or_not_at_all,
    creating_a_room_that_exists_is_refused_and_changes_nothing,
    undo_targets_walk_back_past_undone_and_undoable_false,
    deleting_a_room_removes_it_and_its_tokens,
    admin_results_are_remembered,
    what_a_backend_returns_is_the_callers_own,
    _undo_room,
    an_exported_room_imports_to_the_same_room,
    import_refuses_an_existing_room_unless_replace,
    import_refuses_a_token_hash_of_another_room,
    an_export_is_the_callers_own,
    room_summaries_list_every_room_without_loading_it,
]


async def check_storage(open_store: Callable[[], Storage | Awaitable[Storage]]) -> None:
    """Run every check of the storage contract, each on a fresh store from
    `open_store()` (opened and closed here). Raises AssertionError naming
    the first check that fails."""
    for check in STORAGE_CHECKS:
        made: Any = open_store()
        store: Storage = await made if asyncio.iscoroutine(made) else made
        await store.open()
        try:
            await check(store)
        except AssertionError as exc:
            raise AssertionError(f"storage contract, {check.__name__}: {exc}") from exc
        finally:
            await store.close()
