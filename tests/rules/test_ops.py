"""Operations (docs/operations.md, "Operations"; docs/protocol.md, "Refusals"): argument
validation, not_found, permissions for every op, the order of the checks,
GM corrections, removals, and the user commands.

Every refusal asserts its class (hence its code) and that the room is unchanged.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rules import (
    OPS,
    Actor,
    Conflict,
    Forbidden,
    InvalidArgs,
    NotFound,
    RuleBroken,
    UnknownOp,
    apply,
    authorize_undo,
)
from rules.validate import MAX_ADVANCE
from tests.helpers.table import SHEET, Table
from tests.rules.rulekit import ch, kill, ok, refused, state

# ---------------------------------------------------------------- a world where every op is valid


def world() -> tuple[Table, dict[str, str]]:
    """Player 1 owns everyone: A dying, B conscious and the current (only)
    combatant, S stable tended by H, T stable untended, R resting, C idle."""
    t = Table()
    ids = {n: t.add(n, owner=t.p1) for n in "ABSHTRC"}
    t.down(ids["A"])
    t.stabilised(ids["S"])
    t.stabilised(ids["T"])
    t.do("tend", char=ids["H"], patient=ids["S"])
    t.do("rest", char=ids["R"], kind="short")
    t.do("combat_start", order=[ids["B"]])
    return t, ids


# op -> (args with character names, role) ; names are mapped to ids.
COMMANDS: dict[str, tuple[dict[str, Any], str]] = {
    "update_room": ({"name": "Table du vendredi"}, "G"),
    "add_user": ({"name": "Noé", "role": "player"}, "G"),
    "remove_user": ({"user": "@p2"}, "G"),
    "rotate_token": ({"user": "@p2"}, "G"),
    "add_character": ({**SHEET, "name": "Nouveau"}, "G"),
    "update_character": ({"char": "C", "set": {"name": "Cé"}}, "G"),
    "remove_character": ({"char": "C"}, "G"),
    "combat_start": ({"order": ["C"]}, "G"),
    "combat_end": ({}, "G"),
    "set_order": ({"order": ["C", "B"]}, "G"),
    "roll_initiative": ({"chars": ["B"]}, "G"),
    "end_turn": ({"char": "B"}, "O"),
    "advance_clock": ({"seconds": 1}, "G"),
    "damage": ({"char": "C", "amount": 1}, "G"),
    "heal": ({"char": "C", "amount": 1}, "G"),
    "first_aid": ({"char": "C", "patient": "A"}, "O"),
    "stabilize": ({"char": "A"}, "O"),
    "stay_in_fight": ({"char": "T"}, "O"),
    "tend": ({"char": "C", "patient": "T"}, "O"),
    "untend": ({"patient": "S"}, "O"),
    "rest": ({"char": "C", "kind": "night"}, "O"),
    "stop_rest": ({"char": "R"}, "O"),
    "ability_damage": ({"char": "C", "ability": "str", "amount": 1}, "G"),
    "ability_restore": ({"char": "C", "ability": "str", "amount": 1}, "G"),
    "queue_rolls": ({"rolls": [7]}, "G"),
}


def real_args(t: Table, ids: dict[str, str], args: dict[str, Any]) -> dict[str, Any]:
    def one(v: Any) -> Any:
        if isinstance(v, str) and v.startswith("@"):
            return getattr(t, v[1:]).user
        if isinstance(v, str) and v in ids:
            return ids[v]
        if isinstance(v, list):
            return [one(x) for x in v]
        return v

    return {k: one(v) for k, v in args.items()}


def test_every_op_is_in_the_permission_table():
    """docs/operations.md, "Operations": every room op of the engine is covered here."""
    assert set(COMMANDS) == set(OPS)


@pytest.mark.parametrize("op", sorted(COMMANDS))
@pytest.mark.parametrize("who", ["p2", "obs"])
def test_ops_forbidden_for_a_player_not_owner_and_for_an_observer(op, who):
    """docs/operations.md, "Operations": G ops are the GM's; O ops the GM's or the owner's of
    `char`; untend the GM's or the owner's of the patient or its healer.
    Player 2 owns nothing here; an observer only watches (`forbidden`)."""
    t, ids = world()
    args, _role = COMMANDS[op]
    refused(t, Forbidden, op, by=getattr(t, who), **real_args(t, ids, args))
    assert t.dice.used == []


@pytest.mark.parametrize("op", sorted(COMMANDS))
def test_ops_owner_may_send_o_ops_and_not_g_ops(op):
    """docs/operations.md, "Operations": the owner of the acting character may send the O ops
    (accepted here), not the G ops (`forbidden`)."""
    t, ids = world()
    args, role = COMMANDS[op]
    if role == "G":
        refused(t, Forbidden, op, by=t.p1, **real_args(t, ids, args))
    else:
        t.dice.push(15)
        t.do(op, by=t.p1, **real_args(t, ids, args))
        ok(t)


@pytest.mark.parametrize("op", sorted(COMMANDS))
def test_ops_gm_may_send_every_op(op):
    """docs/operations.md, "Operations": the GM may send every room op."""
    t, ids = world()
    args, _role = COMMANDS[op]
    if op == "combat_start":
        t.do("combat_end")
    t.dice.push(15)
    t.do(op, **real_args(t, ids, args))
    ok(t)


def test_ops_undo_is_the_gms():
    """docs/operations.md, "Operations": undo is the GM's (the server replays the log; the engine
    only authorises it and does not know it as an op)."""
    t = Table()
    authorize_undo(t.gm)
    for actor in (t.p1, t.obs):
        with pytest.raises(Forbidden):
            authorize_undo(actor)
    refused(t, UnknownOp, "undo")


def test_ops_apply_never_mutates_its_input_room():
    """The engine is pure: an accepted command returns a new room and leaves
    the one it was given as it was."""
    t, ids = world()
    room = t.room
    before = copy.deepcopy(room.to_dict())
    t.dice.push(15)
    t.do("first_aid", char=ids["C"], patient=ids["A"])
    t.do("advance_clock", seconds=60)
    t.do("end_turn", char=ids["B"])
    assert room.to_dict() == before
    assert t.room is not room


# ---------------------------------------------------------------- unknown_op, invalid_args


@pytest.mark.parametrize("op", ["fly", "", "Damage", "undo", "create_room", "delete_room", None, 3])
def test_ops_unknown_op(op):
    """docs/operations.md, "Operations": an op the engine does not know is `unknown_op` (undo and
    the admin ops are the server's)."""
    t = Table()
    before = state(t)
    with pytest.raises(UnknownOp):
        apply(t.room, op, {}, t.gm, t.dice)
    assert state(t) == before


@pytest.mark.parametrize("args", [None, [], "char=c1", 3, ("char", "c1")])
def test_ops_args_must_be_a_map(args):
    """docs/operations.md, "Operations": args that are not a map are `invalid_args`."""
    t = Table()
    t.add()
    before = state(t)
    with pytest.raises(InvalidArgs):
        apply(t.room, "damage", args, t.gm, t.dice)
    assert state(t) == before


@pytest.mark.parametrize("args", [{1: "c1"}, {("char",): "c1"}, {None: 1}])
def test_ops_args_keys_must_be_known_strings(args):
    """docs/operations.md, "Operations": map keys are strings; an unknown key
    is an extra argument."""
    t = Table()
    t.add()
    before = state(t)
    with pytest.raises(InvalidArgs):
        apply(t.room, "damage", {"char": "c1", "amount": 1, **args}, t.gm, t.dice)
    assert state(t) == before


BIG = 2**64 - 1
INVALID: list[tuple[str, dict[str, Any]]] = [
    # missing / extra
    ("damage", {"amount": 1}),
    ("damage", {"char": "A"}),
    ("damage", {"char": "A", "amount": 1, "lethal": True}),
    ("damage", {"char": "A", "amount": 1, "who": "gm"}),
    ("combat_end", {"now": True}),
    ("heal", {}),
    # mistyped ints: bools, floats, strings, None, out of range
    ("damage", {"char": "A", "amount": True}),
    ("damage", {"char": "A", "amount": False}),
    ("damage", {"char": "A", "amount": 1.0}),
    ("damage", {"char": "A", "amount": 2.5}),
    ("damage", {"char": "A", "amount": float("nan")}),
    ("damage", {"char": "A", "amount": float("inf")}),
    ("damage", {"char": "A", "amount": "3"}),
    ("damage", {"char": "A", "amount": None}),
    ("damage", {"char": "A", "amount": -1}),
    ("damage", {"char": "A", "amount": 1_000_001}),
    ("damage", {"char": "A", "amount": BIG}),
    ("damage", {"char": "A", "amount": -BIG}),
    ("damage", {"char": "A", "amount": [1]}),
    # mistyped bools
    ("damage", {"char": "A", "amount": 1, "nonlethal": 1}),
    ("damage", {"char": "A", "amount": 1, "nonlethal": "true"}),
    ("damage", {"char": "A", "amount": 1, "pv_only": 0}),
    ("heal", {"char": "A", "amount": 1, "stabilize": "yes"}),
    # ids
    ("damage", {"char": None, "amount": 1}),
    ("damage", {"char": 1, "amount": 1}),
    ("damage", {"char": "", "amount": 1}),
    ("damage", {"char": "x" * 65, "amount": 1}),
    ("damage", {"char": "c\n1", "amount": 1}),
    ("first_aid", {"char": "B", "patient": 2}),
    ("remove_user", {"user": None}),
    ("rotate_token", {"user": 5}),
    # choices
    ("rest", {"char": "A", "kind": "nap"}),
    ("rest", {"char": "A", "kind": None}),
    ("rest", {"char": "A", "kind": ["short"]}),
    ("ability_damage", {"char": "A", "ability": "luck", "amount": 1}),
    ("ability_damage", {"char": "A", "ability": "STR", "amount": 1}),
    ("ability_damage", {"char": "A", "ability": "str", "amount": -2}),
    ("ability_restore", {"char": "A", "ability": "con", "amount": 1.0}),
    ("add_user", {"name": "N", "role": "admin"}),
    ("add_user", {"name": "N", "role": True}),
    ("add_user", {"name": None, "role": "player"}),
    ("add_user", {"name": "", "role": "player"}),
    ("add_user", {"name": "x" * 101, "role": "player"}),
    ("add_user", {"name": "a\x00b", "role": "player"}),
    # clock and turns
    ("advance_clock", {}),
    ("advance_clock", {"seconds": 0}),
    ("advance_clock", {"seconds": 1.0}),
    ("advance_clock", {"seconds": True}),
    ("advance_clock", {"seconds": MAX_ADVANCE + 1}),
    ("advance_clock", {"seconds": BIG}),
    ("end_turn", {"char": "A", "round": 0}),
    ("end_turn", {"char": "A", "round": True}),
    ("end_turn", {"char": "A", "round": 2**31 + 1}),
    ("end_turn", {"char": "A", "round": 1.0}),
    ("end_turn", {"round": 1}),
    ("combat_start", {"order": []}),
    ("combat_start", {"order": "A"}),
    ("combat_start", {"order": [1]}),
    ("combat_start", {"order": [None]}),
    ("combat_start", {"order": ["A"] * 201}),
    ("update_room", {"round_seconds": 0}),
    ("update_room", {"round_seconds": 3601}),
    ("update_room", {"round_seconds": 6.0}),
    ("update_room", {"name": ""}),
    # add_character's sheet
    ("add_character", {**SHEET, "name": "N", "level": 0}),
    ("add_character", {**SHEET, "name": "N", "level": 101}),
    ("add_character", {**SHEET, "name": "N", "level": 3.0}),
    ("add_character", {**SHEET, "name": "N", "pv_max": 0}),
    ("add_character", {**SHEET, "name": "N", "pe_max": -1}),
    ("add_character", {**SHEET, "name": "N", "pp_max": BIG}),
    ("add_character", {**SHEET, "name": "N", "pv": -1}),
    ("add_character", {**SHEET, "name": "N", "medicine": 1001}),
    ("add_character", {**SHEET, "name": "N", "medicine": True}),
    ("add_character", {**SHEET, "name": "N", "owner": 5}),
    ("add_character", {**SHEET, "name": "N", "id": ""}),
    ("add_character", {**SHEET, "name": "N", "seq": 1}),
    ("add_character", {**SHEET, "name": "N", "abilities": {**SHEET["abilities"], "luck": 3}}),
    ("add_character", {**SHEET, "name": "N", "abilities": {"str": 10}}),
    ("add_character", {**SHEET, "name": "N", "abilities": {**SHEET["abilities"], "str": 101}}),
    ("add_character", {**SHEET, "name": "N", "abilities": {**SHEET["abilities"], "str": -1}}),
    ("add_character", {**SHEET, "name": "N", "abilities": {**SHEET["abilities"], "str": True}}),
    ("add_character", {**SHEET, "name": "N", "abilities": [10, 10, 10, 10, 10, 10]}),
    ("add_character", {k: v for k, v in SHEET.items() if k != "level"} | {"name": "N"}),
    # update_character's corrections
    ("update_character", {"char": "A", "set": {}}),
    ("update_character", {"char": "A", "set": None}),
    ("update_character", {"char": "A", "set": {"seq": 9}}),
    ("update_character", {"char": "A", "set": {"stable_since": 0}}),
    ("update_character", {"char": "A", "set": {"condition": "asleep"}}),
    ("update_character", {"char": "A", "set": {"pv": -1}}),
    ("update_character", {"char": "A", "set": {"pv": 1.0}}),
    ("update_character", {"char": "A", "set": {"pv_max": 0}}),
    ("update_character", {"char": "A", "set": {"level": 0}}),
    ("update_character", {"char": "A", "set": {"abilities": {"str": 1.5}}}),
    ("update_character", {"char": "A", "set": {"ability_damage": {"luck": 1}}}),
    ("update_character", {"char": "A", "set": {"name": None}}),
    # first_aid's roll
    ("first_aid", {"char": "B", "patient": "A", "roll": 0}),
    ("first_aid", {"char": "B", "patient": "A", "roll": 21}),
    ("first_aid", {"char": "B", "patient": "A", "roll": 10.0}),
]


@pytest.mark.parametrize(
    ("op", "args"), INVALID, ids=[f"{o}-{i}" for i, (o, _) in enumerate(INVALID)]
)
def test_ops_invalid_args(op, args):
    """docs/operations.md, "Operations": missing, extra, mistyped (a bool or float for an int, None
    for a required value) or out-of-range arguments are `invalid_args`."""
    t = Table()
    ids = {"A": t.add("A"), "B": t.add("B")}
    t.down(ids["A"])
    refused(t, InvalidArgs, op, **real_args(t, ids, args))


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("damage", {"char": "A", "amount": 3, "nonlethal": None, "pv_only": None}),
        ("heal", {"char": "A", "amount": 3, "stabilize": None}),
        ("end_turn", {"char": "A", "round": None}),
        ("add_character", {**SHEET, "name": "N", "owner": None, "id": None, "pv": None}),
    ],
)
def test_ops_null_optional_argument_means_absent(op, args):
    """Engine choice: an optional argument given as null takes its default."""
    t = Table()
    ids = {"A": t.add("A")}
    t.do("combat_start", order=[ids["A"]])
    t.do(op, **real_args(t, ids, args))
    ok(t)


def test_ops_update_room_needs_something_to_change():
    """Engine choice: update_room with none of name, round_seconds, skip_dead
    is `invalid_args`; with them, they change, and the event says all three."""
    t = Table()
    refused(t, InvalidArgs, "update_room")
    t.do("update_room", name="Autre table", round_seconds=10)
    assert (t.room.name, t.room.round_seconds) == ("Autre table", 10)
    assert t.events == [
        {"kind": "room", "name": "Autre table", "round_seconds": 10, "skip_dead": True}
    ]


# ---------------------------------------------------------------- not_found

NOT_FOUND: list[tuple[str, dict[str, Any]]] = [
    ("damage", {"char": "zz", "amount": 1}),
    ("heal", {"char": "zz", "amount": 1}),
    ("first_aid", {"char": "zz", "patient": "A"}),
    ("first_aid", {"char": "B", "patient": "zz"}),
    ("stabilize", {"char": "zz"}),
    ("stay_in_fight", {"char": "zz"}),
    ("tend", {"char": "zz", "patient": "A"}),
    ("tend", {"char": "B", "patient": "zz"}),
    ("untend", {"patient": "zz"}),
    ("rest", {"char": "zz", "kind": "short"}),
    ("stop_rest", {"char": "zz"}),
    ("ability_damage", {"char": "zz", "ability": "str", "amount": 1}),
    ("ability_restore", {"char": "zz", "ability": "str", "amount": 1}),
    ("update_character", {"char": "zz", "set": {"pv": 1}}),
    ("update_character", {"char": "B", "set": {"owner": "u99"}}),
    ("remove_character", {"char": "zz"}),
    ("end_turn", {"char": "zz"}),
    ("combat_start", {"order": ["B", "zz"]}),
    ("remove_user", {"user": "u99"}),
    ("rotate_token", {"user": "u99"}),
    ("add_character", {**SHEET, "name": "N", "owner": "u99"}),
]


@pytest.mark.parametrize(
    ("op", "args"), NOT_FOUND, ids=[f"{o}-{i}" for i, (o, _) in enumerate(NOT_FOUND)]
)
def test_ops_not_found(op, args):
    """docs/operations.md, "Operations": a character or user named and not in the room is
    `not_found` (ids are case-sensitive: "b" is not "B")."""
    t = Table()
    ids = {"A": t.add("A", id="A"), "B": t.add("B", id="B")}
    refused(t, NotFound, op, **real_args(t, ids, args))


def test_ops_not_found_ids_are_exact():
    """not_found: ids match exactly (no case folding, no trimming)."""
    t = Table()
    t.add("A", id="Ab")
    for cid in ("ab", "AB", " Ab", "Ab "):
        refused(t, NotFound, "damage", char=cid, amount=1)


# ---------------------------------------------------------------- check order


def _order_table():
    t = Table()
    ids = {n: t.add(n, owner=t.p1, id=n) for n in ("A", "B", "D")}
    kill(t, ids["D"])
    t.do("combat_start", order=["A", "B"])
    return t


ORDER_CASES = [
    # invalid_args before not_found
    ("gm", "damage", {"char": "zz", "amount": -1}, InvalidArgs),
    ("gm", "first_aid", {"char": "zz", "patient": "A", "roll": 99}, InvalidArgs),
    # invalid_args before forbidden
    ("obs", "damage", {"char": "A", "amount": 1.5}, InvalidArgs),
    ("p2", "first_aid", {"char": "B", "patient": "A", "roll": 0}, InvalidArgs),
    ("p2", "stabilize", {"char": "A", "extra": 1}, InvalidArgs),
    # invalid_args before conflict and rule
    ("gm", "end_turn", {"char": "B", "round": 0}, InvalidArgs),
    ("gm", "stabilize", {"char": "D", "now": True}, InvalidArgs),
    # not_found before forbidden
    ("obs", "damage", {"char": "zz", "amount": 1}, NotFound),
    ("p2", "stabilize", {"char": "zz"}, NotFound),
    ("p2", "first_aid", {"char": "B", "patient": "zz"}, NotFound),
    ("p2", "end_turn", {"char": "zz", "round": 9}, NotFound),
    # not_found before rule (D6)
    ("gm", "first_aid", {"char": "D", "patient": "zz"}, NotFound),
    ("gm", "tend", {"char": "zz", "patient": "D"}, NotFound),
    # forbidden before conflict
    ("p2", "end_turn", {"char": "B", "round": 7}, Forbidden),
    ("obs", "end_turn", {"char": "A", "round": 2}, Forbidden),
    # forbidden before rule
    ("p2", "stabilize", {"char": "A"}, Forbidden),
    ("p2", "stabilize", {"char": "D"}, Forbidden),
    ("obs", "damage", {"char": "D", "amount": 1}, Forbidden),
    ("p1", "combat_start", {"order": ["A"]}, Forbidden),
    # conflict before rule
    ("gm", "add_character", {**SHEET, "name": "N", "id": "A", "pv": 99}, Conflict),
    # not_found before conflict
    ("gm", "add_character", {**SHEET, "name": "N", "id": "A", "owner": "u99"}, NotFound),
    # not_found before rule (corrections)
    ("gm", "update_character", {"char": "A", "set": {"owner": "u99", "pv": 0}}, NotFound),
]


@pytest.mark.parametrize(
    ("who", "op", "args", "exc"),
    ORDER_CASES,
    ids=[f"{c[3].code}-{c[1]}-{i}" for i, c in enumerate(ORDER_CASES)],
)
def test_ops_check_order(who, op, args, exc):
    """docs/protocol.md, "Refusals": codes in the order they are checked: invalid_args,
    not_found, forbidden, conflict, rule; the first that applies wins."""
    t = _order_table()
    refused(t, exc, op, by=getattr(t, who), **args)


ID_INSIDE_ARGS_CASES = [
    # a player naming a missing character or user: not_found comes before forbidden
    ("p1", "combat_start", {"order": ["zz"]}, NotFound, False),
    ("p1", "remove_user", {"user": "u99"}, NotFound, False),
    ("p1", "rotate_token", {"user": "u99"}, NotFound, False),
    ("obs", "add_character", {**SHEET, "name": "N", "owner": "u99"}, NotFound, False),
    ("p1", "update_character", {"char": "A", "set": {"owner": "u99"}}, NotFound, False),
    # not_found before rule: a dead combatant (D6), a duplicate, a running combat
    ("gm", "combat_start", {"order": ["D", "zz"]}, NotFound, True),
    ("gm", "combat_start", {"order": ["zz", "zz"]}, NotFound, True),
    ("gm", "combat_start", {"order": ["zz"]}, NotFound, False),
    # invalid_args before forbidden
    ("p1", "update_room", {}, InvalidArgs, False),
]


@pytest.mark.parametrize(
    ("who", "op", "args", "exc", "end_combat"),
    ID_INSIDE_ARGS_CASES,
    ids=[f"{c[3].code}-{c[1]}-{i}" for i, c in enumerate(ID_INSIDE_ARGS_CASES)],
)
def test_ops_check_order_for_ids_inside_arguments(who, op, args, exc, end_combat):
    """docs/protocol.md, "Refusals": invalid_args, then not_found, then forbidden, then
    conflict/rule, also when the missing id sits in a list (combat_start's
    order), names a user (remove_user, rotate_token, owner), or when the
    argument problem is found by the handler (update_room with nothing)."""
    t = _order_table()
    if end_combat:
        t.do("combat_end")
    refused(t, exc, op, by=getattr(t, who), **args)


# ---------------------------------------------------------------- add_character


def test_ops_add_character_defaults_current_values_to_the_maxima():
    """docs/operations.md, "Operations": `{char}`; current values default to the maxima; the
    character order is the order of addition (`seq`)."""
    t = Table()
    out = t.do("add_character", **SHEET, name="Aline", owner=t.p1.user)
    a = out.result["char"]
    assert out.result == {"char": a}
    d = ch(t, a)
    assert {k: d[k] for k in ("seq", "name", "owner", "level", "condition")} == {
        "seq": 1,
        "name": "Aline",
        "owner": t.p1.user,
        "level": 3,
        "condition": "conscious",
    }
    assert (d["pv"], d["pv_max"], d["pe"], d["pe_max"], d["pp"], d["pp_max"]) == (
        20,
        20,
        15,
        15,
        6,
        6,
    )
    assert d["mods"] == {"str": 0, "dex": 2, "con": 2, "int": 0, "wis": 1, "cha": -1}
    assert t.events == [{"kind": "character", "char": a, "change": "added", "name": "Aline"}]
    b = t.add("Bruno", pv=5, pe=0, pp=1)
    assert (ch(t, b)["seq"], ch(t, b)["pv"], ch(t, b)["pe"], ch(t, b)["pp"]) == (2, 5, 0, 1)


def test_ops_add_character_ids_and_seqs_are_never_reused():
    """Engine memory: a removed character's id and seq are not given again."""
    t = Table()
    a = t.add("A")
    t.do("remove_character", char=a)
    b = t.add("B")
    assert b != a and ch(t, b)["seq"] == 2


def test_ops_add_character_with_an_existing_id_is_conflict():
    """docs/operations.md, "Operations": a duplicate id of a character is `conflict`."""
    t = Table()
    t.add("A", id="hero")
    refused(t, Conflict, "add_character", **SHEET, name="B", id="hero")


@pytest.mark.parametrize(
    "over",
    [{"pv": 21}, {"pe": 16}, {"pp": 7}, {"pv": 0}],
    ids=["pv>max", "pe>max", "pp>max", "pv0"],
)
def test_ops_add_character_refuses_a_sheet_breaking_an_invariant(over):
    """Character invariants (0 <= current <= max; a new character is
    conscious, so pv >= 1): `rule` (engine choice of code)."""
    t = Table()
    refused(t, RuleBroken, "add_character", **{**SHEET, **over}, name="N")


# ---------------------------------------------------------------- update_character


def test_ops_update_character_corrects_fields():
    """docs/operations.md, "Operations": GM correction of name, owner, level, pv, pe, pp, maxima,
    abilities, ability_damage, medicine."""
    t = Table()
    a = t.add("A", owner=t.p1)
    t.do(
        "update_character",
        char=a,
        set={
            "name": "Aline B.",
            "owner": t.p2.user,
            "level": 4,
            "pv": 10,
            "pe": 3,
            "pp": 2,
            "pv_max": 25,
            "pp_max": 7,
            "medicine": 9,
            "abilities": {"con": 16},
            "ability_damage": {"str": 2},
        },
    )
    d = ch(t, a)
    assert (d["name"], d["owner"], d["level"], d["medicine"]) == ("Aline B.", t.p2.user, 4, 9)
    assert (d["pv"], d["pv_max"], d["pe"], d["pp"], d["pp_max"]) == (10, 25, 3, 2, 7)
    assert d["abilities"] == {"str": 10, "dex": 14, "con": 16, "int": 10, "wis": 12, "cha": 8}
    assert d["ability_damage"]["str"] == 2 and d["mods"]["str"] == -1 and d["mods"]["con"] == 3
    assert t.events == [
        {
            "kind": "character",
            "char": a,
            "change": "updated",
            "fields": sorted(
                [
                    "name",
                    "owner",
                    "level",
                    "pv",
                    "pe",
                    "pp",
                    "pv_max",
                    "pp_max",
                    "medicine",
                    "abilities",
                    "ability_damage",
                ]
            ),
        }
    ]
    t.do("update_character", char=a, set={"owner": None})
    assert t.char(a).owner is None
    ok(t)


def test_ops_update_character_pe_max_is_the_sheet_value():
    """docs/operations.md, "Operations": pe_max corrects the sheet value (pe_max_base); the
    effective pe_max stays lowered by Constitution damage (A2)."""
    t = Table()
    a = t.add()
    t.do("ability_damage", char=a, ability="con", amount=2)  # pe_max 12
    t.do("update_character", char=a, set={"pe_max": 21})
    d = ch(t, a)
    assert (d["pe_max_base"], d["pe_max"], d["pe"]) == (21, 18, 12)


@pytest.mark.parametrize(
    ("setup", "changes"),
    [
        ("conscious", {"pv": 21}),
        ("conscious", {"pv": 0}),
        ("conscious", {"pv_max": 10}),
        ("conscious", {"pe": 16}),
        ("conscious", {"pe_max": 10}),
        ("conscious", {"pp": 7}),
        ("conscious", {"pp_max": 5}),
        ("conscious", {"condition": "dying"}),
        ("conscious", {"condition": "stable"}),
        ("conscious", {"ability_damage": {"str": 11}}),
        ("conscious", {"abilities": {"str": 5}, "ability_damage": {"str": 6}}),
        ("con_damaged", {"level": 10}),  # pe_max 15 - 10 = 5 < PE 12
        ("con_damaged", {"abilities": {"con": 1}}),  # below its 2 damage
        ("dying", {"pv": 3}),
        ("dying", {"condition": "conscious"}),
        ("stable", {"pv": 1}),
        ("resting", {"condition": "dying", "pv": 5}),
        ("knocked_out", {"condition": "dying", "pv": 2}),
    ],
)
def test_ops_update_character_refuses_a_correction_breaking_an_invariant(setup, changes):
    """docs/operations.md, "Operations": a correction that breaks an invariant is refused (`rule`),
    never repaired."""
    t = Table()
    a = t.add()
    if setup == "con_damaged":
        t.do("ability_damage", char=a, ability="con", amount=2)
    elif setup == "dying":
        t.down(a)
    elif setup == "stable":
        t.stabilised(a)
    elif setup == "resting":
        t.do("rest", char=a, kind="night")
    elif setup == "knocked_out":
        t.do("damage", char=a, amount=35, nonlethal=True)
    refused(t, RuleBroken, "update_character", char=a, set=changes)


@pytest.mark.parametrize(
    ("setup", "changes", "condition"),
    [
        ("conscious", {"condition": "dying", "pv": 0}, "dying"),
        ("conscious", {"condition": "stable", "pv": 0}, "stable"),
        ("conscious", {"condition": "dead"}, "dead"),
        ("dying", {"condition": "stable"}, "stable"),
        ("dying", {"condition": "conscious", "pv": 4}, "conscious"),
        ("stable", {"condition": "dying"}, "dying"),
        ("dead", {"condition": "stable", "pv": 0}, "stable"),
    ],
)
def test_ops_update_character_condition_runs_the_state_machine(setup, changes, condition):
    """update_character: a GM correction may make any transition, with the
    entry and exit actions (clocks L3/D5, rests R4, tending L4)."""
    t = Table()
    a = t.add()
    t.do("advance_clock", seconds=30)
    if setup == "dying":
        t.down(a)
    elif setup == "stable":
        t.stabilised(a)
    elif setup == "dead":
        kill(t, a)
    t.do("update_character", char=a, set=changes)
    c = t.char(a)
    assert c.condition == condition
    assert c.stable_since == (30 if condition == "stable" else None)
    assert ch(t, a)["dying_next"] == (36 if condition == "dying" else None)
    assert t.kinds("condition")[0]["cause"] == "correction"
    ok(t)


# ---------------------------------------------------------------- remove_character


def test_ops_remove_character_clears_healer_links():
    """remove_character: a removed healer stops tending; a removed patient
    leaves no dangling link."""
    t = Table()
    a, b, h = t.add("A"), t.add("B"), t.add("H")
    t.stabilised(a)
    t.stabilised(b)
    t.do("tend", char=h, patient=a)
    t.do("tend", char=h, patient=b)
    t.do("remove_character", char=h)
    assert (t.char(a).healer, t.char(b).healer) == (None, None)
    assert t.events == [
        {"kind": "tend", "char": h, "patient": a, "outcome": "end", "cause": "removed"},
        {"kind": "tend", "char": h, "patient": b, "outcome": "end", "cause": "removed"},
        {"kind": "character", "char": h, "change": "removed", "name": "H"},
    ]
    ok(t)
    h2 = t.add("H2")
    t.do("tend", char=h2, patient=a)
    t.do("remove_character", char=a)
    assert a not in t.room.characters
    ok(t)
    t.dice.push(12)
    t.do("advance_clock", seconds=3600)  # only B checks
    assert [r["char"] for r in t.kinds("roll")] == [b]


def _combat4(t: Table):
    ids = [t.add(n) for n in "ABCD"]
    t.do("combat_start", order=ids)
    return ids


def test_ops_remove_character_before_the_current_keeps_the_current_turn():
    """remove_character: removed from the order; the current combatant keeps its turn."""
    t = Table()
    a, b, c, d = _combat4(t)
    t.do("end_turn", char=a)
    t.do("end_turn", char=b)  # C's turn
    t.do("remove_character", char=a)
    assert t.room.to_dict()["combat"] == {"order": [b, c, d], "turn": 1, "round": 1}
    assert t.kinds("turn") == []
    t.do("end_turn", char=c, round=1)
    assert t.room.combat.current == d
    ok(t)


def test_ops_remove_character_after_the_current_keeps_the_current_turn():
    """remove_character: removing a later combatant shortens the order only."""
    t = Table()
    a, b, c, d = _combat4(t)
    t.do("remove_character", char=c)
    assert t.room.to_dict()["combat"] == {"order": [a, b, d], "turn": 0, "round": 1}


def test_ops_remove_the_current_combatant_passes_the_turn_without_time():
    """remove_character (engine choice): removing the current combatant gives
    the turn to the next one, with no end-of-turn rules and no time."""
    t = Table()
    a, b, c, d = _combat4(t)
    t.do("end_turn", char=a)
    t.do("remove_character", char=b)
    assert t.room.to_dict()["combat"] == {"order": [a, c, d], "turn": 1, "round": 1}
    assert t.room.clock == 0
    assert t.kinds("turn") == [{"kind": "turn", "char": c, "round": 1, "turn": 1}]


def test_ops_remove_the_last_current_combatant_starts_the_next_round():
    """remove_character (engine choice): removing the current combatant when
    it is last in the order ends the round: round + 1, clock + round_seconds."""
    t = Table()
    a, b, c, d = _combat4(t)
    for x in (a, b, c):
        t.do("end_turn", char=x)
    t.do("remove_character", char=d)
    assert t.room.to_dict()["combat"] == {"order": [a, b, c], "turn": 0, "round": 2}
    assert t.room.clock == 6
    assert t.kinds("turn") == [{"kind": "turn", "char": a, "round": 2, "turn": 0}]


def test_ops_remove_the_only_combatant_ends_the_combat():
    """remove_character (engine ruling, docs/rules.md): an empty order ends the combat."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.do("combat_start", order=[a])
    t.do("remove_character", char=a)
    assert t.room.combat is None
    assert t.kinds("combat") == [{"kind": "combat", "outcome": "end"}]
    t.do("rest", char=b, kind="short")


# ---------------------------------------------------------------- users


def test_ops_add_user_returns_its_id():
    """docs/operations.md, "add_user": `{user, token}` in the ack (the token is the
    server's); the engine gives the id and records name and role."""
    t = Table()
    out = t.do("add_user", name="Noé", role="gm")
    uid = out.result["user"]
    assert out.result == {"user": uid}
    assert t.room.to_dict()["users"][uid] == {"name": "Noé", "role": "gm"}
    assert t.events == [
        {"kind": "user", "user": uid, "change": "added", "name": "Noé", "role": "gm"}
    ]
    assert uid not in (t.gm.user, t.p1.user, t.p2.user, t.obs.user)


def test_ops_remove_user_gives_its_characters_owner_null():
    """docs/operations.md, "remove_user": a removed user's characters get owner null."""
    t = Table()
    a, b, c = t.add("A", owner=t.p1), t.add("B", owner=t.p1), t.add("C", owner=t.p2)
    out = t.do("remove_user", user=t.p1.user)
    assert out.result == {"user": t.p1.user}
    assert t.p1.user not in t.room.users
    assert (t.char(a).owner, t.char(b).owner, t.char(c).owner) == (None, None, t.p2.user)
    assert t.events == [{"kind": "user", "user": t.p1.user, "change": "removed", "name": "Paul"}]
    ok(t)


def test_ops_an_observer_owns_no_character():
    """Ruling (vtt-sync), docs/rules.md Refusals: an observer only watches, so
    naming one as `owner` is refused (`rule`, saying whom to give it to) by
    add_character and update_character; a player or a GM may own one."""
    t = Table()
    err = refused(t, RuleBroken, "add_character", **SHEET, name="N", owner=t.obs.user)
    assert err.reason() == {"key": "owner_observer", "user": t.obs.user}
    assert str(err) == (
        "Olga is an observer and plays no character: give it to a player,"
        " or to nobody (owner null) for the GM to play"
    )
    a = t.add("A", owner=t.p1)
    err = refused(t, RuleBroken, "update_character", char=a, set={"owner": t.obs.user})
    assert err.key == "owner_observer"
    for owner in (t.gm.user, None, t.p2.user):
        t.do("update_character", char=a, set={"owner": owner})
        assert t.char(a).owner == owner
    ok(t)


def test_ops_remove_user_refuses_the_last_gm():
    """remove_user: the room's last GM cannot be removed (`rule`); with a
    second GM, either may go."""
    t = Table()
    refused(t, RuleBroken, "remove_user", user=t.gm.user)
    uid = t.do("add_user", name="Co-MJ", role="gm").result["user"]
    t.do("remove_user", user=t.gm.user)
    assert list(u.role for u in t.room.users.values()).count("gm") == 1
    refused(t, RuleBroken, "remove_user", by=Actor(uid, "gm"), user=uid)


def test_ops_remove_user_that_is_not_there_is_not_found():
    """remove_user / rotate_token: an unknown user is `not_found`."""
    t = Table()
    refused(t, NotFound, "remove_user", user="u99")
    refused(t, NotFound, "rotate_token", user="u99")
    t.do("remove_user", user=t.p2.user)
    refused(t, NotFound, "remove_user", user=t.p2.user)


def test_ops_rotate_token_changes_no_room_state():
    """docs/operations.md, "rotate_token": `{user, token}` (the token is the server's);
    the room's state is unchanged, the change is an event."""
    t = Table()
    before = state(t)
    out = t.do("rotate_token", user=t.p1.user)
    assert out.result == {"user": t.p1.user}
    assert state(t) == before
    assert t.events == [{"kind": "user", "user": t.p1.user, "change": "token_rotated"}]
