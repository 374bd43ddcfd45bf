"""A room file is untrusted input (issue 19, item 1).

Each attack of the issue is a regression test: a file giving a user the
role `admin` (or `wizard`), a derived field or `mods` holding HTML, a name
that is a map, `clock: "soon"`, a crafted `["set", ["__proto__", ...]]` op
at or below the snapshot, a crafted inverse for undo. Each is refused by
`from_document` with its reason, and a live import stores nothing. In depth:
a room whose storage holds a user of role `admin` (written by something
other than the import) opens no session, let alone an admin one.

The fuzz test mutates valid room files: every mutant is refused with a
BadRoomFile (never another exception, which the admin would answer
`internal`), or imported into a room (MemoryStorage, then the room core)
whose state passes the schema and the invariants, whose users all join with
a room role, and whose log holds no forbidden path part.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rules
from rules import schema
from rules.model import ROLES
from rules.patch import FORBIDDEN_KEYS
from sync_server.clock import FakeClock
from sync_server.core.auth import RecentTokens, hash_token
from sync_server.core.reads import JoinRefused
from sync_server.core.room import RoomCore
from sync_server.storage import AdminRecord, RoomDump, replay, transfer
from sync_server.storage.memory import MemoryStorage
from tests.helpers.server import Closed, connect, connect_admin, create_table, running_server

# --- a valid room file to attack ----------------------------------------------------


async def _played(url: str) -> None:
    """A table with some play: damage, healing, an undo, a clock advance,
    a combat with someone dying and tended (many fields set)."""
    t = await create_table(url)
    gm = await t.connect("gm")
    p1, p2, npc = t.chars["c_p1"], t.chars["c_p2"], t.chars["c_npc"]
    await gm.ok("damage", {"char": p1, "amount": 5})
    await gm.ok("heal", {"char": p1, "amount": 2})
    await gm.ok("damage", {"char": p2, "amount": 3})
    await gm.ok("undo", {})
    await gm.ok("advance_clock", {"seconds": 60})
    await gm.ok("ability_damage", {"char": npc, "ability": "con", "amount": 4})
    await gm.ok("combat_start", {"order": [p1, p2, npc]})
    await gm.ok("damage", {"char": p2, "amount": 200})
    await gm.ok("queue_rolls", {"rolls": [15, 4]})
    await gm.close()


_DOCS: dict[str, dict[str, Any]] = {}


def played_doc(tmp_path: Path) -> dict[str, Any]:
    """The room file of a played table (made once for the module)."""
    if not _DOCS:

        async def make() -> dict[str, Any]:
            async with running_server(tmp_path / "played") as a:
                await _played(a.url)
                dump = await a.storage.export_room("r1")
            return json.loads(transfer.dumps(transfer.to_document(dump)))

        # in a thread: the callers may be inside a running event loop
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            _DOCS["r1"] = pool.submit(asyncio.run, make()).result()
    return copy.deepcopy(_DOCS["r1"])


def at_head(doc: dict[str, Any]) -> dict[str, Any]:
    """The file with its snapshot at its head (as an export just after a
    snapshot is): the whole log lies at or below the snapshot."""
    doc["snapshot"] = {"v": doc["head"], "state": copy.deepcopy(doc["state"])}
    return doc


def in_state(change: Any) -> Any:
    """Apply `change` to the file's state and to its snapshot (at head), so
    that the file is self-consistent except for what the attack plants."""

    def apply(doc: dict[str, Any]) -> None:
        change(doc["state"])
        at_head(doc)

    return apply


@pytest.fixture
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return played_doc(tmp_path_factory.mktemp("doc"))


def test_the_played_file_is_accepted_as_exported_and_at_head(doc: dict[str, Any]) -> None:
    transfer.from_document(copy.deepcopy(doc))
    transfer.from_document(at_head(copy.deepcopy(doc)))
    assert doc["snapshot"]["v"] < doc["head"]  # both halves of the log are walked


def _user(state: dict[str, Any], role: str) -> str:
    return next(uid for uid, u in state["users"].items() if u["role"] == role)


def _char(state: dict[str, Any]) -> dict[str, Any]:
    return next(iter(state["characters"].values()))


def _set_version(v: int, key: str, ops: list[Any]) -> Any:
    def apply(doc: dict[str, Any]) -> None:
        at_head(doc)
        doc["versions"][v - 1][key] = ops

    return apply


ATTACKS = [
    # a user made the server's admin (or a role no room has)
    (in_state(lambda s: s["users"][_user(s, "player")].update(role="admin")),
     "role must be one of gm, player, observer"),
    (in_state(lambda s: s["users"][_user(s, "observer")].update(role="wizard")),
     "role must be one of gm, player, observer"),
    # derived fields and mods are recomputed, never trusted
    (in_state(lambda s: _char(s).update(pe_max="<img src=x onerror=alert(1)>")),
     "pe_max must be an integer, not a string"),
    (in_state(lambda s: _char(s).update(pe_max=_char(s)["pe_max"] + 7)),
     "but pe_max_base, level and Constitution damage give"),
    (in_state(lambda s: _char(s)["mods"].update(dex="<script>alert(1)</script>")),
     "mods.dex must be an integer"),
    (in_state(lambda s: _char(s)["mods"].update(dex=9)),
     "mods are not what the abilities and their damage give"),
    # types
    (in_state(lambda s: _char(s).update(name={"first": "Aline"})),
     "name must be a string, not a map"),
    (in_state(lambda s: s.update(clock="soon")), "clock must be an integer, not a string"),
    (in_state(lambda s: s["users"].update({"__proto__": {"name": "x", "role": "gm"}})),
     "'__proto__' is not allowed as an id"),
    (in_state(lambda s: _char(s).update(extra=1)), "has an unknown field 'extra'"),
    # ops at or below the snapshot, served to a GM's sync
    (_set_version(4, "ops", [["set", ["__proto__", "polluted"], "yes"]]),
     "path part '__proto__' is not allowed"),
    (_set_version(2, "ops", [["set", ["constructor", "prototype", "polluted"], "yes"]]),
     "path part 'constructor' is not allowed"),
    # an inverse that undo would apply
    (_set_version(9, "inverse", [["set", ["__proto__", "polluted"], "yes"]]),
     "path part '__proto__' is not allowed"),
    (_set_version(9, "inverse", [["set", ["characters", "c1", "name"], {"html": "<b>"}]]),
     "name must be a string, not a map"),
    # ops below the snapshot that do not lead to it
    (_set_version(11, "ops", [["set", ["clock"], 61]]), "ops do not lead to the snapshot"),
    # a version's other fields
    (lambda d: d["versions"][0].update(op="create_room"), "must be a room command"),
    (lambda d: d["versions"][0].update(user={"id": "u1"}), "versions[0].user must be a user id"),
    (lambda d: d["versions"][0].update(id="a\nb"), "versions[0].id must be null or a string"),
    (lambda d: d["versions"][0].update(ts=float("nan")), "versions[0].ts must be a number"),
    # found by the fuzz test: a user entry naming a list (was a TypeError: internal)
    (lambda d: d["users"][0].update(user=["u1"]), "is not a user of the room's state"),
]  # fmt: skip


@pytest.mark.parametrize(("attack", "message"), ATTACKS)
def test_each_attack_of_the_issue_is_refused_with_its_reason(
    doc: dict[str, Any], attack: Any, message: str
) -> None:
    attack(doc)
    with pytest.raises(transfer.BadRoomFile, match=re.escape(message)):
        transfer.from_document(doc)


def test_nan_in_the_text_is_refused_as_not_json() -> None:
    with pytest.raises(transfer.BadRoomFile, match="not JSON"):
        transfer.loads('{"format": "vtt-sync-room", "created": NaN}')


# --- live: the import stores nothing; a stored `admin` opens nothing ---------------


async def _import(url: str, doc: dict[str, Any], room: str = "r1") -> dict[str, Any]:
    admin = await connect_admin(url)
    text = transfer.dumps(doc)
    parts = [text[i : i + 30_000] for i in range(0, len(text), 30_000)]
    base = {"room": room, "upload": "up", "parts": len(parts)}
    for i, part in enumerate(parts[:-1]):
        await admin.ok("import_room", {**base, "part": i, "data": part})
    reply = await admin.cmd("import_room", {**base, "part": len(parts) - 1, "data": parts[-1]})
    await admin.close()
    return reply


async def test_a_file_making_a_user_admin_is_refused_and_stores_nothing(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    in_state(lambda s: s["users"][_user(s, "player")].update(role="admin"))(doc)
    async with running_server(tmp_path / "b") as b:
        reply = await _import(b.url, doc)
        assert reply["code"] == "invalid_args", reply
        assert "role must be one of gm, player, observer" in reply["message"]
        assert not b.rooms.exists("r1") and await b.storage.room_ids() == set()


@pytest.mark.parametrize("role", ["admin", "wizard"])
async def test_a_stored_admin_role_opens_no_session_and_no_admin_command(
    tmp_path: Path, doc: dict[str, Any], role: str
) -> None:
    """Defence in depth: the room's storage says `admin` (or `wizard`),
    whatever wrote it; the user's hello is refused like a bad token, never
    welcomed as the server's admin (nor answered `internal`)."""
    in_state(lambda s: s["users"][_user(s, "player")].update(role=role))(doc)
    state = doc["state"]
    uid = _user(state, role)
    # a room at v0 whose snapshot is the crafted state, with a token we know
    dump = RoomDump("r1", 0, 0.0, 0, state, [], frozenset(), {uid: hash_token("T" * 43)})
    async with running_server(tmp_path / "b") as b:
        other = await create_table(b.url, room="other")
        # bypass the import's checks: straight into the storage
        await b.storage.import_room(dump, AdminRecord("raw", "import_room", {}, {}, 0.0))
        b.rooms.created("r1")
        with pytest.raises(Closed, match="bad token or room"):
            ws = await connect(b.url, "T" * 43, "r1")
            # (old main: welcomed as admin, and admin commands ran)
            await ws.cmd("delete_room", {"room": "other"})
        assert await b.rooms.has(other.room)


# --- the fuzz test ------------------------------------------------------------------

NASTY = st.sampled_from(
    ["__proto__", "constructor", "prototype", "admin", "wizard", "soon", "<b>x</b>", "",
     "a\nb", "\x1b[31m", -1, 0, 1, 21, 2**53, 2**70, -(2**70), 1.5, True, False, None, {}, [],
     {"__proto__": 1}, ["set", ["__proto__", "x"], 1], ["del", ["characters"]]]
)  # fmt: skip
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.text(max_size=8) | NASTY,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _places(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _places(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _places(v, (*path, i))
    return out


@st.composite
def mutants(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(base)
    if draw(st.booleans()):
        at_head(doc)
    for _ in range(draw(st.integers(1, 3))):
        places = _places(doc)
        path = draw(st.sampled_from(places[1:]))
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        how = draw(st.sampled_from(["replace", "replace", "delete", "add", "nudge", "append"]))
        if how == "replace":
            parent[last] = draw(JSON)
        elif how == "delete":
            del parent[last]
        elif how == "add" and isinstance(parent[last], dict):
            parent[last][draw(st.sampled_from(["__proto__", "x", "role", "pe_max"]))] = draw(JSON)
        elif how == "nudge" and type(parent[last]) is int:
            parent[last] += draw(st.sampled_from([-1, 1, 7, -(10**6), 10**6]))
        elif how == "append" and isinstance(parent[last], list):
            parent[last].append(draw(JSON))
        if draw(st.booleans()) and isinstance(doc.get("state"), dict):
            doc["snapshot"] = {"v": doc.get("head"), "state": copy.deepcopy(doc["state"])}
    return doc


def _load(dump: transfer.RoomDump) -> RoomCore:
    async def store_and_load() -> Any:
        storage = MemoryStorage()
        await storage.open()
        await storage.import_room(dump, AdminRecord("imp", "import_room", {}, {}, 0.0))
        return await storage.load_room(dump.room, 100, 1000)

    stored = asyncio.run(store_and_load())
    clock = FakeClock()
    return RoomCore(
        replay(stored, 100),
        dice=rules.ScriptedDice(),
        wall_clock=clock.time,
        new_token=lambda: "t",
        recent_tokens=RecentTokens(600.0, clock.monotonic),
    )


def _forbidden_in(ops: list[Any]) -> bool:
    return any(key in FORBIDDEN_KEYS for op in ops for key in op[1])


def test_mutated_room_files_are_refused_clearly_or_imported_sound(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = played_doc(tmp_path_factory.mktemp("fuzz"))

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutants(base))
    def check(doc: dict[str, Any]) -> None:
        try:
            dump, state, _ = transfer.from_document(doc)
        except transfer.BadRoomFile as exc:
            assert str(exc).strip()  # a reason, never an empty refusal
            return
        assert schema.state_problems(state) == []
        core = _load(dump)
        assert core.state == state and rules.violations(core.room) == []
        for uid, user in state["users"].items():
            assert user["role"] in ROLES
            try:
                _frame, role, _epoch = core.join(uid, None)
            except JoinRefused:  # pragma: no cover - a valid room joins every user
                raise AssertionError(f"user {uid} of an imported room cannot join") from None
            assert role in ROLES
        for record in dump.versions:
            assert not _forbidden_in(record.ops) and not _forbidden_in(record.inverse)
            assert all(schema.op_problems(op) == [] for op in record.ops + record.inverse)

    check()
