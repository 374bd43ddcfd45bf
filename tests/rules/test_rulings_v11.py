"""The rulings added in v1.1 of the rule set, one by one (docs/rules.md says each
in the project's words). The Bounds ruling has its own file (test_bounds.py)
and T2's collapse of repeated D5 losses is in test_time.py.

Default sheet: level 3, PV 20, PE 15, PP 6 (S3 costs 1), Con 14; a round is 6 s.
"""

from __future__ import annotations

import pytest

from rules import RuleBroken
from tests.helpers.table import Table
from tests.rules.rulekit import HOUR, ok, refused

# ------------------------------------------- S4/T1 at the end of a combat


def test_S4_T1_v11_combatant_allowance_counts_a_full_round_from_the_combat_end():
    """S4/T1 v1.1: a combatant's used allowance resets a full round after the
    combat's end, not a round after its use (world time passed in combat,
    whole rounds of it, reset nothing)."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)
    t.do("combat_start", order=[b, a])
    t.do("stabilize", char=a)  # S3 at clock 0, on B's turn
    t.do("end_turn", char=b)  # A's own turn now; it has not ended
    refused(t, RuleBroken, "stay_in_fight", char=a)
    t.do("advance_clock", seconds=30)  # clock 30: five rounds' time, still in combat
    assert t.char(a).regained_this_turn is True
    t.do("combat_end")  # at 30
    assert (t.char(a).regained_this_turn, t.char(a).regained_at) == (True, 30)
    t.do("advance_clock", seconds=5)  # 35
    refused(t, RuleBroken, "stay_in_fight", char=a)
    t.do("advance_clock", seconds=1)  # 36 = 30 + one round
    assert (t.char(a).regained_this_turn, t.char(a).regained_at) == (False, None)
    t.do("stay_in_fight", char=a)
    assert (t.char(a).condition, t.char(a).pv, t.char(a).pp) == ("conscious", 1, 4)
    ok(t)


def test_S4_T1_v11_allowance_reset_by_its_own_turn_end_stays_free_after_combat():
    """S4/T1 v1.1: only an allowance still used when the combat ends waits a
    round; one its own turn's end already reset is free at once."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)
    t.do("combat_start", order=[a, b])
    t.do("stabilize", char=a)  # on its own turn
    t.do("end_turn", char=a)  # reset
    t.do("combat_end")
    assert (t.char(a).regained_this_turn, t.char(a).regained_at) == (False, None)
    t.do("stay_in_fight", char=a)
    assert t.char(a).condition == "conscious"


def test_S4_T1_v11_allowance_of_a_character_outside_the_order_keeps_its_own_count():
    """S4/T1 v1.1 (with the D5 ruling): a character outside the order used its
    allowance outside combat; the combat's end does not restart its round."""
    t = Table()
    a, b, c = t.add("A"), t.add("B"), t.add("C")
    t.do("combat_start", order=[a, b])
    t.down(c)
    t.do("stabilize", char=c)  # at 0, outside the order: counts world time
    assert t.char(c).regained_at == 0
    t.do("advance_clock", seconds=4)
    t.do("combat_end")  # at 4
    assert t.char(c).regained_at == 0
    t.do("advance_clock", seconds=2)  # 6 = 0 + one round (not 4 + 6)
    assert t.char(c).regained_this_turn is False
    t.do("stay_in_fight", char=c)


# ------------------------------------------- D5, characters outside the order


def test_D5_v11_dying_outside_order_keeps_count_at_combat_end():
    """D5 v1.1: a character dying outside the order while a combat runs is
    already outside combat; the combat's end does not restart its count,
    while a combatant's count does restart then."""
    t = Table()
    a, b, c = t.add("A"), t.add("B"), t.add("C")
    t.do("combat_start", order=[a, b])
    t.down(c)  # at 0, outside the order: next loss at 6
    t.down(a)  # at 0, in the order (on its own turn): turn-based
    assert (t.char(c).dying_next, t.char(a).dying_next) == (6, None)
    t.do("advance_clock", seconds=4)
    t.do("combat_end")  # at 4
    assert t.char(c).dying_next == 6  # kept
    assert t.char(a).dying_next == 10  # the combatant: a round from the end
    t.do("advance_clock", seconds=2)  # 6
    assert (t.char(c).pp, t.char(a).pp) == (5, 6)
    assert [(e["char"], e["at"]) for e in t.kinds("pp")] == [(c, 6)]
    t.do("advance_clock", seconds=4)  # 10
    assert (t.char(c).pp, t.char(a).pp) == (5, 5)
    ok(t)


def test_D5_v11_outside_order_loses_by_world_time_through_the_combat_rounds():
    """D5 v1.1: outside the order, the combat's rounds are world time like
    any other; ending the combat mid-round changes nothing for it."""
    t = Table()
    a, c = t.add("A"), t.add("C")
    t.down(c)  # at 0
    t.do("combat_start", order=[a])
    t.do("end_turn", char=a)  # round 2: clock 6, C's first loss
    t.do("end_turn", char=a)  # round 3: clock 12, its second
    assert (t.room.clock, t.char(c).pp) == (12, 4)
    t.do("advance_clock", seconds=3)
    t.do("combat_end")  # at 15
    t.do("advance_clock", seconds=3)  # 18: its third, on its own count
    assert t.char(c).pp == 3


# ------------------------------------------- D4 and ability damage


@pytest.mark.parametrize("kind", ["short", "night", "bed"])
@pytest.mark.parametrize("ability", ["str", "con"])
def test_D4_v11_ability_damage_does_not_end_a_rest(kind, ability):
    """D4 v1.1: ability damage (A1) is not damage to PE/PV: the rest goes on
    and completes with its benefits (the nights' and bed rest's ability
    recovery included)."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=10)  # PE 5
    t.do("rest", char=a, kind=kind)
    ends = t.char(a).activity.ends
    t.do("ability_damage", char=a, ability=ability, amount=4)
    assert t.kinds("rest") == []
    assert t.char(a).activity is not None and t.char(a).activity.ends == ends
    t.do("advance_clock", seconds=ends - t.room.clock)
    assert [e["outcome"] for e in t.kinds("rest")] == ["complete"]
    recovered = {"short": 0, "night": 1, "bed": 2}[kind]
    assert t.char(a).ability_damage[ability] == 4 - recovered
    assert t.char(a).pe == t.char(a).pe_max
    ok(t)


def test_D4_v11_lethal_constitution_damage_still_ends_the_rest_by_death():
    """D4 v1.1 with A2: Constitution damage equal to the score kills, and a
    dead character rests no more (R4: it stopped being conscious)."""
    t = Table()
    a = t.add()
    t.do("rest", char=a, kind="night")
    t.do("ability_damage", char=a, ability="con", amount=14)
    assert t.char(a).condition == "dead" and t.char(a).activity is None
    assert [e["cause"] for e in t.kinds("rest")] == ["dead"]


# ------------------------------------------- round_seconds changed while dying


def test_D5_v11_round_seconds_change_keeps_the_scheduled_loss_then_uses_the_new_length():
    """round_seconds v1.1: the loss already scheduled stays at its time; the
    ones after it follow the new round length."""
    t = Table()
    a = t.add()
    t.down(a)  # next loss at 6
    t.do("advance_clock", seconds=2)
    t.do("update_room", round_seconds=60)
    assert t.char(a).dying_next == 6
    t.do("advance_clock", seconds=4)  # 6: the scheduled loss
    assert (t.char(a).pp, t.char(a).dying_next) == (5, 66)
    t.do("advance_clock", seconds=59)  # 65
    assert t.char(a).pp == 5
    t.do("advance_clock", seconds=1)  # 66
    assert t.char(a).pp == 4


def test_D5_v11_shorter_round_seconds_does_not_bring_the_scheduled_loss_forward():
    """round_seconds v1.1, the other way: from 60 s to 1 s the loss scheduled
    at 60 stays at 60, then one a second, collapsed into one event (T2)."""
    t = Table(round_seconds=60)
    a = t.add()
    t.down(a)  # next loss at 60
    t.do("advance_clock", seconds=10)
    t.do("update_room", round_seconds=1)
    t.do("advance_clock", seconds=49)  # 59
    assert t.char(a).pp == 6
    t.do("advance_clock", seconds=100)  # 159: losses at 60, 61, ... 65: dead at 65
    assert t.kinds("pp") == [
        {"kind": "pp", "char": a, "delta": -6, "cause": "dying", "rounds": 6, "at": 65}
    ]
    assert (t.char(a).condition, t.kinds("condition")[0]["at"]) == ("dead", 65)


def test_D5_v11_round_seconds_change_leaves_in_combat_losses_to_the_turns():
    """round_seconds v1.1: in combat the losses follow the turns whatever the
    round length; the new length counts from the combat's end."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)
    t.do("combat_start", order=[a, b])
    t.do("update_room", round_seconds=600)
    t.do("end_turn", char=a)
    t.do("end_turn", char=b)  # round 2: clock 600
    assert (t.room.clock, t.char(a).pp) == (600, 5)
    t.do("combat_end")
    assert t.char(a).dying_next == 1200


def test_S4_round_seconds_change_moves_a_pending_out_of_combat_reset():
    """S4 (engine ruling beside the v1.1 one, docs/rules.md): outside combat
    the round that frees the allowance is measured with the round length in
    force when it falls due, so a longer round delays a pending reset."""
    t = Table()
    a = t.add()
    t.down(a)
    t.do("stabilize", char=a)  # at 0: free at 6 with 6-second rounds
    t.do("update_room", round_seconds=60)
    t.do("advance_clock", seconds=59)
    refused(t, RuleBroken, "stay_in_fight", char=a)
    t.do("advance_clock", seconds=1)  # 60
    t.do("stay_in_fight", char=a)


# ------------------------------------------- S3/S4 once per the own turn cycle


def test_S3_S4_v11_allowance_used_on_another_turn_lasts_until_the_own_next_turn_end():
    """S3/S4 v1.1: used on another combatant's turn, the allowance stays used
    through the other turns and the round's change (a full round of world
    time included) until the end of the character's own next turn."""
    t = Table()
    a, b, c = t.add("A"), t.add("B"), t.add("C")
    t.down(b)
    t.do("combat_start", order=[a, b, c])
    t.do("end_turn", char=a)
    t.do("end_turn", char=b)  # B loses 1 PP (D5), its allowance is free
    t.do("stabilize", char=b)  # on C's turn, round 1
    for who in (c, a):  # C's turn ends (round 2 starts, +6 s), then A's
        refused(t, RuleBroken, "stay_in_fight", char=b)
        t.do("end_turn", char=who)
    assert (t.room.combat.round, t.room.clock) == (2, 6)
    refused(t, RuleBroken, "stay_in_fight", char=b)  # still used on its own turn
    t.do("end_turn", char=b)  # the end of its own next turn
    assert t.char(b).regained_this_turn is False
    t.do("stay_in_fight", char=b)  # on C's turn of round 2
    assert (t.char(b).condition, t.char(b).pp) == ("conscious", 3)
    ok(t)


def test_S3_S4_v11_allowance_used_on_its_own_turn_resets_at_that_turn_end():
    """S3/S4 v1.1: used on its own turn, the allowance is back once that turn
    ends (its own turn cycle), not a whole round later."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)
    t.do("combat_start", order=[a, b])
    t.do("stabilize", char=a)
    t.do("end_turn", char=a)
    t.do("stay_in_fight", char=a)  # on B's turn, same round
    assert t.char(a).condition == "conscious"


def test_S3_S4_v11_clock_advance_in_combat_does_not_reset_a_combatant_allowance():
    """S3/S4 v1.1: for a combatant only its own turn's end counts; any world
    time the GM advances during the combat does not."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)
    t.do("combat_start", order=[b, a])
    t.do("stabilize", char=a)
    t.do("advance_clock", seconds=HOUR - 1)  # 600 rounds of time, before its first L1 check
    assert t.char(a).regained_this_turn is True
    refused(t, RuleBroken, "stay_in_fight", char=a)
