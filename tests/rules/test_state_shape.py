"""The state's dict form and its TypedDicts (rules/state.py) say the same
keys: the modules that read the state outside the rules are type-checked
against what `Room.to_dict` really writes."""

from __future__ import annotations

from rules.state import (
    ActivityDict,
    CharacterDict,
    CombatDict,
    StateDict,
    UserDict,
    role_of,
    user_of,
)
from rules.testing import Table


def test_every_key_of_the_dict_form_is_typed_and_every_typed_key_written() -> None:
    t = Table()
    a, b, c = t.add("A", owner=t.p1), t.add("B"), t.add("C")
    t.do("rest", char=c, kind="short")  # outside the combat: still resting
    t.do("combat_start", order=[a, b])
    state = t.room.to_dict()
    assert set(state) == set(StateDict.__annotations__)
    assert state["combat"] is not None and set(state["combat"]) == set(CombatDict.__annotations__)
    for user in state["users"].values():
        assert set(user) == set(UserDict.__annotations__)
    for char in state["characters"].values():
        assert set(char) == set(CharacterDict.__annotations__)
    activities = [c["activity"] for c in state["characters"].values() if c["activity"]]
    assert activities and all(set(a) == set(ActivityDict.__annotations__) for a in activities)


def test_a_users_role_is_read_through_the_typed_form() -> None:
    state = Table().room.to_dict()
    gm = next(uid for uid, u in state["users"].items() if u["role"] == "gm")
    assert role_of(state, gm) == "gm" and user_of(state, gm) == state["users"][gm]  # type: ignore[arg-type]
    assert role_of(state, "nobody") is None and role_of(state, None) is None  # type: ignore[arg-type]
