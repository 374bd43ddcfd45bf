"""`applied`: apply_ops on a deep copy, copy-on-write (issue 19: an undo
deep-copied the whole room, an import's views every state of its log)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import applied, apply_ops

KEYS = st.sampled_from(["a", "b", "c", "characters", "c1"])
LEAF = st.one_of(
    st.integers(-3, 3), st.text(max_size=2), st.none(), st.lists(st.integers(), max_size=2)
)
STATE = st.recursive(LEAF, lambda inner: st.dictionaries(KEYS, inner, max_size=4), max_leaves=12)
OP = st.one_of(
    st.tuples(st.just("set"), st.lists(KEYS, min_size=1, max_size=3), STATE),
    st.tuples(st.just("del"), st.lists(KEYS, min_size=1, max_size=3)),
)


def outcome(fn: Any, state: dict[str, Any], ops: list[Any]) -> Any:
    try:
        return ("ok", fn(state, ops))
    except (KeyError, TypeError, ValueError) as exc:
        return ("error", type(exc))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, STATE, max_size=4), st.lists(OP.map(list), max_size=5))
def test_applied_equals_apply_ops_on_a_deep_copy_and_leaves_the_state(state, ops) -> None:
    before = copy.deepcopy(state)
    expected = outcome(lambda s, o: apply_ops(copy.deepcopy(s), o), state, ops)
    got = outcome(applied, state, ops)
    assert got == expected
    assert state == before  # never changed, whatever the ops (or their error)


def test_applied_shares_what_the_ops_do_not_touch() -> None:
    state = {"characters": {"c1": {"pv": 3}, "c2": {"pv": 5}}, "users": {"u1": {}}}
    out = applied(state, [["set", ["characters", "c1", "pv"], 2]])
    assert out == {"characters": {"c1": {"pv": 2}, "c2": {"pv": 5}}, "users": {"u1": {}}}
    assert out["users"] is state["users"] and out["characters"]["c2"] is state["characters"]["c2"]
    assert state["characters"]["c1"]["pv"] == 3


@pytest.mark.parametrize("bad", [["__proto__"], [], ["a", "constructor"]])
def test_applied_refuses_the_paths_apply_ops_refuses(bad) -> None:
    with pytest.raises(ValueError):
        applied({"a": {}}, [["set", bad, 1]])
