"""Stabilising (S1-S4), rule by rule (docs/rules.md, "Stabilising").

Default sheet: level 3, PV 20, PE 15, PP 6, Con 14, Medicine +5; round 6 s.
"""

from __future__ import annotations

import pytest

from rules import Forbidden, RuleBroken
from tests.helpers.table import Table
from tests.rules.rulekit import HOUR, ch, kill, knocked_out, ok, refused, state

# ---------------------------------------------------------------- S1


@pytest.mark.parametrize(("d20", "medicine", "total"), [(10, 5, 15), (20, 5, 25), (1, 14, 15)])
def test_S1_first_aid_success_makes_the_patient_stable(d20, medicine, total):
    """S1: Medicine check (d20 + medicine) against DC 15 by another, conscious
    character on a dying one; success: stable at 0 PV, clock started (L3)."""
    t = Table()
    a, b = t.add("A"), t.add("B", medicine=medicine)
    t.do("advance_clock", seconds=30)
    t.down(a)
    t.dice.push(d20)
    t.do("first_aid", char=b, patient=a)
    c = t.char(a)
    assert (c.condition, c.pv, c.pp, c.stable_since, c.nonlethal) == ("stable", 0, 6, 30, False)
    assert ch(t, a)["dying_next"] is None
    assert t.events == [
        {
            "kind": "roll",
            "char": b,
            "check": "medicine",
            "d20": d20,
            "mod": medicine,
            "bonus": 0,
            "total": total,
            "dc": 15,
            "outcome": "success",
            "source": "server",
            "patient": a,
        },
        {"kind": "condition", "char": a, "from": "dying", "to": "stable", "cause": "first_aid"},
    ]
    ok(t)


@pytest.mark.parametrize(("d20", "medicine"), [(9, 5), (1, 5), (20, -6)])
def test_S1_first_aid_failure_changes_nothing_but_records_the_roll(d20, medicine):
    """S1: failure changes nothing; the roll is still recorded as an event."""
    t = Table()
    a, b = t.add("A"), t.add("B", medicine=medicine)
    t.down(a)
    before = state(t)
    t.dice.push(d20)
    t.do("first_aid", char=b, patient=a)
    assert state(t) == before
    assert [e["kind"] for e in t.events] == ["roll"]
    roll = t.events[0]
    assert (roll["d20"], roll["total"], roll["dc"], roll["outcome"]) == (
        d20,
        d20 + medicine,
        15,
        "failure",
    )
    assert t.dice.used == [d20]


def test_S1_first_aid_by_the_owner_of_the_medic():
    """S1 (role O): the owner of the medic may give first aid to anyone's
    dying character; the server rolls."""
    t = Table()
    a, b = t.add("A", owner=t.p2), t.add("B", owner=t.p1)
    t.down(a)
    t.dice.push(15)
    t.do("first_aid", by=t.p1, char=b, patient=a)
    assert t.char(a).condition == "stable"


def _first_aid_refusal(t, case):
    a, m = t.add("A"), t.add("M")
    if case == "self":
        t.down(a)
        return {"char": a, "patient": a}
    if case == "medic_dying":
        t.down(a)
        t.down(m)
    elif case == "medic_stable":
        t.down(a)
        t.stabilised(m)
    elif case == "medic_knocked_out":
        t.down(a)
        knocked_out(t, m)
    elif case == "patient_conscious":
        pass
    elif case == "patient_stable":
        t.stabilised(a)
    elif case == "patient_knocked_out":
        knocked_out(t, a)
    elif case == "patient_dead":
        kill(t, a)
    elif case == "medic_dead":
        t.down(a)
        kill(t, m)
    return {"char": m, "patient": a}


@pytest.mark.parametrize(
    "case",
    [
        "self",
        "medic_dying",
        "medic_stable",
        "medic_knocked_out",
        "medic_dead",
        "patient_conscious",
        "patient_stable",
        "patient_knocked_out",
        "patient_dead",
    ],
)
def test_S1_first_aid_needs_another_conscious_medic_and_a_dying_patient(case):
    """S1: "another, conscious character" on "a dying character"; anything
    else is a `rule` refusal that rolls nothing and changes nothing."""
    t = Table()
    args = _first_aid_refusal(t, case)
    refused(t, RuleBroken, "first_aid", **args)
    assert t.dice.used == []


# ---------------------------------------------------------------- S2


@pytest.mark.parametrize(("hurt", "amount", "pv", "gain"), [(10, 4, 14, 4), (10, 50, 20, 10)])
def test_S2_heal_raises_pv_capped_at_pv_max(hurt, amount, pv, gain):
    """S2 / R5: heal raises PV, capped at pv_max; PE untouched."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=hurt, pv_only=True)
    t.do("heal", char=a, amount=amount)
    assert (t.char(a).pv, t.char(a).pe, t.char(a).condition) == (pv, 15, "conscious")
    assert t.events == [
        {"kind": "heal", "char": a, "amount": amount, "pv": gain, "stabilize": False}
    ]


@pytest.mark.parametrize("setup", ["dying", "stable", "knocked_out"])
@pytest.mark.parametrize("stabilize", [False, True])
def test_S2_heal_to_one_pv_or_more_wakes(setup, stabilize):
    """S2: a character that reaches 1 PV or more becomes conscious (a dying
    one too, even with `stabilize`); the clocks are discarded (L3, D5)."""
    t = Table()
    a = t.add()
    {"dying": t.down, "stable": t.stabilised, "knocked_out": lambda c: knocked_out(t, c)}[setup](a)
    t.do("heal", char=a, amount=1, stabilize=stabilize)
    c = t.char(a)
    assert (c.condition, c.pv, c.pp, c.nonlethal) == ("conscious", 1, 6, False)
    assert (c.stable_since, ch(t, a)["dying_next"]) == (None, None)
    frm = "dying" if setup == "dying" else "stable"
    assert t.kinds("condition") == [
        {"kind": "condition", "char": a, "from": frm, "to": "conscious", "cause": "heal"}
    ]
    t.do("advance_clock", seconds=10 * HOUR)  # no PP loss, no check: no dice
    assert (t.char(a).pp, t.char(a).condition) == (6, "conscious")
    ok(t)


def test_S2_stabilizing_heal_makes_a_dying_character_stable_at_zero_pv():
    """S2: a heal marked `stabilize` makes a dying character stable even for 0 PV."""
    t = Table()
    a = t.add()
    t.do("advance_clock", seconds=7)
    t.down(a)
    t.do("heal", char=a, amount=0, stabilize=True)
    c = t.char(a)
    assert (c.condition, c.pv, c.stable_since, c.pp) == ("stable", 0, 7, 6)
    assert t.kinds("condition") == [
        {"kind": "condition", "char": a, "from": "dying", "to": "stable", "cause": "heal"}
    ]
    t.do("advance_clock", seconds=60)
    assert t.char(a).pp == 6  # no longer dying


@pytest.mark.parametrize("setup", ["dying", "stable"])
def test_S2_heal_of_zero_without_stabilize_changes_nothing(setup):
    """S2: 0 PV gained and no `stabilize`: the condition stays."""
    t = Table()
    a = t.add()
    getattr(t, {"dying": "down", "stable": "stabilised"}[setup])(a)
    before = state(t)
    t.do("heal", char=a, amount=0)
    assert state(t) == before


def test_S2_stabilizing_heal_on_a_stable_character_changes_nothing():
    """S2: `stabilize` concerns a dying character; a stable one keeps its clock."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    t.do("advance_clock", seconds=100)
    before = state(t)
    t.do("heal", char=a, amount=0, stabilize=True)
    assert state(t) == before


# ---------------------------------------------------------------- S3


@pytest.mark.parametrize(
    ("pp_max", "cost"),
    [(1, 1), (3, 1), (4, 1), (7, 1), (8, 2), (11, 2), (12, 3), (15, 3), (40, 3)],
)
def test_S3_spending_a_quarter_of_pp_max_makes_dying_stable(pp_max, cost):
    """S3: a dying character spends PP equal to a quarter of its pp_max
    (minimum 1, maximum 3) to become stable; it stays unconscious at 0 PV."""
    t = Table()
    a = t.add(pp_max=pp_max)
    t.do("advance_clock", seconds=3)
    t.down(a)
    t.do("stabilize", char=a)
    c = t.char(a)
    assert (c.condition, c.pv, c.pp, c.stable_since) == ("stable", 0, pp_max - cost, 3)
    assert t.events == [
        {"kind": "pp", "char": a, "delta": -cost, "cause": "stabilize"},
        {"kind": "condition", "char": a, "from": "dying", "to": "stable", "cause": "stabilize"},
    ]
    ok(t)


@pytest.mark.parametrize(("pp_max", "pp"), [(8, 1), (12, 2), (4, 0), (0, 0), (40, 2)])
def test_S3_refused_with_fewer_pp_than_the_cost(pp_max, pp):
    """S3: refused if it has fewer PP than the cost (`rule`, nothing spent)."""
    t = Table()
    a = t.add(pp_max=pp_max, pp=pp)
    t.down(a)
    refused(t, RuleBroken, "stabilize", char=a)


@pytest.mark.parametrize("pp_max", [4, 8, 12])
def test_S3_reaching_zero_pp_by_the_spend_does_not_kill(pp_max):
    """S3 ruling: spending its last PP does not kill, the character is no
    longer dying; it stays stable with time passing."""
    t = Table()
    cost = min(3, max(1, pp_max // 4))
    a = t.add(pp_max=pp_max, pp=cost)
    t.down(a)
    t.do("stabilize", char=a)
    assert (t.char(a).pp, t.char(a).condition) == (0, "stable")
    t.do("advance_clock", seconds=HOUR - 1)
    assert (t.char(a).pp, t.char(a).condition) == (0, "stable")


@pytest.mark.parametrize("setup", ["conscious", "stable", "knocked_out"])
def test_S3_only_a_dying_character_can_spend_pp_to_stabilise(setup):
    """S3: "a dying character may spend PP"; otherwise `rule`."""
    t = Table()
    a = t.add()
    if setup == "stable":
        t.stabilised(a)
    elif setup == "knocked_out":
        knocked_out(t, a)
    refused(t, RuleBroken, "stabilize", char=a)


def test_S3_by_the_owner_and_not_by_another_player():
    """S3 (role O): the character's owner may spend its PP, another player not."""
    t = Table()
    a = t.add(owner=t.p1)
    t.down(a)
    refused(t, Forbidden, "stabilize", by=t.p2, char=a)
    t.do("stabilize", by=t.p1, char=a)
    assert t.char(a).condition == "stable"


# ---------------------------------------------------------------- S4


def test_S4_stable_character_spends_one_pp_to_regain_one_pv_and_wake():
    """S4: a stable character with at least 1 PP spends 1 PP to regain 1 PV
    and become conscious."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    t.do("stay_in_fight", char=a)
    c = t.char(a)
    assert (c.condition, c.pv, c.pp, c.stable_since) == ("conscious", 1, 5, None)
    assert t.events == [
        {"kind": "pp", "char": a, "delta": -1, "cause": "stay_in_fight"},
        {
            "kind": "condition",
            "char": a,
            "from": "stable",
            "to": "conscious",
            "cause": "stay_in_fight",
        },
    ]
    ok(t)


def test_S4_nonlethal_knockout_qualifies_and_pays_the_same_one_pp():
    """S4: one downed by nonlethal damage qualifies the same way and pays 1 PP."""
    t = Table()
    a = t.add()
    knocked_out(t, a)
    t.do("stay_in_fight", char=a)
    c = t.char(a)
    assert (c.condition, c.pv, c.pp, c.nonlethal) == ("conscious", 1, 5, False)


def test_S4_refused_without_pp():
    """S4: "at least 1 PP"."""
    t = Table()
    a = t.add(pp_max=4, pp=1)
    t.down(a)
    t.do("stabilize", char=a)  # S3: the last PP
    t.do("advance_clock", seconds=6)  # the S3/S4 allowance is back
    refused(t, RuleBroken, "stay_in_fight", char=a)


@pytest.mark.parametrize("setup", ["conscious", "dying"])
def test_S4_only_a_stable_character_continues_the_fight(setup):
    """S4: "a stable character"; `rule` otherwise."""
    t = Table()
    a = t.add()
    if setup == "dying":
        t.down(a)
    refused(t, RuleBroken, "stay_in_fight", char=a)


def test_S4_S3_and_S4_share_one_allowance_per_turn_in_combat():
    """S4: at most once per turn, and not in the turn it used S3 (one
    allowance); it resets at the end of the character's own turn."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)
    t.do("combat_start", order=[a, b])
    t.do("stabilize", char=a)  # S3 in its turn
    assert t.char(a).regained_this_turn is True
    refused(t, RuleBroken, "stay_in_fight", char=a)
    t.do("end_turn", char=a)  # its own turn ends: the allowance resets
    assert t.char(a).regained_this_turn is False
    t.do("stay_in_fight", char=a)  # during B's turn
    assert (t.char(a).condition, t.char(a).pv, t.char(a).pp) == ("conscious", 1, 4)
    t.do("damage", char=a, amount=1)  # dying again, same turn
    refused(t, RuleBroken, "stabilize", char=a)
    t.do("end_turn", char=b)  # B's turn, not A's: no reset
    refused(t, RuleBroken, "stabilize", char=a)
    t.do("end_turn", char=a)
    t.do("stabilize", char=a)
    assert (t.char(a).condition, t.char(a).pp) == ("stable", 2)


def test_S4_twice_in_one_turn_is_refused():
    """S4: at most once per turn."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.stabilised(a)
    t.do("combat_start", order=[b, a])
    t.do("stay_in_fight", char=a)
    t.do("damage", char=a, amount=1)
    t.do("heal", char=a, amount=0, stabilize=True)
    refused(t, RuleBroken, "stay_in_fight", char=a)


def test_S4_outside_combat_allowance_resets_after_a_full_round():
    """S4: outside combat it resets once a full round of world time has passed
    since it was used."""
    t = Table()
    a = t.add()
    t.do("advance_clock", seconds=20)
    t.down(a)
    t.do("stabilize", char=a)  # at 20
    refused(t, RuleBroken, "stay_in_fight", char=a)
    t.do("advance_clock", seconds=5)
    refused(t, RuleBroken, "stay_in_fight", char=a)
    t.do("advance_clock", seconds=1)  # 26
    assert t.char(a).regained_this_turn is False
    t.do("stay_in_fight", char=a)
    assert (t.char(a).condition, t.char(a).pp) == ("conscious", 4)


def test_S4_allowance_of_a_combatant_counts_a_round_from_combat_end():
    """S4 (engine ruling, docs/rules.md): used in combat and not reset by a
    turn end, it resets a full round after the combat's end."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)
    t.do("combat_start", order=[b, a])
    t.do("stabilize", char=a)
    t.do("advance_clock", seconds=100)  # in combat time does not reset it
    assert t.char(a).regained_this_turn is True
    t.do("combat_end")  # at 100
    refused(t, RuleBroken, "stay_in_fight", char=a)
    t.do("advance_clock", seconds=5)
    refused(t, RuleBroken, "stay_in_fight", char=a)
    t.do("advance_clock", seconds=1)
    t.do("stay_in_fight", char=a)
    assert t.char(a).condition == "conscious"
