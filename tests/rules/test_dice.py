"""Dice (X1, X2), rule by rule (docs/rules.md, "Dice"): who rolls, the GM's own dice and
queue, and the roll event every check makes."""

from __future__ import annotations

import pytest

from rules import Forbidden, InvalidArgs, RuleBroken
from rules.validate import MAX_QUEUED_ROLLS
from tests.helpers.table import Table
from tests.rules.rulekit import HOUR, ch, refused

ROLL_FIELDS = {"kind", "char", "check", "d20", "mod", "bonus", "total", "dc", "outcome"}


def _dying_and_medic(t: Table, owner=None):
    a, b = t.add("A"), t.add("B", owner=owner)
    t.down(a)
    return a, b


# ---------------------------------------------------------------- X1


def test_X1_the_server_rolls_by_default():
    """X1: the server rolls every die (the dice source given to the engine)."""
    t = Table()
    a, b = _dying_and_medic(t)
    t.dice.push(13)
    t.do("first_aid", char=b, patient=a)
    assert t.dice.used == [13]
    roll = t.kinds("roll")[0]
    assert (roll["d20"], roll["source"]) == (13, "server")


@pytest.mark.parametrize(
    ("roll", "outcome", "condition"), [(10, "success", "stable"), (9, "failure", "dying")]
)
def test_X1_gm_supplies_the_natural_d20_of_a_check(roll, outcome, condition):
    """X1: the GM may supply the natural d20 (`roll`, physical dice): no
    server die is rolled and the queue is left alone."""
    t = Table()
    a, b = _dying_and_medic(t)
    t.do("queue_rolls", rolls=[1, 2])
    t.do("first_aid", char=b, patient=a, roll=roll)
    assert t.dice.used == []
    assert t.room.queued_rolls == [1, 2]
    r = t.kinds("roll")[0]
    assert (r["d20"], r["total"], r["outcome"], r["source"]) == (roll, roll + 5, outcome, "gm")
    assert t.char(a).condition == condition


def test_X1_queued_rolls_are_visible_and_consumed_in_order_before_the_server_dice():
    """X1: queued naturals (visible as `queued_rolls`) are consumed in order by
    the next automated checks, before the server's dice."""
    t = Table()
    a, b = _dying_and_medic(t)
    t.do("queue_rolls", rolls=[3, 17])
    assert t.room.to_dict()["queued_rolls"] == [3, 17]
    assert t.events == [{"kind": "rolls_queued", "rolls": [3, 17], "queued": 2}]
    t.do("queue_rolls", rolls=[11])  # appended
    assert t.room.queued_rolls == [3, 17, 11]
    t.do("first_aid", char=b, patient=a)  # 3: failure
    assert (t.kinds("roll")[0]["d20"], t.kinds("roll")[0]["source"]) == (3, "queued")
    assert t.room.queued_rolls == [17, 11]
    assert t.char(a).condition == "dying"
    t.do("first_aid", char=b, patient=a)  # 17: success
    assert t.char(a).condition == "stable"
    assert t.room.queued_rolls == [11]
    assert t.dice.used == []
    # The hourly check takes the last queued die, the next one the server's.
    t.dice.push(12)
    t.do("advance_clock", seconds=2 * HOUR)
    assert [(r["d20"], r["source"]) for r in t.kinds("roll")] == [(11, "queued"), (12, "server")]
    assert t.room.queued_rolls == [] and t.dice.used == [12]


def test_X1_queue_feeds_the_healer_then_the_constitution_check():
    """X1 + L4: within one hourly check, the healer's die comes first."""
    t = Table()
    a, h = t.add("A"), t.add("H")
    t.stabilised(a)
    t.do("tend", char=h, patient=a)
    t.do("queue_rolls", rolls=[10, 4])
    t.do("advance_clock", seconds=HOUR)
    assert [(r["char"], r["d20"]) for r in t.kinds("roll")] == [(h, 10), (a, 4)]
    assert t.kinds("roll")[1]["total"] == 10  # L4: 4 + 2 + 2 raised to 10


@pytest.mark.parametrize("who", ["p1", "p2", "obs"])
def test_X1_queue_rolls_is_forbidden_for_players_and_observers(who):
    """X1: only the GM queues dice (`forbidden`)."""
    t = Table()
    refused(t, Forbidden, "queue_rolls", by=getattr(t, who), rolls=[20])


@pytest.mark.parametrize("who", ["p1", "obs"])
def test_X1_roll_argument_is_forbidden_for_players(who):
    """X1 / docs/operations.md, "Operations": `roll` is accepted from the GM only, even from the
    medic's owner, who may otherwise send first_aid."""
    t = Table()
    a, b = _dying_and_medic(t, owner=t.p1)
    refused(t, Forbidden, "first_aid", by=getattr(t, who), char=b, patient=a, roll=20)
    # Without a die of its own, the owner's first aid is accepted.
    t.dice.push(15)
    t.do("first_aid", by=t.p1, char=b, patient=a)
    assert t.char(a).condition == "stable"


@pytest.mark.parametrize("roll", [0, 21, -1, 1.0, True, "20", 2**64 - 1])
def test_X1_gm_roll_must_be_a_natural_d20(roll):
    """X1: a natural d20 is 1-20 (`invalid_args` otherwise)."""
    t = Table()
    a, b = _dying_and_medic(t)
    refused(t, InvalidArgs, "first_aid", char=b, patient=a, roll=roll)


@pytest.mark.parametrize(
    "rolls", [[], [0], [21], [1, 2, 0], [1.0], [True], "12", None, [None], [20] * 101]
)
def test_X1_queued_rolls_must_be_naturals(rolls):
    """X1: queued results are natural d20s, 1 to 100 of them (`invalid_args`)."""
    t = Table()
    refused(t, InvalidArgs, "queue_rolls", rolls=rolls)


def test_X1_queue_holds_at_most_100_rolls():
    """X1 (engine choice): the queue is bounded; overflowing it is `rule`."""
    t = Table()
    t.do("queue_rolls", rolls=[20] * MAX_QUEUED_ROLLS)
    assert len(t.room.queued_rolls) == MAX_QUEUED_ROLLS == 100
    refused(t, RuleBroken, "queue_rolls", rolls=[1])


# ---------------------------------------------------------------- X2


def test_X2_medicine_roll_event_fields():
    """X2: every roll is an event: who, which check, the natural die,
    modifier, bonus, total, DC, outcome."""
    t = Table()
    a, b = _dying_and_medic(t)
    t.do("update_character", char=b, set={"medicine": 7})
    t.do("first_aid", char=b, patient=a, roll=8)
    roll = t.kinds("roll")[0]
    assert set(roll) >= ROLL_FIELDS
    assert {k: roll[k] for k in ROLL_FIELDS} == {
        "kind": "roll",
        "char": b,
        "check": "medicine",
        "d20": 8,
        "mod": 7,
        "bonus": 0,
        "total": 15,
        "dc": 15,
        "outcome": "success",
    }


@pytest.mark.parametrize(("d20", "outcome"), [(4, "die"), (8, "stay"), (17, "stay"), (18, "wake")])
def test_X2_constitution_roll_has_a_null_dc(d20, outcome):
    """X2: the Constitution check's DC is null (its thresholds are 10 and 20)."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    t.do("queue_rolls", rolls=[d20])
    t.do("advance_clock", seconds=HOUR)
    roll = t.kinds("roll")[0]
    assert {k: roll[k] for k in ROLL_FIELDS} == {
        "kind": "roll",
        "char": a,
        "check": "constitution",
        "d20": d20,
        "mod": 2,
        "bonus": 0,
        "total": d20 + 2,
        "dc": None,
        "outcome": outcome,
    }


def test_X2_healer_roll_and_bonus_in_the_events():
    """X2 + L4: the healer's Medicine check is an event too, and the bonus it
    earns shows in the Constitution roll (its `bonus`: docs/operations.md, "roll")."""
    t = Table()
    a = t.add("A", abilities={"str": 10, "dex": 10, "con": 10, "int": 10, "wis": 10, "cha": 10})
    h = t.add("H")
    t.stabilised(a)
    t.do("tend", char=h, patient=a)
    t.do("queue_rolls", rolls=[13, 4])
    t.do("advance_clock", seconds=HOUR)
    heal, con = t.kinds("roll")
    assert {k: heal[k] for k in ROLL_FIELDS} == {
        "kind": "roll",
        "char": h,
        "check": "medicine",
        "d20": 13,
        "mod": 5,
        "bonus": 0,
        "total": 18,
        "dc": 15,
        "outcome": "success",
    }
    assert {k: con[k] for k in ROLL_FIELDS} == {
        "kind": "roll",
        "char": a,
        "check": "constitution",
        "d20": 4,
        "mod": 0,
        "bonus": 2,
        "total": 10,
        "dc": None,
        "outcome": "stay",
    }
    assert ch(t, a)["condition"] == "stable"


def test_X2_a_failed_check_is_still_an_event():
    """X2 + S1: a failed first aid changes nothing but its roll is an event."""
    t = Table()
    a, b = _dying_and_medic(t)
    t.do("first_aid", char=b, patient=a, roll=1)
    assert [e["kind"] for e in t.events] == ["roll"]
    assert t.events[0]["outcome"] == "failure" and t.events[0]["total"] == 6
