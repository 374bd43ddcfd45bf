"""Rest and recovery (R1-R5), rule by rule (docs/rules.md, "Rest").

Default sheet: level 3, PV 20, PE 15, PP 6; a short rest lasts 600 s, a
night 8 h, a bed rest 24 h of world time.
"""

from __future__ import annotations

import pytest

from rules import RuleBroken
from tests.helpers.table import Table
from tests.rules.rulekit import HOUR, ch, ok, refused

# ---------------------------------------------------------------- R1


def test_R1_short_rest_spends_one_pp_at_the_end_and_restores_pe():
    """R1: 10 minutes of world time; at the end 1 PP is spent and PE return
    to pe_max."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=12)  # PE 3
    t.do("advance_clock", seconds=40)
    t.do("rest", char=a, kind="short")
    assert ch(t, a)["activity"] == {"kind": "short", "ends": 640}
    assert t.events == [
        {"kind": "rest", "char": a, "rest": "short", "outcome": "started", "ends": 640}
    ]
    t.do("advance_clock", seconds=599)
    assert (t.char(a).pe, t.char(a).pp, t.char(a).activity.kind) == (3, 6, "short")
    t.do("advance_clock", seconds=1)
    c = t.char(a)
    assert (c.pe, c.pp, c.pv, c.activity) == (15, 5, 20, None)
    assert t.events == [
        {"kind": "clock", "from": 639, "to": 640},
        {"kind": "pp", "char": a, "delta": -1, "cause": "short_rest", "at": 640},
        {
            "kind": "recover",
            "char": a,
            "cause": "short_rest",
            "pv": 0,
            "pe": 12,
            "pp": 0,  # the PP was paid just before (the `pp` event)
            "abilities": 0,
            "at": 640,
        },
        {"kind": "rest", "char": a, "rest": "short", "outcome": "complete", "at": 640},
    ]
    ok(t)


def test_R1_short_rest_needs_a_pp_to_start():
    """R1: "a conscious character with at least 1 PP rests" (`rule` otherwise)."""
    t = Table()
    a = t.add(pp=0)
    refused(t, RuleBroken, "rest", char=a, kind="short")


def test_R1_interrupted_short_rest_costs_nothing():
    """R1 ruling: the PP is spent when the rest completes, so an interrupted
    rest costs nothing."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=5)
    t.do("rest", char=a, kind="short")
    t.do("advance_clock", seconds=300)
    t.do("stop_rest", char=a)
    assert t.events == [
        {"kind": "rest", "char": a, "rest": "short", "outcome": "interrupted", "cause": "stopped"}
    ]
    t.do("advance_clock", seconds=HOUR)
    assert (t.char(a).pp, t.char(a).pe, t.char(a).activity) == (6, 10, None)


def test_R1_no_pp_left_when_it_completes_means_no_benefit():
    """R1 ruling: with no PP left at that moment, the rest ends without benefit."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=5)
    t.do("rest", char=a, kind="short")
    t.do("update_character", char=a, set={"pp": 0})  # a GM correction meanwhile
    assert t.char(a).activity is not None
    t.do("advance_clock", seconds=600)
    c = t.char(a)
    assert (c.pp, c.pe, c.activity) == (0, 10, None)
    assert t.kinds("rest") == [
        {
            "kind": "rest",
            "char": a,
            "rest": "short",
            "outcome": "no_benefit",
            "cause": "no_pp",
            "at": 600,
        }
    ]
    assert t.kinds("recover") == []


# ---------------------------------------------------------------- R2


def test_R2_night_rest_restores_pe_pp_level_pv_and_one_ability_point():
    """R2: 8 uninterrupted hours: PE to pe_max, PV + level; rulings: PP to
    pp_max, each damaged ability recovers 1 point."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=25)  # PE 0, PV 10
    t.do("update_character", char=a, set={"pp": 2})
    t.do("ability_damage", char=a, ability="str", amount=3)
    t.do("ability_damage", char=a, ability="wis", amount=1)
    t.do("rest", char=a, kind="night")
    assert ch(t, a)["activity"] == {"kind": "night", "ends": 8 * HOUR}
    t.do("advance_clock", seconds=8 * HOUR - 1)
    assert (t.char(a).pv, t.char(a).pe, t.char(a).pp) == (10, 0, 2)
    t.do("advance_clock", seconds=1)
    c = t.char(a)
    assert (c.pv, c.pe, c.pp, c.activity) == (13, 15, 6, None)
    assert c.ability_damage == {"str": 2, "dex": 0, "con": 0, "int": 0, "wis": 0, "cha": 0}
    assert t.kinds("recover") == [
        {
            "kind": "recover",
            "char": a,
            "cause": "night_rest",
            "pv": 3,
            "pe": 15,
            "pp": 4,
            "abilities": 1,
            "restored": {"str": 1, "wis": 1},  # the damaged ones only
            "at": 8 * HOUR,
        }
    ]
    ok(t)


def test_R2_night_rest_interrupted_gives_nothing():
    """R2: the 8 hours must be uninterrupted."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=25)
    t.do("rest", char=a, kind="night")
    t.do("advance_clock", seconds=8 * HOUR - 1)
    t.do("damage", char=a, amount=1)
    t.do("advance_clock", seconds=HOUR)
    c = t.char(a)
    assert (c.pv, c.pe, c.pp, c.activity) == (9, 0, 6, None)


# ---------------------------------------------------------------- R3


def test_R3_bed_rest_restores_twice_level_pv_and_two_ability_points():
    """R3: 24 consecutive hours: PV + 2 x level, PE to pe_max, PP to pp_max,
    each damaged ability recovers 2 points."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=30)  # PE 0, PV 5
    t.do("update_character", char=a, set={"pp": 1})
    t.do("ability_damage", char=a, ability="dex", amount=3)
    t.do("ability_damage", char=a, ability="cha", amount=1)
    t.do("rest", char=a, kind="bed")
    t.do("advance_clock", seconds=24 * HOUR)
    c = t.char(a)
    assert (c.pv, c.pe, c.pp, c.activity) == (11, 15, 6, None)
    assert c.ability_damage == {"str": 0, "dex": 1, "con": 0, "int": 0, "wis": 0, "cha": 0}
    assert [e["cause"] for e in t.kinds("recover")] == ["bed_rest"]
    ok(t)


def test_R3_bed_rest_replaces_the_nights_inside_it():
    """R3 ruling: no stacking: nothing happens at +8 h or +16 h, and the end
    gives exactly 2 x level PV (not 2 x level + nights)."""
    t = Table()
    a = t.add(level=2, pv_max=30)
    t.do("damage", char=a, amount=40)  # PE 0, PV 5
    t.do("rest", char=a, kind="bed")
    t.do("advance_clock", seconds=16 * HOUR)
    assert (t.char(a).pv, t.char(a).pe) == (5, 0)
    assert t.kinds("recover") == []
    t.do("advance_clock", seconds=8 * HOUR)
    assert t.char(a).pv == 9


# ---------------------------------------------------------------- R4


@pytest.mark.parametrize(
    ("how", "cause"),
    [
        ("damage", "damage"),
        ("nonlethal_knockout", "damage"),
        ("correction_unconscious", "unconscious"),
        ("constitution_death", "dead"),
        ("combat", "combat"),
        ("stop_rest", "stopped"),
    ],
)
@pytest.mark.parametrize("kind", ["short", "night", "bed"])
def test_R4_rest_ends_without_benefit(kind, how, cause):
    """R4: a rest ends without benefit when the character takes damage, stops
    being conscious, enters a combat, or the rest is stopped."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.do("damage", char=a, amount=10)  # PE 5
    t.do("rest", char=a, kind=kind)
    if how == "damage":
        t.do("damage", char=a, amount=2)
    elif how == "nonlethal_knockout":
        t.do("damage", char=a, amount=25, nonlethal=True)
    elif how == "correction_unconscious":
        t.do("update_character", char=a, set={"condition": "dying", "pv": 0})
    elif how == "constitution_death":
        t.do("ability_damage", char=a, ability="con", amount=14)
    elif how == "combat":
        t.do("combat_start", order=[b, a])
    else:
        t.do("stop_rest", char=a)
    assert t.char(a).activity is None
    assert {"kind": "rest", "char": a, "rest": kind, "outcome": "interrupted", "cause": cause} in (
        t.kinds("rest")
    )
    if t.char(a).condition != "conscious":
        return  # the unconscious have their own clocks (L1, D5)
    if how == "combat":
        t.do("combat_end")
    t.do("advance_clock", seconds=24 * HOUR)  # past the rest's end: no benefit
    assert t.kinds("recover") == [] and t.kinds("pp") == [] and t.kinds("rest") == []
    assert (t.char(a).pe, t.char(a).pp) == ((3 if how == "damage" else 5), 6)
    ok(t)


def test_R4_a_combatant_cannot_start_a_rest_but_a_bystander_can():
    """R4: a character in a running combat cannot start one; one outside the
    order is not in that combat (D5's definition) and may rest."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.do("combat_start", order=[a])
    for kind in ("short", "night", "bed"):
        refused(t, RuleBroken, "rest", char=a, kind=kind)
    t.do("rest", char=b, kind="short")
    assert t.char(b).activity.kind == "short"
    t.do("combat_end")
    t.do("rest", char=a, kind="short")


def test_R4_one_rest_at_a_time():
    """R4: one rest at a time per character (`rule`)."""
    t = Table()
    a = t.add()
    t.do("rest", char=a, kind="night")
    for kind in ("short", "night", "bed"):
        refused(t, RuleBroken, "rest", char=a, kind=kind)


@pytest.mark.parametrize("setup", ["dying", "stable"])
def test_R4_an_unconscious_character_cannot_rest(setup):
    """R1-R3: a rest is for a conscious character (`rule`)."""
    t = Table()
    a = t.add()
    getattr(t, {"dying": "down", "stable": "stabilised"}[setup])(a)
    refused(t, RuleBroken, "rest", char=a, kind="night")


def test_R4_stop_rest_when_not_resting_is_refused():
    """R4 (engine choice): stop_rest with no rest in progress is `rule`."""
    t = Table()
    a = t.add()
    refused(t, RuleBroken, "stop_rest", char=a)


def test_R4_a_bystanders_rest_runs_through_the_combat_rounds():
    """R4/T1: a rest outside the order completes as the rounds advance time."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.do("damage", char=b, amount=4)
    t.do("advance_clock", seconds=594)
    t.do("rest", char=b, kind="short")  # ends at 1194
    t.do("combat_start", order=[a])
    for _ in range(99):
        t.do("end_turn", char=a)
    assert (t.room.clock, t.char(b).pe) == (1188, 11)
    t.do("end_turn", char=a)
    assert (t.room.clock, t.char(b).pe, t.char(b).pp) == (1194, 15, 5)


# ---------------------------------------------------------------- R5


@pytest.mark.parametrize(
    ("kind", "pv_loss", "pv"), [("night", 1, 20), ("bed", 5, 20), ("short", 1, 19)]
)
def test_R5_rests_never_exceed_the_maxima(kind, pv_loss, pv):
    """R5: PV and PE never exceed their maximum."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=pv_loss, pv_only=True)
    t.do("rest", char=a, kind=kind)
    t.do("advance_clock", seconds=24 * HOUR)
    assert (t.char(a).pv, t.char(a).pe) == (pv, 15)


def test_R5_pe_restored_to_the_constitution_lowered_maximum():
    """R5 + A2: PE return to the effective pe_max, not the sheet value."""
    t = Table()
    a = t.add()
    t.do("ability_damage", char=a, ability="con", amount=5)  # -2 mod: pe_max 9
    t.do("damage", char=a, amount=9)
    t.do("rest", char=a, kind="short")
    t.do("advance_clock", seconds=600)
    assert (t.char(a).pe, t.char(a).pe_max) == (9, 9)


def test_R5_heal_never_exceeds_pv_max():
    """R5 (S2): a heal caps at pv_max."""
    t = Table()
    a = t.add()
    t.do("heal", char=a, amount=1_000_000)
    assert t.char(a).pv == 20
    assert t.kinds("heal")[0]["pv"] == 0
