"""The rulings added in v1.2 of the rule set, one by one (docs/rules.md says each in
the project's words): D5's exemption lost when the turn is passed over, T3
(dead combatants are passed over, a room setting) and T4 (initiative).

Default sheet: level 3, PV 20, PE 15, PP 6, Dex 14 (+2), Con 14; a round is 6 s.
"""

from __future__ import annotations

from rules import (
    Forbidden,
    InvalidArgs,
    NotFound,
    Room,
    RuleBroken,
    Viewer,
    diff,
    revert,
    view_events,
    view_state,
)
from tests.helpers.table import Table
from tests.rules.rulekit import ch, combat, kill, ok, refused, turn

# ------------------------------------------------------------ D5, a turn passed over


def test_D5_v12_turn_passed_over_by_set_order_costs_pp_at_the_next_own_turn():
    """D5 v1.2: A starts dying on its own turn; the GM's tracker edit gives the
    turn to B (A's turn passed over, no end-of-turn rule). The exemption was
    for that turn only: the end of A's next own turn costs 1 PP."""
    t, (a, b) = combat(2)
    t.down(a)
    assert t.char(a).dying_fresh
    t.do("set_order", order=[a, b], turn=1)  # passed over
    assert not t.char(a).dying_fresh
    t.do("end_turn", char=b)  # round 2, A's turn
    assert turn(t) == (a, 2, 0)
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    assert t.kinds("pp") == [{"kind": "pp", "char": a, "delta": -1, "cause": "dying"}]
    ok(t)


def test_D5_v12_turn_passed_over_by_ending_the_round_costs_pp_at_the_next_own_turn():
    """D5 v1.2: the same when the edit ends the round (`turn` = the order's
    length), even for a lone combatant whose next turn follows at once."""
    t, (a,) = combat(1)
    t.down(a)
    t.do("set_order", order=[a], turn=1)  # the round ends: round 2, A's turn again
    assert turn(t) == (a, 2, 0) and t.char(a).pp == 6
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    ok(t)


def test_D5_v12_turn_passed_over_by_a_reorder_costs_pp_at_the_next_own_turn():
    """D5 v1.2: a reorder whose `turn` names another combatant passes A over."""
    t, (a, b, c) = combat(3)
    t.down(a)
    t.do("set_order", order=[b, a, c], turn=0)  # B's turn now, A's turn passed over
    t.do("end_turn", char=b)
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    ok(t)


def test_D5_v12_leaving_the_order_and_coming_back_costs_pp_at_the_next_own_turn():
    """D5 v1.2: A starts dying on its turn, leaves the order and comes back:
    the end of its next own turn costs 1 PP."""
    t, (a, b) = combat(2)
    t.down(a)
    t.do("set_order", order=[b])
    t.do("set_order", order=[b, a])
    t.do("end_turn", char=b)
    assert turn(t) == (a, 1, 1)
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    ok(t)


def test_D5_v12_a_reorder_that_keeps_the_turn_keeps_the_exemption():
    """D5 v1.2: only the turn passed over loses the exemption; a reorder that
    leaves A its turn does not, so the end of that very turn is still free."""
    t, (a, b) = combat(2)
    t.down(a)
    t.do("set_order", order=[b, a])  # A keeps its turn, now at index 1
    assert turn(t) == (a, 1, 1) and t.char(a).dying_fresh
    t.do("end_turn", char=a)
    assert t.char(a).pp == 6
    ok(t)


# ------------------------------------------------------------ T3 Dead combatants


def test_T3_end_turn_passes_over_a_dead_combatant():
    """T3: the dead stay in the order but an end of turn that would give one
    the turn gives it to the next living combatant; nothing runs for the dead."""
    t, (a, b, c) = combat(3)
    kill(t, b)
    dead_before = ch(t, b)
    t.do("end_turn", char=a)
    assert turn(t) == (c, 1, 2)
    assert t.events == [{"kind": "turn", "char": c, "round": 1, "turn": 2}]
    assert t.room.combat.order == [a, b, c] and ch(t, b) == dead_before
    ok(t)


def test_T3_a_round_ends_as_usual_when_the_order_wraps_past_the_dead():
    """T3: the dead last and first in the order: the round ends when the order
    wraps (time advances once) and the first living combatant has the turn."""
    t, (a, b, c, d) = combat(4)
    t.do("end_turn", char=a)
    kill(t, a)
    kill(t, d)
    t.do("end_turn", char=b)
    t.do("end_turn", char=c)  # D is dead, the order wraps, A is dead: B
    assert turn(t) == (b, 2, 1) and t.room.clock == 6
    assert [e["kind"] for e in t.events] == ["clock", "turn"]
    ok(t)


def test_T3_the_current_combatant_dying_during_its_turn_keeps_it_until_it_ends():
    """T3 (ruling): dying during its own turn does not end it; the GM (or its
    owner: D6 allows end_turn) ends it, and from then on it is passed over."""
    t = Table()
    a, b = t.add("A", owner=t.p1), t.add("B")
    t.do("combat_start", order=[a, b])
    kill(t, a)
    assert turn(t) == (a, 1, 0)
    t.do("end_turn", by=t.p1, char=a)
    assert turn(t) == (b, 1, 1)
    t.do("end_turn", char=b)  # the order wraps past A
    assert turn(t) == (b, 2, 1) and t.room.clock == 6
    ok(t)


def test_T3_every_combatant_dead_each_end_of_turn_ends_one_round():
    """T3 (ruling): with every combatant dead nobody takes the turn: an end of
    turn ends the round (time advances one round, not a loop) and the top of
    the order holds an empty turn the GM ends, as Foundry does."""
    t, (a, b) = combat(2)
    kill(t, b)
    kill(t, a)
    t.do("end_turn", char=a)
    assert turn(t) == (a, 2, 0) and t.room.clock == 6
    t.do("end_turn", char=a)
    assert turn(t) == (a, 3, 0) and t.room.clock == 12
    ok(t)


def test_T3_a_combatant_killed_by_the_rounds_time_is_passed_over_at_once():
    """T3: the round's end runs T2 before the turn is given; a stable
    combatant whose hourly check kills it there does not get the turn."""
    t = Table(round_seconds=3600)
    a, b = t.add("A"), t.add("B")
    t.stabilised(a)  # stable since 0: its first check at 3600, the first round's end
    t.do("combat_start", order=[a, b])
    t.do("end_turn", char=a)
    t.dice.push(1)  # 1 + 2 < 10: dies (L1)
    t.do("end_turn", char=b)
    assert t.char(a).condition == "dead"
    assert turn(t) == (b, 2, 1)
    ok(t)


def test_T3_setting_off_a_dead_combatant_gets_an_empty_turn_the_gm_ends():
    """T3: with the room's `skip_dead` off the dead one's turn comes round; it
    is an empty turn (no end-of-turn rule) that the GM ends."""
    t, (a, b, c) = combat(3)
    t.do("update_room", skip_dead=False)
    assert t.events == [
        {"kind": "room", "name": t.room.name, "round_seconds": 6, "skip_dead": False}
    ]
    assert t.room.to_dict()["skip_dead"] is False
    kill(t, b)
    t.do("end_turn", char=a)
    assert turn(t) == (b, 1, 1)
    t.do("end_turn", char=b)
    assert turn(t) == (c, 1, 2)
    assert t.events == [{"kind": "turn", "char": c, "round": 1, "turn": 2}]
    t.do("update_room", skip_dead=True)  # back on: from the next end of turn
    t.do("end_turn", char=c)
    t.do("end_turn", char=a)
    assert turn(t) == (c, 2, 2)
    ok(t)


def test_T3_the_setting_is_on_by_default_and_a_state_without_it_reads_as_on():
    t = Table()
    assert t.room.skip_dead is True and t.room.to_dict()["skip_dead"] is True
    old = t.room.to_dict()
    del old["skip_dead"]
    assert Room.from_dict(old).skip_dead is True
    refused(t, InvalidArgs, "update_room", skip_dead="yes")
    refused(t, Forbidden, "update_room", by=t.p1, skip_dead=False)


def test_T3_set_order_passing_the_turn_on_skips_the_dead():
    """T3: when a tracker edit removes the current combatant, the turn goes on
    to the next living one (as an end of turn would); a `turn` the sender
    names is given as named, even to a dead one."""
    t, (_a, b, c) = combat(3)
    kill(t, b)
    t.do("set_order", order=[b, c])  # A leaves; B after it stays but is dead: C
    assert turn(t) == (c, 1, 1)
    t.do("set_order", order=[b, c], turn=0)  # the sender's word
    assert turn(t) == (b, 1, 0)
    ok(t)


def test_T3_removing_the_current_combatant_skips_the_dead():
    t, (a, b, c) = combat(3)
    kill(t, b)
    t.do("remove_character", char=a)
    assert turn(t) == (c, 1, 1)
    ok(t)


def test_T3_undo_of_an_end_of_turn_that_passed_over_the_dead():
    """T3 and undo: reverting the end of turn gives the turn back to the one
    who had it, dead combatant and round as they were."""
    t, (a, b, c) = combat(3)
    kill(t, c)
    t.do("end_turn", char=a)
    before = t.room.to_dict()
    t.do("end_turn", char=b)  # past C, the round ends: A in round 2
    assert turn(t) == (a, 2, 0)
    after = t.room.to_dict()
    restored = revert(t.room, after, diff(after, before), 9)
    assert restored.to_dict() == before
    assert restored.combat is not None and restored.combat.current == b


# ------------------------------------------------------------ T4 Initiative


def dex(score: int) -> dict[str, int]:
    return {"str": 10, "dex": score, "con": 14, "int": 10, "wis": 12, "cha": 8}


def test_T4_roll_initiative_without_a_combat_starts_one_in_sorted_order():
    """T4: d20 + Dex modifier + the GM's bonus for each; the combat starts in
    that order (round 1, the top's turn); each roll is an X2 event."""
    t = Table()
    a = t.add("A", abilities=dex(10))  # +0
    b = t.add("B", abilities=dex(16))  # +3
    c = t.add("C", abilities=dex(8))  # -1
    t.do("rest", char=c, kind="night")
    t.dice.push(10, 5, 18)  # A, B, C in character order
    t.do("roll_initiative", chars=[c, b, a], bonus={a: 4})
    assert t.room.combat is not None
    assert (t.room.combat.order, turn(t)) == ([c, a, b], (c, 1, 0))
    assert t.room.initiative == {a: 14, b: 8, c: 17}
    rolls = t.kinds("roll")
    assert rolls == [
        {"kind": "roll", "char": a, "check": "initiative", "d20": 10, "mod": 0, "bonus": 4,
         "total": 14, "dc": None, "outcome": "rolled", "source": "server"},
        {"kind": "roll", "char": b, "check": "initiative", "d20": 5, "mod": 3, "bonus": 0,
         "total": 8, "dc": None, "outcome": "rolled", "source": "server"},
        {"kind": "roll", "char": c, "check": "initiative", "d20": 18, "mod": -1, "bonus": 0,
         "total": 17, "dc": None, "outcome": "rolled", "source": "server"},
    ]  # fmt: skip
    kinds = [e["kind"] for e in t.events]
    assert kinds == ["roll", "roll", "roll", "rest", "combat", "turn"]  # R4 as combat_start
    assert t.char(c).activity is None
    ok(t)


def test_T4_the_dexterity_modifier_includes_ability_damage():
    """T4 with A1: 4 points of Dex damage cost 2 points of modifier."""
    t = Table()
    a, b = t.add("A", abilities=dex(14)), t.add("B", abilities=dex(10))
    t.do("ability_damage", char=a, ability="dex", amount=4)  # +2 -> +0
    t.do("roll_initiative", chars=[a, b], rolls={a: 10, b: 11})
    assert [e["mod"] for e in t.kinds("roll")] == [0, 0]
    assert t.room.combat.order == [b, a]


def test_T4_ties_go_to_the_higher_dexterity_modifier_then_character_order():
    t = Table()
    a = t.add("A", abilities=dex(10))  # +0
    b = t.add("B", abilities=dex(14))  # +2
    c = t.add("C", abilities=dex(14))  # +2
    d = t.add("D", abilities=dex(10))  # +0
    t.do("roll_initiative", chars=[d, c, b, a], rolls={a: 12, b: 10, c: 10, d: 12})
    # All total 12: B and C (+2) first, in character order; then A and D.
    assert t.room.combat.order == [b, c, a, d]


def test_T4_physical_dice_the_gms_own_then_the_queue_then_the_servers():
    """T4 with X1: `rolls` are the GM's dice at the table; the others take the
    queue in character order, then the server's dice; X2 says which."""
    t = Table()
    a, b, c = t.add("A"), t.add("B"), t.add("C")
    t.do("queue_rolls", rolls=[7])
    t.dice.push(3)
    t.do("roll_initiative", chars=[c, b, a], rolls={b: 20})
    assert [(e["char"], e["d20"], e["source"]) for e in t.kinds("roll")] == [
        (a, 7, "queued"),
        (b, 20, "gm"),
        (c, 3, "server"),
    ]
    assert t.room.queued_rolls == [] and t.dice.rolls == []


def test_T4_rolled_in_a_running_combat_the_current_combatant_keeps_its_turn():
    """T4: the order is sorted again; as in any tracker edit the current
    combatant keeps its turn (no end-of-turn rule runs, no time passes)."""
    t, (a, b, c) = combat(3)
    t.do("end_turn", char=a)  # B's turn
    t.do("roll_initiative", rolls={a: 1, b: 10, c: 20})
    assert t.room.combat.order == [c, b, a]
    assert turn(t) == (b, 1, 1) and t.room.clock == 0
    assert t.events[-1] == {
        "kind": "combat", "outcome": "order", "order": [c, b, a], "joined": [], "left": [],
    }  # fmt: skip
    ok(t)


def test_T4_rolled_at_the_very_start_of_a_combat_the_top_acts_first():
    """T4 (ruling): in round 1 before the first turn ends nobody has acted:
    the turn goes to the top of the sorted order."""
    t, (a, b, c) = combat(3)
    t.do("roll_initiative", rolls={a: 1, b: 10, c: 20})
    assert turn(t) == (c, 1, 0)
    assert t.events[-1] == {"kind": "turn", "char": c, "round": 1, "turn": 0}
    ok(t)


def test_T4_rolling_for_a_newcomer_places_it_among_the_rolled():
    """T4: totals stay for the combat, so one newcomer's roll places it;
    combatants never rolled for come after the rolled, in their order."""
    t, (a, b) = combat(2)
    t.do("roll_initiative", rolls={a: 5, b: 15})  # B 17, A 7
    n, late = t.add("N"), t.add("L")
    t.do("set_order", order=[b, a, late, n])
    t.do("roll_initiative", chars=[n], rolls={n: 10})  # N 12
    assert t.room.combat.order == [b, n, a, late]
    assert t.room.initiative == {a: 7, b: 17, n: 12}
    ok(t)


def test_T4_the_gm_may_still_set_the_order_by_hand():
    """T4: set_order after a roll is obeyed; the totals stay (a leaver's go)
    and a combat's end clears them."""
    t, (a, b, c) = combat(3)
    t.do("roll_initiative", rolls={a: 5, b: 15, c: 10})
    t.do("set_order", order=[a, b])
    assert t.room.combat.order == [a, b]
    assert t.room.initiative == {a: 7, b: 17}
    t.do("combat_end")
    assert t.room.initiative == {} and t.room.to_dict()["initiative"] == {}
    ok(t)


def test_T4_the_dead_keep_their_place_and_do_not_roll():
    """T4 with T3 and D6: by default only the living combatants roll; naming
    a dead one is refused."""
    t, (a, b, c) = combat(3)
    t.do("end_turn", char=a)
    kill(t, c)
    t.do("roll_initiative", rolls={a: 20, b: 1})
    assert [e["char"] for e in t.kinds("roll")] == [a, b]
    assert t.room.combat.order == [a, b, c]
    refused(t, RuleBroken, "roll_initiative", chars=[c])


def test_T4_refusals():
    t = Table()
    a, b = t.add("A"), t.add("B", owner=t.p1)
    refused(t, RuleBroken, "roll_initiative")  # no combat: name the combatants
    refused(t, RuleBroken, "roll_initiative", chars=[a, a])
    refused(t, RuleBroken, "roll_initiative", chars=[a], bonus={b: 1})
    refused(t, RuleBroken, "roll_initiative", chars=[a], rolls={b: 1})
    refused(t, NotFound, "roll_initiative", chars=[a, "c9"])
    refused(t, NotFound, "roll_initiative", chars=[a], bonus={"c9": 1})
    refused(t, InvalidArgs, "roll_initiative", chars=[a], rolls={a: 21})
    refused(t, InvalidArgs, "roll_initiative", chars=[a], bonus=[1])
    refused(t, InvalidArgs, "roll_initiative", chars=[])
    refused(t, Forbidden, "roll_initiative", by=t.p1, chars=[b])
    t.do("combat_start", order=[a])
    err = refused(t, RuleBroken, "roll_initiative", chars=[b])
    assert "set_order" in str(err)
    kill(t, a)
    err = refused(t, RuleBroken, "roll_initiative")  # every combatant dead: nobody rolls
    assert "dead" in str(err)


def test_T4_totals_are_the_gms_only_and_each_player_sees_their_own_roll():
    """T4 and views: `initiative` is GM-only state; a player gets the event
    of their own character's roll, and a hidden NPC's roll not at all."""
    t = Table()
    a = t.add("A", owner=t.p1, shown="full")
    h = t.add("H", shown="hidden")
    out = t.do("roll_initiative", chars=[a, h], rolls={a: 3, h: 4})
    before = out.room.to_dict()  # the same state before and after suffices for the filter
    player = Viewer(t.p1.user, "player")
    assert "initiative" not in view_state(before, player)
    seen = view_events(out.events, before, before, player)
    assert [e.get("char") for e in seen if e["kind"] == "roll"] == [a]
    assert all(h not in (e.get("order") or []) for e in seen)


def test_T4_undo_restores_the_order_and_the_totals():
    t, (a, b) = combat(2)
    before = t.room.to_dict()
    t.do("roll_initiative", rolls={a: 1, b: 20})
    after = t.room.to_dict()
    restored = revert(t.room, after, diff(after, before), 4)
    assert restored.to_dict() == before
