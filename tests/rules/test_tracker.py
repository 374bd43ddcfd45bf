"""Tracker edits mid-combat (`set_order`) and the pinned clock advance
(`advance_clock`'s `from`), rule by rule: what joining or leaving a running
combat does to T1's turn, R4's rest, D5's PP clock, D6 and S4's allowance.

Default sheet: level 3, PV 20, PE 15, PP 6, Con 14 (+2), Medicine +5.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import Conflict, Forbidden, InvalidArgs, NotFound, RuleBroken
from tests.helpers.table import Table
from tests.rules.rulekit import combat, kill, ok, refused, turn

# ---------------------------------------------------------------- T1: whose turn it is


def test_T1_set_order_reorders_and_the_current_combatant_keeps_its_turn():
    """T1 (set_order ruling): a reorder moves the turn index with the current
    combatant; no turn ends, no time passes, the round stays."""
    t, (a, b, c) = combat()
    t.do("end_turn", char=a)  # B's turn, index 1
    t.do("set_order", order=[b, c, a])
    assert turn(t) == (b, 1, 0)
    assert t.room.clock == 0
    assert t.events == [
        {"kind": "combat", "outcome": "order", "order": [b, c, a], "joined": [], "left": []}
    ]
    # The next turns follow the new order; the round ends after A.
    t.do("end_turn", char=b)
    t.do("end_turn", char=c)
    assert turn(t) == (a, 1, 2)
    t.do("end_turn", char=a)
    assert turn(t) == (b, 2, 0) and t.room.clock == 6
    ok(t)


def test_T1_set_order_adds_a_combatant_after_the_current_one_who_acts_this_round():
    """T1 (set_order ruling): a newcomer placed after the current combatant
    acts in this round; one placed before it waits for the next round."""
    t, (a, b) = combat(2)
    late, early = t.add("Late"), t.add("Early")
    t.do("end_turn", char=a)  # B's turn
    t.do("set_order", order=[early, a, b, late])
    assert turn(t) == (b, 1, 2)
    assert t.events[0]["joined"] == [early, late]
    t.do("end_turn", char=b)
    assert turn(t) == (late, 1, 3)
    t.do("end_turn", char=late)
    assert turn(t) == (early, 2, 0) and t.room.clock == 6
    ok(t)


def test_T1_set_order_removing_the_current_combatant_passes_to_the_next_survivor():
    """T1 (set_order ruling): the current combatant leaving passes the turn to
    the next combatant after it that stays, without its end-of-turn rules
    (leaving is not ending a turn) and without time passing."""
    t, (a, b, c) = combat()
    t.do("end_turn", char=a)  # B's turn
    t.do("set_order", order=[a, c])
    assert turn(t) == (c, 1, 1)
    assert t.events[-1] == {"kind": "turn", "char": c, "round": 1, "turn": 1}
    assert t.events[0]["left"] == [b]
    assert t.room.clock == 0
    ok(t)


def test_T1_set_order_removing_the_last_current_ends_the_round():
    """T1 (set_order ruling): with nobody after it staying, the current
    combatant's leaving ends the round, as remove_character does: a new round
    starts and world time advances a round (T2), with no end-of-turn rules."""
    t, (a, b, c) = combat()
    t.down(c)
    t.do("end_turn", char=a)
    t.do("end_turn", char=b)  # C's turn, the last
    t.do("set_order", order=[a, b])
    assert turn(t) == (a, 2, 0) and t.room.clock == 6
    assert t.events[-1] == {"kind": "turn", "char": a, "round": 2, "turn": 0}
    # C is out of combat from second 0: its first full round ends at 6 (D5).
    assert t.char(c).pp == 5
    assert [e["at"] for e in t.kinds("pp")] == [6]
    ok(t)


def test_T1_set_order_replacing_everyone_starts_a_new_round_with_the_first_newcomer():
    t, (a, b) = combat(2)
    c, d = t.add("C"), t.add("D")
    t.do("set_order", order=[c, d])
    assert turn(t) == (c, 2, 0) and t.room.clock == 6
    assert t.events[0]["joined"] == [c, d] and t.events[0]["left"] == [a, b]
    ok(t)


def test_T1_set_order_turn_names_who_has_the_turn_without_end_of_turn_rules():
    """T1 (set_order `turn`): a tracker that knows who has acted this round
    puts the turn there; the combatant passed over loses no PP (D5: no end of
    its turn) and no time passes."""
    t, (a, b, c) = combat()
    t.do("end_turn", char=a)
    t.do("end_turn", char=b)
    t.do("end_turn", char=c)  # round 2, A's turn
    t.down(a)  # dying during its own turn
    t.do("end_turn", char=a)  # fresh: no loss
    t.do("end_turn", char=b)
    t.do("end_turn", char=c)  # round 3, A's turn: its end would cost 1 PP
    t.do("set_order", order=[a, b, c], turn=2)
    assert turn(t) == (c, 3, 2) and t.room.clock == 12
    assert t.char(a).pp == 6 and t.kinds("pp") == []
    assert t.events[-1] == {"kind": "turn", "char": c, "round": 3, "turn": 2}
    ok(t)


def test_T1_set_order_turn_past_the_end_ends_the_round_and_time_advances():
    """T1/T2 (set_order `turn` = len(order)): everyone in the order has acted
    this round; the next round starts and world time advances a round, its
    timed rules firing (T2: a dying character outside the order loses a PP)."""
    t, (a, b) = combat(2)
    d = t.add("D")
    t.down(d)  # out of combat: next loss at second 6
    t.do("set_order", order=[b, a], turn=2)
    assert turn(t) == (b, 2, 0) and t.room.clock == 6
    assert [e["kind"] for e in t.events] == ["combat", "clock", "pp", "turn"]
    assert t.char(d).pp == 5
    ok(t)


@pytest.mark.parametrize("bad", [3, -1, 1.0, "1", True])
def test_T1_set_order_turn_must_be_a_place_in_the_order(bad):
    t, (a, b) = combat(2)
    refused(t, InvalidArgs, "set_order", order=[a, b], turn=bad)


def test_T1_set_order_then_end_turn_of_the_old_position_is_a_conflict():
    """T1: after a tracker edit, an end_turn naming whoever no longer has the
    turn is still a `conflict` (a stale message ends nothing)."""
    t, (a, b, c) = combat()
    t.do("set_order", order=[b, c])  # A left: B's turn
    refused(t, Conflict, "end_turn", char=a, round=1)
    t.do("end_turn", char=b, round=1)
    assert turn(t) == (c, 1, 1)


@pytest.mark.parametrize(
    ("case", "exc"),
    [
        ("no combat", RuleBroken),
        ("duplicate", RuleBroken),
        ("dead newcomer", RuleBroken),
        ("empty", InvalidArgs),
        ("unknown", NotFound),
        ("player", Forbidden),
    ],
)
def test_T1_set_order_refusals(case, exc):
    """T1 / D6 (set_order rulings): no combat running, a character twice and a
    dead newcomer are `rule`; an empty order is `invalid_args` (end the combat
    instead); the GM's op."""
    t, (a, b) = combat(2)
    by = None
    order = [b, a]
    if case == "no combat":
        t.do("combat_end")
    elif case == "duplicate":
        order = [a, b, a]
    elif case == "dead newcomer":
        d = t.add("D")
        kill(t, d)
        order = [a, b, d]
    elif case == "empty":
        order = []
    elif case == "unknown":
        order = [a, "c999"]
    else:
        by = t.p1
    refused(t, exc, "set_order", by=by, order=order)


def test_D6_set_order_keeps_a_dead_combatant_already_in_the_order():
    """D6 (set_order ruling): the dead cannot join a combat, but one already in
    the order may stay there (and its turn still ends, D6's end_turn)."""
    t, (a, b, c) = combat()
    kill(t, b)
    t.do("set_order", order=[c, b, a])
    assert t.room.combat.order == [c, b, a]
    assert turn(t) == (a, 1, 2)
    ok(t)


# ---------------------------------------------------------------- joining: R4, D5, S4


def test_R4_set_order_newcomer_stops_resting():
    """R4: entering a combat ends a rest without benefit, also mid-combat."""
    t, (a, b) = combat(2)
    r = t.add("R")
    t.do("rest", char=r, kind="night")
    t.do("set_order", order=[a, b, r])
    assert t.char(r).activity is None
    assert t.kinds("rest") == [
        {"kind": "rest", "char": r, "rest": "night", "outcome": "interrupted", "cause": "combat"}
    ]
    refused(t, RuleBroken, "rest", char=r, kind="short")  # R4: not while in the order
    ok(t)


def test_D5_set_order_dying_newcomer_loses_pp_on_its_own_turns_not_by_the_clock():
    """D5: a dying character that joins the combat stops losing PP per round
    of world time and loses 1 PP at the end of its own turns instead."""
    t, (a, b) = combat(2)
    d = t.add("D")
    t.down(d)  # out of combat: next loss at second 6
    t.do("set_order", order=[a, b, d])
    assert t.char(d).dying_next is None
    t.do("end_turn", char=a)
    t.do("end_turn", char=b)
    assert t.char(d).pp == 6  # no loss by the clock while in the order
    t.do("end_turn", char=d)  # its own turn ends: 1 PP, the round's 6 s cost nothing
    assert t.char(d).pp == 5 and t.room.clock == 6
    assert [e["cause"] for e in t.kinds("pp")] == ["dying"]
    ok(t)


def test_S4_set_order_newcomer_allowance_resets_at_the_end_of_its_own_turn():
    """S4: once in the order, the S3/S4 allowance resets on the character's
    own turns, not a round of world time after its use."""
    t, (a,) = combat(1)
    s = t.add("S")
    t.stabilised(s)
    t.do("stay_in_fight", char=s)  # out of combat: resets a round later by the clock
    assert t.char(s).regained_at == 0
    t.do("set_order", order=[a, s])
    assert t.char(s).regained_at is None and t.char(s).regained_this_turn
    t.do("end_turn", char=a)
    assert t.char(s).regained_this_turn  # a round of world time is not enough now
    t.do("end_turn", char=s)
    assert not t.char(s).regained_this_turn
    ok(t)


# ---------------------------------------------------------------- leaving: D5, S4


def test_D5_set_order_dying_leaver_loses_pp_a_full_round_after_leaving():
    """D5 (set_order ruling): a dying combatant removed from the order is out
    of combat from that instant: its next PP goes a full round of world time
    later, as when a combat ends; leaving costs none at once."""
    t, (a, b, c) = combat()
    t.down(b)
    t.do("end_turn", char=a)
    t.do("end_turn", char=b)  # its own turn: -1 PP
    assert t.char(b).pp == 5
    t.do("advance_clock", seconds=30)  # in combat, the clock costs nothing
    assert t.char(b).pp == 5
    t.do("set_order", order=[a, c])
    assert t.char(b).pp == 5 and t.char(b).dying_next == 36
    t.do("advance_clock", seconds=5)
    assert t.char(b).pp == 5
    t.do("advance_clock", seconds=1)
    assert t.char(b).pp == 4
    assert t.kinds("pp") == [
        {"kind": "pp", "char": b, "delta": -1, "cause": "dying", "rounds": 1, "at": 36}
    ]
    ok(t)


def test_D5_set_order_current_dying_leaver_skips_its_end_of_turn_loss():
    """D5 (set_order ruling): removing the current combatant is not the end of
    its turn, so the dying loss of that turn does not happen; the out of
    combat clock takes over from that instant."""
    t, (a, b) = combat(2)
    t.down(a)  # dying during its own turn: that turn's end would cost nothing anyway
    t.do("end_turn", char=a)
    t.do("end_turn", char=b)  # round 2, A's turn again
    t.do("set_order", order=[b])
    assert t.char(a).pp == 6 and t.char(a).dying_next == t.room.clock + 6
    assert not t.char(a).dying_fresh
    ok(t)


def test_S4_set_order_leaver_allowance_resets_a_full_round_after_leaving():
    """S4 (ruling): the allowance of a combatant who leaves the order resets a
    full round of world time after it left, as at the end of a combat."""
    t, (a, b) = combat(2)
    t.stabilised(b)
    t.do("stay_in_fight", char=b)
    t.do("advance_clock", seconds=12)
    t.do("set_order", order=[a])
    assert t.char(b).regained_at == 12
    t.do("advance_clock", seconds=5)
    assert t.char(b).regained_this_turn
    t.do("advance_clock", seconds=1)
    assert not t.char(b).regained_this_turn
    ok(t)


# ---------------------------------------------------------------- T2: the pinned advance


def test_T2_advance_clock_from_the_current_clock_advances():
    t = Table()
    t.do("advance_clock", seconds=60, **{"from": 0})
    assert t.room.clock == 60


def test_T2_advance_clock_sent_twice_with_from_advances_once():
    """T2 (`from` ruling): an advance naming the clock it started from is a
    `conflict` once the clock has moved, so a VTT's duplicate changes nothing."""
    t = Table()
    t.do("advance_clock", seconds=60, **{"from": 0})
    err = refused(t, Conflict, "advance_clock", seconds=60, **{"from": 0})
    assert "clock is at 60" in err.message
    assert t.room.clock == 60


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_T2_advance_clock_from_must_be_a_clock_value(bad):
    t = Table()
    refused(t, InvalidArgs, "advance_clock", seconds=6, **{"from": bad})


# ---------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_T1_set_order_keeps_the_turn_and_every_invariant(data):
    """T1 (set_order): for any sequence of tracker edits and turn ends, the
    invariants hold; without `turn` the current combatant keeps the turn
    whenever it stays, and the round (and the clock) move only when nobody
    after it stays; with `turn` the turn is where it says."""
    t = Table()
    ids = [t.add(n) for n in "ABCDEF"]
    t.down(ids[1])
    t.stabilised(ids[2])
    t.do("combat_start", order=ids[:3])
    for _ in range(data.draw(st.integers(1, 12))):
        if data.draw(st.booleans()):
            cur, rnd, _ = turn(t)
            t.do("end_turn", char=cur, round=rnd)
            continue
        order = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=6, unique=True))
        place = data.draw(st.one_of(st.none(), st.integers(0, len(order))))
        old = list(t.room.combat.order)
        before = turn(t)
        clock = t.room.clock
        if any(c not in old and t.char(c).condition == "dead" for c in order):
            refused(t, RuleBroken, "set_order", order=order, turn=place)
            continue
        t.do("set_order", order=order, turn=place)
        cur, rnd, idx = turn(t)
        assert t.room.combat.order == order and order[idx] == cur
        if place is None:
            after = [c for c in old[before[2] + 1 :] if c in order]
            wraps = before[0] not in order and not after
        else:
            wraps = place == len(order)
        if wraps:
            assert (rnd, idx, t.room.clock) == (before[1] + 1, 0, clock + 6)
        else:
            assert (rnd, t.room.clock) == (before[1], clock)
            if place is not None:
                assert idx == place
            elif before[0] in order:
                assert cur == before[0]
            else:
                assert cur == after[0]
        for c in order:
            assert t.char(c).dying_next is None and t.char(c).activity is None
        ok(t)
