"""The storage, lease and bus contracts, shipped with the product (as trio
ships `trio.testing.check_two_way_stream`): what every `Storage` backend,
and every cluster `Leases` backend, must do. A third-party backend runs
them on itself:

    from sync_server.testing.contracts import check_leases, check_storage
    await check_storage(lambda: MyStorage(...))   # a fresh, empty store each time
    await check_leases(my_world)                  # a fresh LeaseWorld each time

The project's own suite runs each check on every backend
(tests/server/test_storage_contract.py: `STORAGE_CHECKS`;
tests/server/test_lease_contract.py: `LEASE_CHECKS`, on SQLite's workers
leases and PostgreSQL's). A cluster
backend (one that implements `Leases`) serves a room only while it holds
its claim: `make_room` claims each room it creates, through `leases_for`,
as the server does for every backend.

The bus contract (`check_bus`, `BUS_CHECKS`) is what every `RoomBus` must
do for the sinks of one process: bytes per codec and view class, built
once and shared; publish order; closing, stale and held sinks; a failure
for one sink or one view class never skipping the others:

    from sync_server.testing.contracts import check_bus
    check_bus(lambda: MyBus(...))   # a fresh bus each time

The project's own bus runs it (tests/server/test_bus_contract.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

import attrs

import rules
from sync_server.cluster.leases import (
    RENEWALS_PER_LEASE,
    Claim,
    LeaseKeeper,
    Leases,
    Owner,
)
from sync_server.core.auth import hash_token
from sync_server.hosting.bus import RoomBus
from sync_server.hosting.server import leases_for
from sync_server.storage import (
    AdminRecord,
    DedupEntry,
    Fenced,
    PatchRow,
    RoomDeleted,
    RoomExists,
    Storage,
    StorageError,
    TokenInUse,
    UndoTarget,
    VersionConflict,
    VersionRecord,
    replay,
)
from sync_server.wire.codec import CODECS, JSON, MSGPACK

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


# --- the lease contract -------------------------------------------------------
#
# What every cluster `Leases` backend must do (cluster/leases.py: one node per
# room at a time, every claim a new epoch, every commit under a lost claim
# refused whole): run on a shared database by several nodes, each a storage
# and the leases fencing it, as the server composes them. A backend offers a
# `LeaseWorld`: its nodes, and a way to make a lease run out by the clock the
# leases are read by (the database's, or the machine's).


@attrs.frozen
class LeaseNode:
    """One node of a lease world: its storage and the leases fencing it."""

    name: str
    storage: Storage
    leases: Leases


class LeaseWorld(Protocol):
    """A shared database, fresh and empty, and the nodes on it."""

    def node(
        self, name: str, *, lease_seconds: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[LeaseNode]:
        """A node `name` (its public URL its own), opened on entry; on exit
        its leases and storage close (releasing what it holds)."""
        ...

    async def expire(self, room: str) -> None:
        """The room's lease runs out now, by the clock the leases read."""
        ...


async def make_shared_room(n: LeaseNode, room: str = "r1", again: str = "") -> None:
    """A room created from `n`, not claimed (`again`: a new token and admin
    id, for a room created anew under the same id)."""
    await n.storage.create_room(
        room,
        {"clock": 0},
        "u1",
        hash_token(f"t-{room}{again}"),
        AdminRecord(f"mk-{room}{again}", "create_room", {}, {}, 0),
    )


async def stored_versions(n: LeaseNode, room: str = "r1") -> list[int]:
    """The versions stored of a room (read through the export)."""
    dump = await n.storage.export_room(room)
    return [] if dump is None else [r.v for r in dump.versions]


def _owner_of(n: LeaseNode) -> Owner:
    return Owner("r1", n.leases.node_id, n.leases.public_url)


async def one_winner_per_epoch_among_nodes_claiming_at_once(world: LeaseWorld) -> None:
    async with contextlib.AsyncExitStack() as stack:
        nodes = [await stack.enter_async_context(world.node(f"n{i}")) for i in range(8)]
        await make_shared_room(nodes[0])
        epochs: list[int] = []
        for round_ in range(4):
            results = await asyncio.gather(*(n.leases.claim("r1") for n in nodes))
            winners = [(n, r) for n, r in zip(nodes, results, strict=True) if isinstance(r, Claim)]
            assert len(winners) == 1, (round_, results)
            winner, claim = winners[0]
            assert [r for r in results if not isinstance(r, Claim)] == [_owner_of(winner)] * 7
            assert await nodes[3].leases.owner("r1") == _owner_of(winner)
            assert [n.name for n in nodes if n.leases.claim_of("r1")] == [winner.name]
            epochs.append(claim.epoch)
            if round_ % 2:
                await winner.leases.release(["r1"])
            else:
                await world.expire("r1")
                winner.leases.expired(math.inf)  # as its LeaseKeeper would, past its deadline
        assert epochs == sorted(set(epochs)), epochs


async def a_second_claim_before_expiry_gets_the_owners_url(world: LeaseWorld) -> None:
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        first = await a.leases.claim("r1")
        assert isinstance(first, Claim)
        assert await b.leases.claim("r1") == _owner_of(a)
        assert b.leases.claim_of("r1") is None
        assert await b.leases.owner("r1") == _owner_of(a)
        assert await b.leases.claim("nope") is None and await b.leases.owner("nope") is None


async def a_claim_fences_the_previous_one_even_of_the_same_node(world: LeaseWorld) -> None:
    """A node restarted under the same id takes its rooms back at once; the
    old process, if it still ran (paused), is fenced by the new epoch."""
    async with world.node("a") as a:
        await make_shared_room(a)
        old = await a.leases.claim("r1")
        assert isinstance(old, Claim)
        await a.storage.commit("r1", [record(1)], None, 0)
        # (a short lease: a backend that watches the old process's heartbeat
        # before it takes the id over watches for less)
        async with world.node("a", lease_seconds=1.0) as restarted:
            new = await restarted.leases.claim("r1")
            assert isinstance(new, Claim) and new.epoch > old.epoch
            with raises(Fenced):
                await a.storage.commit("r1", [record(2)], None, 1)
            assert a.leases.claim_of("r1") is None
            await restarted.storage.commit("r1", [record(2)], None, 1)
            assert await stored_versions(restarted) == [1, 2]


async def after_another_node_claims_the_old_owners_commit_stores_nothing(
    world: LeaseWorld,
) -> None:
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        await a.leases.claim("r1")
        await a.storage.commit("r1", [record(1)], None, 0)
        await world.expire("r1")  # a paused past its lease...
        assert isinstance(await b.leases.claim("r1"), Claim)  # ...and b took the room
        with raises(Fenced, match="lost its claim"):
            change = record(2, token_set=(("u9", hash_token("x")),))
            await a.storage.commit("r1", [change], (2, {"clock": 2}), 1)
        assert await stored_versions(b) == [1]
        assert await b.storage.find_token(hash_token("x")) is None
        assert a.leases.claim_of("r1") is None
        with raises(Fenced):  # refused from now on
            await a.storage.commit("r1", [record(2)], None, 1)
        await b.storage.commit("r1", [record(2)], None, 1)
        assert (await load(b.storage)).v == 2


async def an_expired_lease_nobody_took_still_refuses_the_commit(world: LeaseWorld) -> None:
    async with world.node("a") as a:
        await make_shared_room(a)
        first = await a.leases.claim("r1")
        assert isinstance(first, Claim)
        await world.expire("r1")
        with raises(Fenced):
            await a.storage.commit("r1", [record(1)], None, 0)
        assert await stored_versions(a) == []
        assert await a.leases.owner("r1") == Owner("r1", None, None)
        again = await a.leases.claim("r1")
        assert isinstance(again, Claim) and again.epoch > first.epoch
        await a.storage.commit("r1", [record(1)], None, 0)


async def a_commit_without_a_claim_is_fenced(world: LeaseWorld) -> None:
    async with world.node("a") as a:
        await make_shared_room(a)
        with raises(Fenced, match="claim it first"):
            await a.storage.commit("r1", [record(1)], None, 0)
        assert await stored_versions(a) == []


async def a_stale_head_under_a_valid_claim_is_a_plain_conflict(world: LeaseWorld) -> None:
    async with world.node("a") as a:
        await make_shared_room(a)
        await a.leases.claim("r1")
        await a.storage.commit("r1", [record(1)], None, 0)
        try:
            await a.storage.commit("r1", [record(1, "again")], None, 0)
        except VersionConflict as exc:
            assert not isinstance(exc, Fenced), exc
        else:
            raise AssertionError("a commit on a stale head was stored")
        assert a.leases.claim_of("r1") is not None  # still the owner


async def a_fenced_commit_among_concurrent_ones_is_refused_alone(world: LeaseWorld) -> None:
    """Commits of several rooms may be written together (a group commit):
    the fenced one is refused alone, the others land."""
    async with world.node("a") as a, world.node("b") as b:
        for room in ("r1", "r2"):
            await make_shared_room(a, room)
            await a.leases.claim(room)
        await world.expire("r1")
        await b.leases.claim("r1")
        results = await asyncio.gather(
            a.storage.commit("r1", [record(1)], None, 0),
            a.storage.commit("r2", [record(1, room="r2")], None, 0),
            return_exceptions=True,
        )
        assert isinstance(results[0], Fenced) and results[1] is None, results
        assert await stored_versions(a) == [] and await stored_versions(a, "r2") == [1]


async def every_acknowledged_commit_survives_a_takeover_under_load(world: LeaseWorld) -> None:
    """a commits as fast as it can; meanwhile its lease runs out and b
    claims. Every commit a saw succeed is in what b loads, b's head is
    exactly a's last success, and a succeeds no more once fenced."""
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        await a.leases.claim("r1")
        acked: list[int] = []
        twenty = asyncio.Event()

        async def writer() -> None:
            v = 0
            while True:
                try:
                    await a.storage.commit("r1", [record(v + 1)], None, v)
                except Fenced:
                    return
                v += 1
                acked.append(v)
                if v == 20:
                    twenty.set()

        task = asyncio.get_running_loop().create_task(writer())
        try:
            await twenty.wait()
            await world.expire("r1")
            assert isinstance(await b.leases.claim("r1"), Claim)
            loaded = await load(b.storage)
        finally:
            await task  # ends when fenced
        assert loaded.v == acked[-1] and loaded.state["clock"] == acked[-1]
        assert await stored_versions(b) == acked == list(range(1, len(acked) + 1))


async def renewal_keeps_only_what_is_still_held(world: LeaseWorld) -> None:
    async with world.node("a") as a, world.node("b") as b:
        rooms = [f"r{i}" for i in range(1, 6)]
        for room in rooms:
            await make_shared_room(a, room)
            await a.leases.claim(room)
        await world.expire("r2")  # expired, nobody took it
        await world.expire("r3")
        assert isinstance(await b.leases.claim("r3"), Claim)  # taken
        await b.storage.delete_room("r4", AdminRecord("del-r4", "delete_room", {}, {}, 0))
        before = a.leases.claim_of("r1")
        assert before is not None
        assert await a.leases.renew(rooms) == {"r1", "r5"}
        assert set(a.leases.held()) == {"r1", "r5"}
        after = a.leases.claim_of("r1")
        assert after is not None and after.deadline >= before.deadline
        assert after.epoch == before.epoch  # a renewal is no new claim
        assert await a.leases.owner("r3") == Owner("r3", "b", b.leases.public_url)
        assert await a.leases.renew(["r2", "never-held"]) == set()


async def a_released_room_is_claimable_at_once_and_fences_its_old_owner(
    world: LeaseWorld,
) -> None:
    async with world.node("a") as a, world.node("b") as b:
        for room in ("r1", "r2"):
            await make_shared_room(a, room)
            await a.leases.claim(room)
        await a.leases.release(["r1"])
        assert a.leases.claim_of("r1") is None and a.leases.claim_of("r2") is not None
        assert await b.leases.owner("r1") == Owner("r1", None, None)
        assert isinstance(await b.leases.claim("r1"), Claim)
        with raises(Fenced):
            await a.storage.commit("r1", [record(1)], None, 0)
        assert await b.leases.owner("r2") == Owner("r2", "a", a.leases.public_url)


async def a_release_by_a_fenced_node_does_not_free_the_new_owners_room(
    world: LeaseWorld,
) -> None:
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        await a.leases.claim("r1")
        await world.expire("r1")
        await b.leases.claim("r1")
        await a.leases.release(["r1"])  # a still believes it holds r1, at its old epoch
        assert await b.leases.owner("r1") == _owner_of(b)


async def closing_a_node_releases_its_rooms(world: LeaseWorld) -> None:
    async with world.node("b") as b:
        async with world.node("c") as c:
            await make_shared_room(c)
            assert isinstance(await c.leases.claim("r1"), Claim)
        assert isinstance(await b.leases.claim("r1"), Claim)


async def a_room_deleted_elsewhere_fences_its_owner_with_room_deleted(world: LeaseWorld) -> None:
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(b)
        first = await a.leases.claim("r1")
        assert isinstance(first, Claim)
        await a.storage.commit("r1", [record(1)], None, 0)
        await b.storage.delete_room("r1", AdminRecord("del", "delete_room", {}, {}, 0))
        with raises(RoomDeleted):
            await a.storage.commit("r1", [record(2)], None, 1)
        assert a.leases.claim_of("r1") is None and await a.leases.owner("r1") is None
        # Created again under the same id: a new room, and epochs never reused.
        await make_shared_room(b, again="2")
        again = await b.leases.claim("r1")
        assert isinstance(again, Claim) and again.epoch > first.epoch
        assert await stored_versions(b) == []


async def a_room_recreated_under_an_old_claim_fences_it(world: LeaseWorld) -> None:
    """The old owner's claim names a room that no longer exists."""
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        await a.leases.claim("r1")
        await b.storage.delete_room("r1", AdminRecord("del", "delete_room", {}, {}, 0))
        await make_shared_room(b, again="2")
        with raises(Fenced):
            await a.storage.commit("r1", [record(1)], None, 0)


async def the_keeper_renews_and_reports_rooms_lost(world: LeaseWorld) -> None:
    async with world.node("a") as a, world.node("b") as b:
        lost: list[set[str]] = []
        keeper = LeaseKeeper(a.leases, lost.append)
        assert keeper.interval == a.leases.lease_seconds / RENEWALS_PER_LEASE
        for room in ("r1", "r2"):
            await make_shared_room(a, room)
            await a.leases.claim(room)
        assert await keeper.tick() == set() and lost == []
        await world.expire("r2")
        await b.leases.claim("r2")
        assert await keeper.tick() == {"r2"} and lost == [{"r2"}]
        assert set(a.leases.held()) == {"r1"}


# Every check of the lease contract, in order: each takes a fresh world.
LEASE_CHECKS: list[Callable[[LeaseWorld], Awaitable[None]]] = [
    one_winner_per_epoch_among_nodes_claiming_at_once,
    a_second_claim_before_expiry_gets_the_owners_url,
    a_claim_fences_the_previous_one_even_of_the_same_node,
    after_another_node_claims_the_old_owners_commit_stores_nothing,
    an_expired_lease_nobody_took_still_refuses_the_commit,
    a_commit_without_a_claim_is_fenced,
    a_stale_head_under_a_valid_claim_is_a_plain_conflict,
    a_fenced_commit_among_concurrent_ones_is_refused_alone,
    every_acknowledged_commit_survives_a_takeover_under_load,
    renewal_keeps_only_what_is_still_held,
    a_released_room_is_claimable_at_once_and_fences_its_old_owner,
    a_release_by_a_fenced_node_does_not_free_the_new_owners_room,
    closing_a_node_releases_its_rooms,
    a_room_deleted_elsewhere_fences_its_owner_with_room_deleted,
    a_room_recreated_under_an_old_claim_fences_it,
    the_keeper_renews_and_reports_rooms_lost,
]


async def check_leases(
    open_world: Callable[[], contextlib.AbstractAsyncContextManager[LeaseWorld]],
) -> None:
    """Run every check of the lease contract, each in a fresh world from
    `open_world()` (an async context manager: a new empty database, say).
    Raises AssertionError naming the first check that fails."""
    for check in LEASE_CHECKS:
        async with open_world() as world:
            try:
                await check(world)
            except AssertionError as exc:
                raise AssertionError(f"lease contract, {check.__name__}: {exc}") from exc


# --- the bus contract --------------------------------------------------------


class _CountingCodec:
    """A real codec that counts its encode calls."""

    def __init__(self, name: str) -> None:
        self.inner = CODECS[name]
        self.name, self.binary = self.inner.name, self.inner.binary
        self.calls = 0

    def encode(self, frame: dict[str, Any]) -> bytes | str:
        self.calls += 1
        return self.inner.encode(frame)

    def decode(self, data: bytes | str) -> Any:
        return self.inner.decode(data)


class _Sink:
    """A bus subscriber that keeps what it was handed."""

    def __init__(self, codec: Any, viewer: Any = None) -> None:
        self.codec = codec
        self.viewer = viewer
        self.closing = False
        self.stale = False
        self.got: list[tuple[bytes, int | None]] = []

    def deliver(self, data: bytes, v: int | None) -> None:
        assert isinstance(data, bytes), f"a sink is handed bytes, not {type(data).__name__}"
        self.got.append((data, v))

    def frames(self) -> list[Any]:
        return [self.codec.decode(d if self.codec.binary else d.decode()) for d, _ in self.got]


class _ByViewer:
    """A view: each viewer (a string) its own frame; 'broken' cannot be
    rendered; 'gm' is exempt from the cap."""

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame
        self.renders = 0

    def key(self, viewer: Any) -> Any:
        return viewer

    def render(self, viewer: Any) -> dict[str, Any]:
        self.renders += 1
        if viewer == "broken":
            raise ValueError("cannot render")
        return {**self.frame, "for": viewer}

    def exempt(self, key: Any) -> bool:
        return key == "gm"

    def needs_snapshot(self, viewer: Any) -> bool:
        return False


def _patch(v: int) -> dict[str, Any]:
    return {"t": "patch", "v": v, "ops": [["set", ["characters", "c1", "pv"], v]], "events": []}


def frames_reach_every_subscriber_in_publish_order(bus: RoomBus) -> None:
    sinks = [_Sink(CODECS[MSGPACK]), _Sink(CODECS[JSON]), _Sink(CODECS[MSGPACK])]
    for sink in sinks:
        bus.subscribe("r1", sink)
    for v in (1, 2, 3):
        bus.publish("r1", _patch(v))
    for sink in sinks:
        assert sink.frames() == [_patch(v) for v in (1, 2, 3)], sink.frames()
        assert [v for _, v in sink.got] == [1, 2, 3], "each frame's version goes with its bytes"
    assert bus.subscribers("r1") == 3


def each_frame_is_encoded_once_per_codec_and_view_class(bus: RoomBus) -> None:
    codecs = {name: _CountingCodec(name) for name in (MSGPACK, JSON)}
    sinks = [_Sink(codecs[name], viewer) for name in (MSGPACK, JSON) for viewer in "aab"]
    for sink in sinks:
        bus.subscribe("r1", sink)
    view = _ByViewer(_patch(1))
    bus.publish("r1", _patch(1), view)
    assert view.renders == 2, f"{view.renders} renders for two view classes"
    assert codecs[MSGPACK].calls == 2 and codecs[JSON].calls == 2
    for name in (MSGPACK, JSON):
        mine = [s for s in sinks if s.codec is codecs[name]]
        same = {id(s.got[0][0]) for s in mine if s.viewer == "a"}
        assert len(same) == 1, "every sink of one codec and view class: the very same bytes"
        assert [f["for"] for s in mine for f in s.frames()] == ["a", "a", "b"]
    bus.publish("r1", _patch(2))  # no view: one encoding per codec
    assert codecs[MSGPACK].calls == 3 and codecs[JSON].calls == 3


def rooms_and_unsubscribes_are_kept_apart(bus: RoomBus) -> None:
    codec = _CountingCodec(MSGPACK)
    one, two = _Sink(codec), _Sink(codec)
    bus.subscribe("r1", one)
    bus.subscribe("r2", two)
    bus.publish("r2", _patch(1))
    assert one.got == [] and len(two.got) == 1
    bus.unsubscribe("r2", two)
    bus.unsubscribe("r2", two)  # twice: harmless
    bus.publish("r2", _patch(2))
    assert len(two.got) == 1 and codec.calls == 1, "a room with no subscriber encodes nothing"
    assert bus.subscribers("r2") == 0 and bus.subscribers("r1") == 1


def closing_and_stale_sinks_get_nothing(bus: RoomBus) -> None:
    sinks = [_Sink(CODECS[MSGPACK]) for _ in range(3)]
    for sink in sinks:
        bus.subscribe("r1", sink)
    sinks[0].closing = True
    sinks[1].stale = True
    bus.publish("r1", _patch(1))
    assert [len(s.got) for s in sinks] == [0, 0, 1]


def past_the_cap_of_views_sinks_are_held_for_a_snapshot(bus: RoomBus) -> None:
    sinks = [_Sink(CODECS[JSON], viewer) for viewer in ("a", "b", "gm", "c", "a")]
    for sink in sinks:
        bus.subscribe("r1", sink)
    held: list[Any] = []
    view = _ByViewer(_patch(1))
    bus.publish("r1", _patch(1), view, max_keys=2, on_overflow=held.append)
    assert [len(s.got) for s in sinks] == [1, 1, 1, 0, 1], "the GM's exempt class is never held"
    assert held == [sinks[3]] and sinks[3].stale, "held: marked stale, handed to on_overflow"
    assert view.renders == 3


def a_render_error_skips_no_other_sink(bus: RoomBus) -> None:
    sinks = [_Sink(CODECS[JSON], viewer) for viewer in ("a", "broken", "b")]
    for sink in sinks:
        bus.subscribe("r1", sink)
    held: list[Any] = []
    bus.publish("r1", _patch(1), _ByViewer(_patch(1)), max_keys=8, on_overflow=held.append)
    assert [len(s.got) for s in sinks] == [1, 0, 1], [len(s.got) for s in sinks]
    assert sinks[2].frames()[0]["for"] == "b"
    assert held == [sinks[1]] and sinks[1].stale, "the class it could not render: a snapshot"


def a_failing_sink_skips_no_other_sink(bus: RoomBus) -> None:
    class Failing(_Sink):
        def deliver(self, data: bytes, v: int | None) -> None:
            raise OSError("connection gone")

    sinks = [_Sink(CODECS[MSGPACK]), Failing(CODECS[MSGPACK]), _Sink(CODECS[MSGPACK])]
    for sink in sinks:
        bus.subscribe("r1", sink)
    bus.publish("r1", _patch(1))
    bus.publish("r1", _patch(2))
    assert [len(s.got) for s in sinks] == [2, 0, 2]


BUS_CHECKS: list[Callable[[RoomBus], None]] = [
    frames_reach_every_subscriber_in_publish_order,
    each_frame_is_encoded_once_per_codec_and_view_class,
    rooms_and_unsubscribes_are_kept_apart,
    closing_and_stale_sinks_get_nothing,
    past_the_cap_of_views_sinks_are_held_for_a_snapshot,
    a_render_error_skips_no_other_sink,
    a_failing_sink_skips_no_other_sink,
]


def check_bus(make_bus: Callable[[], RoomBus]) -> None:
    """Run every check of the bus contract, each on a fresh bus from
    `make_bus()`. Raises AssertionError naming the first check that fails."""
    for check in BUS_CHECKS:
        try:
            check(make_bus())
        except AssertionError as exc:
            raise AssertionError(f"bus contract, {check.__name__}: {exc}") from exc
