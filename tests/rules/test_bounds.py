"""docs/rules.md, "Bounds": the sheet's maxima, characters and users per room,
and events per command, each refused with `invalid_args` and a message that
says the limit, the room unchanged (rules/validate.py names the constants
and their reasons). T2's collapse, the other half of the ruling, is in
test_time.py; here is its worst case from the issue that asked for it.
"""

from __future__ import annotations

import pytest

from rules import Actor, InvalidArgs, Room, apply
from rules.validate import (
    MAX_CHARACTERS,
    MAX_EVENTS,
    MAX_LEVEL,
    MAX_PE,
    MAX_PP,
    MAX_PV,
    MAX_USERS,
)
from tests.helpers.table import SHEET, AlwaysDice, Table, infirmary, stable_room
from tests.rules.rulekit import HOUR, ok, refused

# ---------------------------------------------------------------- sheet maxima


@pytest.mark.parametrize(
    ("field", "limit"),
    [
        ("level", MAX_LEVEL),
        ("pv_max", MAX_PV),
        ("pe_max", MAX_PE),
        ("pp_max", MAX_PP),
    ],
)
def test_Bounds_v11_sheet_maxima_are_accepted_up_to_the_bound_and_refused_past_it(field, limit):
    """Bounds v1.1: a sheet at the bound is accepted; one past it is
    `invalid_args` naming the field and the range, in add_character and in a
    GM correction alike."""
    t = Table()
    current = {"pv_max": "pv", "pe_max": "pe", "pp_max": "pp"}.get(field)
    big = t.add("Big", **{field: limit})
    assert getattr(t.char(big), "pe_max_base" if field == "pe_max" else field) == limit
    if current is not None:
        assert getattr(t.char(big), current) == limit  # current values default to the maxima
    err = refused(t, InvalidArgs, "add_character", **{**SHEET, "name": "N", field: limit + 1})
    assert field in err.message and str(limit) in err.message
    a = t.add("A")
    err = refused(t, InvalidArgs, "update_character", char=a, set={field: limit + 1})
    assert str(limit) in err.message
    ok(t)


@pytest.mark.parametrize(("field", "limit"), [("pv", MAX_PV), ("pe", MAX_PE), ("pp", MAX_PP)])
def test_Bounds_v11_current_values_past_the_maxima_bounds_are_invalid_args(field, limit):
    """Bounds v1.1: current PV/PE/PP past the bound are `invalid_args` (the
    argument alone says it), before any comparison with the sheet's max."""
    t = Table()
    a = t.add()
    refused(t, InvalidArgs, "add_character", **{**SHEET, "name": "N", field: limit + 1})
    refused(t, InvalidArgs, "update_character", char=a, set={field: limit + 1})


# ---------------------------------------------------------------- room size


def test_Bounds_v11_characters_per_room():
    """Bounds v1.1: at MAX_CHARACTERS, adding one more is `invalid_args` with
    a message that says why and what to do; removing one makes room again."""
    t = Table()
    ids = [t.add(f"PC{i}") for i in range(MAX_CHARACTERS)]
    assert len(t.room.characters) == MAX_CHARACTERS
    err = refused(t, InvalidArgs, "add_character", **{**SHEET, "name": "One too many"})
    assert str(MAX_CHARACTERS) in err.message and "remove one" in err.message
    t.do("remove_character", char=ids[0])
    t.add("Newcomer")
    assert len(t.room.characters) == MAX_CHARACTERS


def test_Bounds_v11_a_full_room_is_invalid_args_before_forbidden():
    """Bounds v1.1 with the order of docs/protocol.md, "Refusals": the bound is checked with the
    arguments, so a player's add_character to a full room is `invalid_args`
    too (as a mistyped one would be), before the role's `forbidden`."""
    t = Table()
    for i in range(MAX_CHARACTERS):
        t.add(f"PC{i}")
    refused(t, InvalidArgs, "add_character", by=t.p1, **{**SHEET, "name": "N"})


def test_Bounds_v11_users_per_room():
    """Bounds v1.1: at MAX_USERS (the GM, two players and an observer
    included), add_user is `invalid_args`; removing one makes room."""
    t = Table()
    assert len(t.room.users) == 4
    last = None
    for i in range(MAX_USERS - 4):
        last = t.do("add_user", name=f"Guest {i}", role="observer").result["user"]
    assert len(t.room.users) == MAX_USERS
    err = refused(t, InvalidArgs, "add_user", name="One too many", role="player")
    assert str(MAX_USERS) in err.message
    t.do("remove_user", user=last)
    t.do("add_user", name="Newcomer", role="player")


# ---------------------------------------------------------------- events per command


def test_Bounds_v11_the_worst_advance_within_the_bounds_stays_under_the_event_bound():
    """Bounds v1.1: MAX_EVENTS refuses no command a room within the other
    bounds can send: the worst advance (every patient stays stable each hour,
    with its healer's roll, then wakes by L2) emits 19 events per patient."""
    t = infirmary()
    t.dice = AlwaysDice(10)
    t.do("advance_clock", seconds=8 * HOUR)
    patients = MAX_CHARACTERS - 1
    assert len(t.events) == 1 + 19 * patients <= MAX_EVENTS
    assert sum(c.condition == "conscious" for c in t.room.characters.values()) == MAX_CHARACTERS
    ok(t)


def test_Bounds_v11_a_command_past_the_event_bound_is_refused_and_changes_nothing():
    """Bounds v1.1: a room built past the bounds (as an older version could
    store it: 300 tended patients) cannot advance eight hours in one command
    (5,700 events): `invalid_args` saying to advance in shorter steps, the
    room unchanged; an hour at a time works."""
    t = Table()
    t.room = stable_room(300, con=10, healer_medicine=5)
    t.gm = Actor("u1", "gm")
    t.dice = AlwaysDice(10)
    err = refused(t, InvalidArgs, "advance_clock", seconds=8 * HOUR)
    assert str(MAX_EVENTS) in err.message and "shorter steps" in err.message
    for hour in range(1, 9):
        t.do("advance_clock", seconds=HOUR)
        # two rolls a patient; at +8 h also the wake-up (L2) and the end of tending
        assert len(t.events) == 1 + (2 if hour < 8 else 5) * 300
    assert all(c.condition == "conscious" for c in t.room.characters.values())


def test_Bounds_v11_T2_the_issue_case_dying_with_a_million_pp_is_one_event():
    """Bounds v1.1 / T2: the case that froze the server (a dying character
    with 1,000,000 PP, 1-second rounds, a clock advance past its death) from
    a state stored before the bounds: one computed step, three events."""
    t = Table()
    a = t.add()
    t.down(a)  # next loss at 6
    d = t.room.to_dict()
    d["characters"][a]["pp"] = d["characters"][a]["pp_max"] = 1_000_000
    t.room = Room.from_dict(d)
    t.do("update_room", round_seconds=1)
    out = apply(t.room, "advance_clock", {"seconds": 1_000_010}, t.gm, t.dice)
    last = 6 + 1_000_000 - 1
    assert out.events == [
        {"kind": "clock", "from": 0, "to": 1_000_010},
        {"kind": "pp", "char": a, "delta": -1_000_000, "cause": "dying", "rounds": 1_000_000,
         "at": last},
        {"kind": "condition", "char": a, "from": "dying", "to": "dead", "cause": "dying",
         "at": last},
    ]  # fmt: skip
    assert (out.room.characters[a].pp, out.room.characters[a].condition) == (0, "dead")
