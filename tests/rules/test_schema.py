"""The state's schema (rules/schema.py) and the forbidden path parts (issue
19, item 1): every state the engine makes passes the schema; `apply_ops`
refuses `__proto__`, `constructor` and `prototype`; no id may be one of
them; undo refuses a crafted inverse that would make a state the schema
refuses (a name that is a map, an HTML `mods`), rather than serving it."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import Conflict, InvalidArgs, RuleBroken, apply_ops, diff, revert, schema
from rules.patch import FORBIDDEN_KEYS
from tests.helpers.table import AlwaysDice, Table, infirmary


@pytest.mark.parametrize("key", sorted(FORBIDDEN_KEYS))
def test_apply_ops_refuses_the_forbidden_path_parts(key: str) -> None:
    state = {"characters": {"c1": {"name": "Aline"}}}
    for path in ([key, "polluted"], ["characters", key], ["characters", "c1", key]):
        with pytest.raises(ValueError, match="may not hold"):
            apply_ops(copy.deepcopy(state), [["set", path, "yes"]])
    with pytest.raises(ValueError, match="may not hold"):
        apply_ops(state, [["set", [1, "x"], "yes"]])


@pytest.mark.parametrize("key", sorted(FORBIDDEN_KEYS))
def test_no_id_may_be_a_forbidden_path_part(key: str) -> None:
    t = Table()
    with pytest.raises(InvalidArgs, match="reserved"):
        t.do("add_character", id=key, **_sheet())
    assert schema.ident(key) is not None


def _sheet() -> dict:
    from tests.helpers.table import SHEET

    return {"name": "X", **SHEET}


def test_the_states_the_engine_makes_pass_the_schema() -> None:
    t = infirmary()
    assert schema.state_problems(t.room.to_dict()) == []
    t.dice = AlwaysDice(10)
    t.do("advance_clock", seconds=8 * 3600)
    assert schema.state_problems(t.room.to_dict()) == []


def test_the_schema_names_what_is_wrong() -> None:
    t = Table()
    cid = t.add(owner=t.p1)
    good = t.room.to_dict()
    cases = {
        "users.u1.role must be one of gm, player, observer": lambda s: s["users"]["u1"].update(
            role="admin"
        ),
        f"characters.{cid}.name must be a string, not a map": lambda s: s["characters"][cid].update(
            name={}
        ),
        "clock must be an integer, not a string": lambda s: s.update(clock="soon"),
        f"characters.{cid}: pe_max is 99": lambda s: s["characters"][cid].update(pe_max=99),
        f"characters.{cid}.mods.str must be an integer": lambda s: s["characters"][cid][
            "mods"
        ].update(str="<b>"),
        "lacks name": lambda s: s.pop("name"),
    }
    for message, change in cases.items():
        state = copy.deepcopy(good)
        change(state)
        problems = schema.state_problems(state)
        assert any(message in p for p in problems), (message, problems)


def test_op_problems_check_the_path_and_the_value() -> None:
    assert schema.op_problems(["set", ["characters", "c1", "pv"], 3]) == []
    assert schema.op_problems(["del", ["characters", "c1"]]) == []
    assert schema.op_problems(["set", ["characters", "c1", "pv"], "3"])  # a string
    assert schema.op_problems(["set", ["characters", "c1", "pv", "x"], 3])  # below a leaf
    assert schema.op_problems(["set", ["nope"], 3])  # no such field
    assert schema.op_problems(["del", ["clock"]]) == []  # an optional field
    assert schema.op_problems(["del", ["room"]])  # a required one
    assert schema.op_problems(["set", ["users", "u9"], {"name": "W", "role": "wizard"}])
    assert schema.op_problems(["set", [], 1]) and schema.op_problems("set")


def test_undo_of_a_crafted_inverse_is_refused_not_applied() -> None:
    """(issue 19) A room file's inverse ops that undo would apply: a name
    made a map, HTML in mods. revert refuses them with RuleBroken."""
    t = Table()
    cid = t.add(owner=t.p1)
    state = t.room.to_dict()
    for inverse in (
        [["set", ["characters", cid, "name"], {"html": "<b>"}]],
        [["set", ["characters", cid, "mods", "dex"], "<script>"]],
        [["set", ["clock"], "soon"]],
    ):
        with pytest.raises(RuleBroken, match="invalid state"):
            revert(t.room, state, inverse, 3)
    with pytest.raises(Conflict, match="can no longer be undone"):
        revert(t.room, state, [["set", ["__proto__", "polluted"], "yes"]], 3)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["damage", "heal", "advance"]), max_size=12))
def test_every_op_of_a_played_room_passes_op_problems(steps: list[str]) -> None:
    t = Table()
    cid = t.add(owner=t.p1)
    for step in steps:
        before = t.room.to_dict()
        if step == "damage":
            t.do("damage", char=cid, amount=3)
        elif step == "heal":
            t.do("heal", char=cid, amount=2)
        else:
            t.do("advance_clock", seconds=600)
        after = t.room.to_dict()
        for op in diff(before, after) + diff(after, before):
            assert schema.op_problems(op) == [], op
        assert schema.state_problems(after) == []
