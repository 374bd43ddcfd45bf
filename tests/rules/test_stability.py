"""Long-term stability (L1-L5), rule by rule (docs/rules.md, "Long-term stability").

Default sheet: level 3, PV 20, PE 15, PP 6, Con 14 (modifier +2),
Medicine +5. A stable character checks at +1 h ... +8 h.
"""

from __future__ import annotations

import pytest

from rules import (
    Forbidden,
    Room,
    RuleBroken,
    Viewer,
    applied,
    apply_ops,
    diff,
    view_ops,
    view_state,
)
from rules.model import STABILITY_CHECKS
from rules.stability import next_check
from tests.helpers.table import Table
from tests.rules.rulekit import HOUR, knocked_out, ok, refused

# ---------------------------------------------------------------- L1


@pytest.mark.parametrize(
    ("d20", "total", "outcome", "condition", "pv"),
    [
        (20, 22, "wake", "conscious", 1),
        (18, 20, "wake", "conscious", 1),
        (17, 19, "stay", "stable", 0),
        (8, 10, "stay", "stable", 0),
        (7, 9, "die", "dead", 0),
        (1, 3, "die", "dead", 0),
    ],
)
def test_L1_hourly_constitution_check(d20, total, outcome, condition, pv):
    """L1: d20 + con modifier: >= 20 regains 1 PV and wakes; 10-19 stays
    stable; < 10 dies."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    t.dice.push(d20)
    t.do("advance_clock", seconds=HOUR)
    c = t.char(a)
    assert (c.condition, c.pv, c.pp) == (condition, pv, 6)
    assert t.kinds("roll") == [
        {
            "kind": "roll",
            "char": a,
            "check": "constitution",
            "d20": d20,
            "mod": 2,
            "bonus": 0,
            "total": total,
            "dc": None,
            "outcome": outcome,
            "source": "server",
            "hour": 1,
            "at": HOUR,
        }
    ]
    cause = {"wake": "stability_check", "die": "stability_check"}.get(outcome)
    if cause:
        assert t.kinds("condition") == [
            {
                "kind": "condition",
                "char": a,
                "from": "stable",
                "to": condition,
                "cause": cause,
                "at": HOUR,
            }
        ]
    else:
        assert t.kinds("condition") == []
        assert c.stability_checks == 1
    ok(t)


@pytest.mark.parametrize(("con", "mod"), [(10, 0), (6, -2), (20, 5), (3, -4)])
def test_L1_uses_the_con_modifier(con, mod):
    """L1: the check is d20 + con modifier."""
    t = Table()
    a = t.add(abilities={"str": 10, "dex": 10, "con": con, "int": 10, "wis": 10, "cha": 10})
    t.stabilised(a)
    t.dice.push(12)
    t.do("advance_clock", seconds=HOUR)
    roll = t.kinds("roll")[0]
    assert (roll["mod"], roll["total"]) == (mod, 12 + mod)


def test_L1_checks_fall_at_each_hour_after_becoming_stable():
    """L1: +1 h, +2 h, ... +8 h of world time after it became stable, and
    never before."""
    t = Table()
    a = t.add()
    t.do("advance_clock", seconds=100)
    t.stabilised(a)  # at 100
    t.do("advance_clock", seconds=HOUR - 1)
    assert t.kinds("roll") == [] and t.char(a).stability_checks == 0
    t.dice.push(*[12] * 7)
    t.do("advance_clock", seconds=7 * HOUR)  # to 100 + 8 h - 1
    rolls = t.kinds("roll")
    assert [r["at"] for r in rolls] == [100 + h * HOUR for h in range(1, 8)]
    assert [r["hour"] for r in rolls] == list(range(1, 8))
    c = t.char(a)
    assert (c.condition, c.stability_checks, c.stable_since) == ("stable", 7, 100)
    assert t.dice.rolls == []


def test_L1_a_check_that_wakes_stops_the_hourly_checks():
    """L1 + L3: once awake, no more checks (no dice are asked for)."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    t.dice.push(12, 12, 19)  # stay, stay, wake at +3 h
    t.do("advance_clock", seconds=10 * HOUR)
    c = t.char(a)
    assert (c.condition, c.pv, c.stable_since, c.stability_checks) == ("conscious", 1, None, 0)
    assert len(t.kinds("roll")) == 3


def test_L1_the_dict_form_says_when_the_next_check_falls():
    """L1: each character's dict carries `next_check`, the world second and
    number of its next hourly check (of STABILITY_CHECKS), null when it is
    not stable or has made them all; clients read it instead of working the
    schedule out."""
    t = Table()
    a, b = t.add(), t.add("Bruno")
    t.do("advance_clock", seconds=100)
    assert t.room.to_dict()["characters"][a]["next_check"] is None  # conscious
    t.down(a)
    assert t.room.to_dict()["characters"][a]["next_check"] is None  # dying
    t.stabilised(b)  # at 100
    t.dice.push(12, 12)  # stay, stay
    t.do("advance_clock", seconds=2 * HOUR)
    got = t.room.to_dict()["characters"][b]["next_check"]
    assert got == {"at": 100 + 3 * HOUR, "n": 3, "of": STABILITY_CHECKS}
    assert got["at"] == next_check(t.char(b))  # the scheduler's very instant
    t.dice.push(*[12] * 5)
    t.do("advance_clock", seconds=6 * HOUR - 1)  # the third to the seventh; the eighth 1 s away
    assert t.room.to_dict()["characters"][b]["next_check"] == {
        "at": 100 + 8 * HOUR,
        "n": 8,
        "of": 8,
    }
    t.dice.push(12)
    t.do("advance_clock", seconds=1)  # L2: still stable after the eighth, wakes
    assert t.char(b).condition == "conscious"
    assert t.room.to_dict()["characters"][b]["next_check"] is None


def test_L1_next_check_follows_a_correction_and_is_never_read_back():
    """L1, L3: derived like `mods`: a GM correction that ends the stability
    clears it, a new stabilisation starts it from zero, and a dict's own
    `next_check` is ignored by `from_dict` (recomputed)."""
    t = Table()
    a = t.add()
    t.stabilised(a)  # at 0
    t.dice.push(12)
    t.do("advance_clock", seconds=HOUR)
    assert t.room.to_dict()["characters"][a]["next_check"] == {"at": 2 * HOUR, "n": 2, "of": 8}
    t.do("update_character", char=a, set={"condition": "conscious", "pv": 1})
    assert t.room.to_dict()["characters"][a]["next_check"] is None
    t.stabilised(a)  # at 1 h: L3, from zero
    state = t.room.to_dict()
    assert state["characters"][a]["next_check"] == {"at": 2 * HOUR, "n": 1, "of": 8}
    state["characters"][a]["next_check"] = {"at": 1, "n": 5, "of": 8}
    assert Room.from_dict(state).to_dict() == t.room.to_dict()


def test_L1_next_check_is_kept_current_by_the_patches_and_shown_in_full_only():
    """L1: the patch of an hourly check sets `next_check` like any field,
    in a big table's incremental dict form (only the touched characters
    redone) too; a viewer who sees the character in full gets it, one who
    sees its status line does not (no number of the sheet)."""
    t = Table()
    a = t.add("Aline", owner=t.p1)
    npc = t.add("Gob", shown="status")
    for i in range(20):  # above TOUCHED_CUTOVER: to_dict redoes the touched only
        t.add(f"B{i}")
    t.stabilised(a)
    t.stabilised(npc)
    before_room, before = t.room, t.room.to_dict()
    t.dice.push(12, 12)
    out = t.do("advance_clock", seconds=HOUR)
    after = out.room.to_dict(since=(before_room, before), touched=out.touched)
    assert after == out.room.to_dict()
    ops = diff(before, after)
    assert ["set", ["characters", a, "next_check", "at"], 2 * HOUR] in ops
    assert ["set", ["characters", a, "next_check", "n"], 2] in ops
    assert applied(before, ops) == after
    for v in (Viewer(t.p1.user, "player"), Viewer(t.obs.user, "observer")):
        mirror = view_state(before, v)
        apply_ops(mirror, view_ops(before, after, ops, v))
        assert mirror == view_state(after, v)
        assert mirror["characters"][a]["next_check"] == {"at": 2 * HOUR, "n": 2, "of": 8}
        assert "next_check" not in mirror["characters"][npc]  # status: no numbers


# ---------------------------------------------------------------- L2


def test_L2_still_stable_after_the_eighth_check_wakes_as_after_a_night():
    """L2: the +8 h check happens; if still stable it wakes with PV = level,
    PE and PP at maximum, each damaged ability recovering 1 point."""
    t = Table()
    a = t.add()
    t.do("ability_damage", char=a, ability="str", amount=4)
    t.do("ability_damage", char=a, ability="dex", amount=1)
    t.down(a)
    t.do("stabilize", char=a)  # S3: pp 6 -> 5
    assert (t.char(a).pe, t.char(a).pp) == (0, 5)
    t.dice.push(*[12] * 8)
    t.do("advance_clock", seconds=8 * HOUR)
    c = t.char(a)
    assert (c.condition, c.pv, c.pe, c.pp) == ("conscious", 3, 15, 6)
    assert c.ability_damage == {"str": 3, "dex": 0, "con": 0, "int": 0, "wis": 0, "cha": 0}
    assert [r["hour"] for r in t.kinds("roll")] == list(range(1, 9))
    assert t.kinds("recover") == [
        {
            "kind": "recover",
            "char": a,
            "cause": "long_rest",
            "pv": 3,
            "pe": 15,
            "pp": 1,
            "abilities": 1,
            "restored": {"str": 1, "dex": 1},  # the damaged abilities, 1 point each
            "at": 8 * HOUR,
        }
    ]
    assert t.kinds("condition")[-1]["cause"] == "long_rest"
    assert (c.stable_since, c.stability_checks) == (None, 0)
    ok(t)


def test_L2_pv_is_capped_at_pv_max():
    """L2: PV become `level` (1 per level), capped at pv_max."""
    t = Table()
    a = t.add(level=5, pv_max=3, pe_max=4)
    t.stabilised(a)
    t.dice.push(*[12] * 8)
    t.do("advance_clock", seconds=8 * HOUR)
    assert (t.char(a).pv, t.char(a).condition) == (3, "conscious")


@pytest.mark.parametrize(("last", "condition", "pv"), [(18, "conscious", 1), (7, "dead", 0)])
def test_L2_not_when_the_eighth_check_itself_wakes_or_kills(last, condition, pv):
    """L2: only "if after it the character is still stable"."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    t.dice.push(*[12] * 7, last)
    t.do("advance_clock", seconds=9 * HOUR)
    c = t.char(a)
    assert (c.condition, c.pv, c.pe, c.pp) == (condition, pv, 0, 6)
    assert t.kinds("recover") == []


# ---------------------------------------------------------------- L3


def test_L3_clock_discarded_when_no_longer_stable_and_restarts_from_zero():
    """L3: the stability clock starts when the character becomes stable, is
    discarded when it stops being stable; stable again starts a new one."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.stabilised(a)
    t.dice.push(12, 12)
    t.do("advance_clock", seconds=2 * HOUR + 1800)  # two checks, clock 9000
    assert t.char(a).stability_checks == 2
    t.do("damage", char=a, amount=1)  # dying: clock discarded
    assert (t.char(a).stable_since, t.char(a).stability_checks) == (None, 0)
    t.dice.push(15)
    t.do("first_aid", char=b, patient=a)  # stable again at 9000
    assert (t.char(a).stable_since, t.char(a).stability_checks) == (9000, 0)
    t.do("advance_clock", seconds=HOUR - 1)  # the old clock's 3 h mark passes
    assert t.kinds("roll") == []
    t.dice.push(12)
    t.do("advance_clock", seconds=1)
    assert [(r["hour"], r["at"]) for r in t.kinds("roll")] == [(1, 9000 + HOUR)]


def test_L3_clock_discarded_when_woken_by_heal():
    """L3: woken (S2), the character has no clock and makes no check."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    t.do("heal", char=a, amount=2)
    assert (t.char(a).stable_since, t.char(a).stability_checks) == (None, 0)
    t.do("advance_clock", seconds=9 * HOUR)
    assert t.kinds("roll") == []


# ---------------------------------------------------------------- L4


@pytest.mark.parametrize(
    ("heal_d20", "con_d20", "heal_outcome", "bonus", "total", "outcome", "condition"),
    [
        (10, 4, "success", 2, 10, "stay", "stable"),  # 4+2+2 = 8 raised to 10
        (10, 1, "success", 2, 10, "stay", "stable"),  # 1+2+2 = 5 raised to 10
        (10, 6, "success", 2, 10, "stay", "stable"),  # 10 exactly
        (20, 7, "success", 2, 11, "stay", "stable"),
        (10, 16, "success", 2, 20, "wake", "conscious"),  # +2 makes 20
        (9, 16, "failure", 0, 18, "stay", "stable"),
        (9, 7, "failure", 0, 9, "die", "dead"),
    ],
)
def test_L4_healer_medicine_check_before_each_constitution_check(
    heal_d20, con_d20, heal_outcome, bonus, total, outcome, condition
):
    """L4: just before the Constitution check the healer makes a Medicine
    check DC 15; success gives +2 and raises a total below 10 to 10."""
    raw = con_d20 + 2 + bonus
    t = Table()
    a, h = t.add("A"), t.add("H")
    t.stabilised(a)
    t.do("tend", char=h, patient=a)
    assert t.events == [{"kind": "tend", "char": h, "patient": a, "outcome": "start"}]
    t.dice.push(heal_d20, con_d20)
    t.do("advance_clock", seconds=HOUR)
    rolls = t.kinds("roll")
    assert rolls == [
        {
            "kind": "roll",
            "char": h,
            "check": "medicine",
            "d20": heal_d20,
            "mod": 5,
            "bonus": 0,
            "total": heal_d20 + 5,
            "dc": 15,
            "outcome": heal_outcome,
            "source": "server",
            "patient": a,
            "at": HOUR,
        },
        {
            "kind": "roll",
            "char": a,
            "check": "constitution",
            "d20": con_d20,
            "mod": 2,
            "bonus": bonus,
            "total": total,
            "dc": None,
            "outcome": outcome,
            "source": "server",
            "hour": 1,
            # the sum L4 replaced, when it raised the total
            **({"raised_from": raw} if raw < total else {}),
            "at": HOUR,
        },
    ]
    assert t.char(a).condition == condition
    ok(t)


def test_L4_a_healer_may_tend_several_patients_a_patient_has_one_healer():
    """L4 rulings: several patients per healer; one healer per patient (a
    second healer is refused, `rule`)."""
    t = Table()
    a, b, h, k = t.add("A"), t.add("B"), t.add("H"), t.add("K")
    t.stabilised(a)
    t.stabilised(b)
    t.do("tend", char=h, patient=a)
    t.do("tend", char=h, patient=b)
    assert (t.char(a).healer, t.char(b).healer) == (h, h)
    refused(t, RuleBroken, "tend", char=k, patient=a)
    refused(t, RuleBroken, "tend", char=h, patient=a)  # already tends it
    # Each hour: the healer's check for A, A's check, then the same for B.
    t.dice.push(10, 12, 1, 12)
    t.do("advance_clock", seconds=HOUR)
    assert [(r["char"], r["check"], r["outcome"]) for r in t.kinds("roll")] == [
        (h, "medicine", "success"),
        (a, "constitution", "stay"),
        (h, "medicine", "failure"),
        (b, "constitution", "stay"),
    ]
    assert [r["bonus"] for r in t.kinds("roll")] == [0, 2, 0, 0]


def test_L4_tending_ends_when_the_patient_stops_being_stable():
    """L4: tending ends when the patient stops being stable."""
    t = Table()
    a, h = t.add("A"), t.add("H")
    t.stabilised(a)
    t.do("tend", char=h, patient=a)
    t.do("heal", char=a, amount=1)
    assert t.char(a).healer is None
    assert t.kinds("tend") == [
        {"kind": "tend", "char": h, "patient": a, "outcome": "end", "cause": "not_stable"}
    ]
    ok(t)


@pytest.mark.parametrize("how", ["dying", "knocked_out", "dead", "correction"])
def test_L4_tending_ends_when_the_healer_stops_being_conscious(how):
    """L4: tending ends when the healer stops being conscious."""
    t = Table()
    a, b, h = t.add("A"), t.add("B"), t.add("H")
    t.stabilised(a)
    t.stabilised(b)
    t.do("tend", char=h, patient=a)
    t.do("tend", char=h, patient=b)
    if how == "dying":
        t.down(h)
    elif how == "knocked_out":
        knocked_out(t, h)
    elif how == "dead":
        t.do("ability_damage", char=h, ability="con", amount=14)  # A2
    else:
        t.do("update_character", char=h, set={"condition": "stable", "pv": 0})
    assert (t.char(a).healer, t.char(b).healer) == (None, None)
    assert t.kinds("tend") == [
        {"kind": "tend", "char": h, "patient": a, "outcome": "end", "cause": "healer_down"},
        {"kind": "tend", "char": h, "patient": b, "outcome": "end", "cause": "healer_down"},
    ]
    ok(t)


@pytest.mark.parametrize("by", ["gm", "patient_owner", "healer_owner"])
def test_L4_untend_ends_tending(by):
    """L4: tending ends on untend, sent by the GM, the owner of the patient or
    the owner of its healer (docs/operations.md, "Operations")."""
    t = Table()
    a, h = t.add("A", owner=t.p1), t.add("H", owner=t.p2)
    t.stabilised(a)
    t.do("tend", char=h, patient=a)
    actor = {"gm": t.gm, "patient_owner": t.p1, "healer_owner": t.p2}[by]
    t.do("untend", by=actor, patient=a)
    assert t.char(a).healer is None
    assert t.events == [
        {"kind": "tend", "char": h, "patient": a, "outcome": "end", "cause": "untend"}
    ]
    t.do("advance_clock", seconds=HOUR - 1)
    t.dice.push(12)  # only A's own check now
    t.do("advance_clock", seconds=1)
    assert [r["check"] for r in t.kinds("roll")] == ["constitution"]


def test_L4_untend_by_another_player_or_observer_is_forbidden():
    """L4 / docs/operations.md, "Operations": untend is for the GM or the owner of the patient or
    of its healer."""
    t = Table()
    a, h = t.add("A", owner=t.p1), t.add("H", owner=t.p1)
    t.stabilised(a)
    t.do("tend", char=h, patient=a)
    refused(t, Forbidden, "untend", by=t.p2, patient=a)
    refused(t, Forbidden, "untend", by=t.obs, patient=a)


def test_L4_untend_without_a_healer_is_refused():
    """L4 (engine choice): untend when nobody tends is a `rule` refusal."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    refused(t, RuleBroken, "untend", patient=a)


def test_L4_a_character_cannot_rest_while_it_tends():
    """L4 ruling: a character cannot rest while it tends; untended, it may."""
    t = Table()
    a, h = t.add("A"), t.add("H")
    t.stabilised(a)
    t.do("tend", char=h, patient=a)
    for kind in ("short", "night", "bed"):
        refused(t, RuleBroken, "rest", char=h, kind=kind)
    t.do("untend", patient=a)
    t.do("rest", char=h, kind="night")
    assert t.char(h).activity.kind == "night"


def test_L4_a_resting_character_cannot_start_tending():
    """L4 (engine ruling, docs/rules.md): a resting character must stop its
    rest before tending (`rule`), rather than the tending ending the rest."""
    t = Table()
    a, h = t.add("A"), t.add("H")
    t.stabilised(a)
    t.do("rest", char=h, kind="short")
    refused(t, RuleBroken, "tend", char=h, patient=a)


@pytest.mark.parametrize(
    "case", ["self", "patient_conscious", "patient_dying", "healer_dying", "healer_stable"]
)
def test_L4_only_a_conscious_healer_tends_a_stable_patient(case):
    """L4: "a conscious character may tend a stable one"; otherwise `rule`."""
    t = Table()
    a, h = t.add("A"), t.add("H")
    args = {"char": h, "patient": a}
    if case == "self":
        t.stabilised(a)
        args = {"char": a, "patient": a}
    elif case == "patient_dying":
        t.down(a)
    elif case == "healer_dying":
        t.stabilised(a)
        t.down(h)
    elif case == "healer_stable":
        t.stabilised(a)
        t.stabilised(h)
    refused(t, RuleBroken, "tend", **args)


def test_L4_tend_by_the_healers_owner():
    """L4 (role O): the owner of the healer may send tend."""
    t = Table()
    a, h = t.add("A", owner=t.p2), t.add("H", owner=t.p1)
    t.stabilised(a)
    refused(t, Forbidden, "tend", by=t.p2, char=h, patient=a)
    t.do("tend", by=t.p1, char=h, patient=a)
    assert t.char(a).healer == h


# ---------------------------------------------------------------- L5


@pytest.mark.parametrize(("d20", "total"), [(7, 9), (1, 3)])
def test_L5_nonlethal_knockout_never_dies_from_l1(d20, total):
    """L5: a character downed by nonlethal damage never dies from L1: a total
    below 10 leaves it stable."""
    t = Table()
    a = t.add()
    knocked_out(t, a)
    t.dice.push(d20)
    t.do("advance_clock", seconds=HOUR)
    c = t.char(a)
    assert (c.condition, c.nonlethal, c.stability_checks) == ("stable", True, 1)
    roll = t.kinds("roll")[0]
    assert (roll["total"], roll["outcome"]) == (total, "stay")
    ok(t)


def test_L5_nonlethal_knockout_wakes_by_l2_after_eight_low_checks():
    """L5: it wakes by L1 or L2 like any other."""
    t = Table()
    a = t.add()
    knocked_out(t, a)
    t.dice.push(*[1] * 8)
    t.do("advance_clock", seconds=8 * HOUR)
    c = t.char(a)
    assert (c.condition, c.pv, c.pe, c.pp, c.nonlethal) == ("conscious", 3, 15, 6, False)
    assert [r["outcome"] for r in t.kinds("roll")] == ["stay"] * 8


def test_L5_nonlethal_knockout_wakes_by_l1():
    """L5: a total of 20 wakes it with 1 PV (L1)."""
    t = Table()
    a = t.add()
    knocked_out(t, a)
    t.dice.push(18)
    t.do("advance_clock", seconds=HOUR)
    assert (t.char(a).condition, t.char(a).pv, t.char(a).nonlethal) == ("conscious", 1, False)


def test_L5_only_for_nonlethal_knockouts():
    """L5: a stable character downed by lethal damage dies on the same roll."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    t.dice.push(1)
    t.do("advance_clock", seconds=HOUR)
    assert t.char(a).condition == "dead"


def test_L5_nonlethal_knockout_still_dies_of_constitution_damage():
    """L5 is about L1 only: A2's death by Constitution damage still applies."""
    t = Table()
    a = t.add()
    knocked_out(t, a)
    t.do("ability_damage", char=a, ability="con", amount=14)
    assert t.char(a).condition == "dead"
