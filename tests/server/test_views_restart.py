"""Views across a restart and an import (docs/views.md, "After a restart").

The property of tests/rules/test_views.py, through the server's room core
and real storage: random command sequences (random `shown` changes, owners,
additions, removals, undos) run in a `RoomCore` whose every batch is
committed to SQLite; at a random point the room is "restarted" (storage
closed and opened again, the room loaded and replayed into a new core),
and the commands go on. Then, for every viewer (GM, admin, three players,
two observers) and resumes from several versions:

- the patches a resume gets after the restart are exactly the ones that
  viewer got live, which are `rules.view_patch` of that viewer;
- a mirror built from them equals the viewer's view of the room;
- the same holds after the room is exported and imported into a fresh
  server (the room file carries no views: the import rebuilds them), and
  after a data directory from before views were stored is migrated.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import random
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import attrs
import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rules
from rules import SeededDice, Viewer, apply_ops, view_patch
from sync_server.clock import FakeClock
from sync_server.core.auth import RecentTokens, hash_token
from sync_server.core.inputs import CommandIn, StaticLog
from sync_server.core.limits import Limits
from sync_server.core.room import RoomCore
from sync_server.core.views import version_views
from sync_server.storage import AdminRecord, LoadedRoom, replay, transfer
from sync_server.storage.memory import MemoryStorage
from sync_server.storage.sqlite import DB_FILE, SqliteStorage
from sync_server.testing.server import room_ops
from tests.helpers.table import SHEET
from tests.rules.test_views import VIEW_COMMANDS, aim, all_viewers, secret_table

ROOM = "r1"
ACTORS = st.sampled_from(["gm", "gm", "gm", "p1", "p2", "obs"])
# Small, so that runs cross snapshots: views are rebuilt from the latest
# one forwards and backwards.
LIMITS = Limits(snapshot_every_versions=7)


def new_core(loaded: LoadedRoom, dice: rules.Dice, clock: FakeClock) -> RoomCore:
    numbers = itertools.count(1)
    return RoomCore(
        loaded,
        dice=dice,
        wall_clock=clock.time,
        new_token=lambda: f"token-{next(numbers)}",
        recent_tokens=RecentTokens(600.0, clock.monotonic),
        limits=LIMITS,
    )


async def load(storage: Any, dice: rules.Dice, clock: FakeClock) -> RoomCore:
    stored = await storage.load_room(ROOM, LIMITS.recent_patches_in_memory, 100)
    loaded = replay(stored, LIMITS.recent_patches_in_memory)
    # What undo would revert, read with the room as the host does (affordances).
    loaded = attrs.evolve(loaded, undo=await storage.undo_target(ROOM))
    return new_core(loaded, dice, clock)


def in_any_order(patch: dict[str, Any]) -> dict[str, Any]:
    """A patch's room ops sorted by path. A view's ops are a diff, so they
    touch disjoint paths and their order says nothing (applying them in any
    order gives the same view: `check_resumes` checks that too); an import
    works a version's views out again from past states it rebuilds with
    the log's inverse ops (`backfill_views`), where a character put back
    comes last in the dict, so it may list the same ops in another order."""
    p = room_ops(patch)
    return {**p, "ops": sorted(p["ops"], key=lambda op: repr(op[1]))}


def check_resumes(
    core: RoomCore,
    viewers: dict[str, Viewer],
    live: dict[str, list[dict[str, Any]]],
    views_at: list[dict[str, dict[str, Any]]],
    where: str,
) -> None:
    """Every viewer resuming from several versions gets what they got live,
    and ends with their view of the room. What they may do (affordances) is
    not stored: patches read from the log carry the room's ops only, and
    the last one sets the viewer's affordances whole."""
    head = core.v
    for since in sorted({0, head // 2, max(0, head - 3), head}):
        for k, v in viewers.items():
            got = core.patches_after(since, v)
            assert got is not None
            want = [in_any_order(p) for p in live[k][since:]]
            assert [in_any_order(p) for p in got] == want, (where, k, since)
            mirror = copy.deepcopy(views_at[since][k])
            for patch in got:
                apply_ops(mirror, copy.deepcopy(patch["ops"]))
            assert mirror == core.view(v), (where, k, since)


async def run(commands: list[Any], tended: bool, seed: int, restart_at: int, data: Path) -> None:
    t = secret_table(tended)
    clock = FakeClock()
    dice = SeededDice(seed)
    rng = random.Random(seed)
    actor_of = {"gm": t.gm, "p1": t.p1, "p2": t.p2, "obs": t.obs}
    viewers = all_viewers(t)
    storage = SqliteStorage(data, synchronous="OFF")
    await storage.open()
    state0 = t.room.to_dict()
    admin = AdminRecord("a-1", "create_room", {}, {}, 0.0)
    await storage.create_room(ROOM, copy.deepcopy(state0), t.gm.user, hash_token("x" * 40), admin)
    core = new_core(LoadedRoom(ROOM, 0, state0, [], []), dice, clock)
    # What each viewer got live, per version, and their view at each version.
    live: dict[str, list[dict[str, Any]]] = {k: [] for k in viewers}
    views_at = [{k: copy.deepcopy(core.view(v)) for k, v in viewers.items()}]
    ids = itertools.count(1)

    def pick(items: list[str]) -> str:
        return rng.choice(items) if items else "c9"

    added = 0
    for i, ((op, args), who, aimed) in enumerate(commands):
        if i == restart_at:
            await storage.close()
            storage = SqliteStorage(data, synchronous="OFF")
            await storage.open()
            core = await load(storage, dice, clock)
            check_resumes(core, viewers, live, views_at, "restart")
        if aimed:
            args = aim(op, args, core.room, pick)
        if op == "add_character":
            added += 1
            args = {**SHEET, **args, "name": f"Secret-Nouveau-{added}"}
        actor = t.gm if op == "undo" else actor_of[who]
        reader = None
        if op == "undo":  # as the host reads it: the target, and the one after it
            target = await storage.undo_target(ROOM)
            after = None if target is None else await storage.undo_target(ROOM, target.v)
            reader = StaticLog(target, after)
        before = core.state
        d = core.evaluate(CommandIn(actor, 0, f"c-{next(ids)}", op, args), reader)
        if d.record is None:
            core.commit()
            continue
        await storage.commit(ROOM, core.pending, core.snapshot_due(), core.base_v)
        core.commit()
        after = core.state
        for k, v in viewers.items():
            frame = d.patch if d.view is None else d.view.render(v)
            assert frame is not None
            if not v.sees_all:  # the stored views give what the rules give this viewer
                ref = view_patch(before, after, d.record.ops, d.record.events, v)
                mine = room_ops(frame)
                assert (mine["ops"], mine["events"]) == tuple(ref), (k, op)
            live[k].append(frame)
        views_at.append({k: copy.deepcopy(core.view(v)) for k, v in viewers.items()})
    await storage.close()
    storage = SqliteStorage(data, synchronous="OFF")
    await storage.open()
    core = await load(storage, dice, clock)
    check_resumes(core, viewers, live, views_at, "end")

    # An export, and its import into a fresh server.
    dump = await storage.export_room(ROOM)
    assert dump is not None
    text = transfer.dumps(transfer.to_document(dump))
    assert all("views" not in item for item in transfer.loads(text)["versions"])
    imported, _, _ = transfer.from_document(transfer.loads(text))
    fresh = MemoryStorage()
    await fresh.open()
    await fresh.import_room(imported, AdminRecord("a-2", "import_room", {}, {}, 0.0))
    check_resumes(await load(fresh, dice, clock), viewers, live, views_at, "import")
    await storage.close()

    # A database from before views were stored: no views, schema 2.
    as_schema_2(data / DB_FILE)
    storage = SqliteStorage(data, synchronous="OFF")
    await storage.open()
    check_resumes(await load(storage, dice, clock), viewers, live, views_at, "migrated")
    await storage.close()


# The versions table of schema 2 (0.2.0): a column per field, no views.
SCHEMA_2_VERSIONS = (
    "CREATE TABLE versions (room TEXT NOT NULL, v INTEGER NOT NULL, cmd_id TEXT,"
    " user TEXT NOT NULL, op TEXT NOT NULL, args BLOB NOT NULL, ops BLOB NOT NULL,"
    " inverse BLOB NOT NULL, events BLOB NOT NULL, result BLOB NOT NULL,"
    " undoable INTEGER NOT NULL, undone INTEGER NOT NULL DEFAULT 0, undoes INTEGER,"
    " ts REAL NOT NULL, PRIMARY KEY (room, v)) WITHOUT ROWID",
    "CREATE UNIQUE INDEX versions_cmd ON versions (room, user, cmd_id) WHERE cmd_id IS NOT NULL",
    "CREATE INDEX versions_undo ON versions (room, v) WHERE undoable = 1 AND undone = 0",
)


def as_schema_2(path: Path) -> None:
    """Rewrite today's versions table (one blob per version) as schema 2's."""
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT room, v, cmd_id, user, undo, ts, result, rec FROM versions"
    ).fetchall()
    conn.execute("DROP INDEX versions_cmd")
    conn.execute("DROP TABLE versions")
    for statement in SCHEMA_2_VERSIONS:
        conn.execute(statement)
    for room, v, cmd_id, user, undo, ts, result, rec in rows:
        f = msgpack.unpackb(rec, strict_map_key=False)
        conn.execute(
            "INSERT INTO versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (room, v, cmd_id, user, f["op"], msgpack.packb(f["args"]), msgpack.packb(f["ops"]),
             msgpack.packb(f["inverse"]), msgpack.packb(f["events"]), result,
             int(f["undoable"]), int(f["undoable"] and not undo), f["undoes"], ts),
        )  # fmt: skip
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    conn.commit()
    conn.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(VIEW_COMMANDS, ACTORS, st.booleans()), min_size=10, max_size=40),
    st.booleans(),
    st.integers(0, 2**32),
    st.integers(0, 40),
)
def test_views_survive_a_restart_an_import_and_a_migration(commands, tended, seed, restart_at):
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(commands, tended, seed, restart_at, Path(tmp)))


def test_a_stored_view_keeps_the_secret(tmp_path) -> None:
    """The stored views of a version about a hidden character hold nothing
    of it for the public, and the GM's patch is the plain one."""
    t = secret_table(False)
    before = t.room.to_dict()
    out = rules.apply(t.room, "damage", {"char": "c4", "amount": 3}, t.gm, SeededDice(1))
    after = out.room.to_dict(since=(t.room, before))
    views = version_views(before, after, rules.diff(before, after), out.events)
    assert views is not None
    assert views["public"] == [[], []]
    assert b"Secret-Liche" not in msgpack.packb(views)
