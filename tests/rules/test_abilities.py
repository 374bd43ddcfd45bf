"""Temporary ability damage (A1-A3), rule by rule (docs/rules.md, "Ability damage").

Default sheet: level 3, PE 15, str 10 dex 14 con 14 int 10 wis 12 cha 8.
"""

from __future__ import annotations

import pytest

from tests.helpers.table import Table
from tests.rules.rulekit import HOUR, ch, ok

ABILITIES = ("str", "dex", "con", "int", "wis", "cha")


def scores(**over: int) -> dict[str, int]:
    return {"str": 10, "dex": 10, "con": 10, "int": 10, "wis": 10, "cha": 10, **over}


# ---------------------------------------------------------------- A1


@pytest.mark.parametrize(
    ("score", "damage", "mod"),
    [
        (14, 4, 0),  # the text's example: 4 points of damage cost 2 of modifier
        (10, 4, -2),
        (10, 1, 0),
        (10, 3, -1),
        (15, 1, 2),
        (15, 3, 1),
        (11, 0, 0),
        (9, 0, -1),  # divisions round down
        (8, 0, -1),
        (7, 0, -2),
        (7, 1, -2),
        (7, 3, -3),
        (20, 0, 5),
        (20, 20, -5),
        (1, 0, -5),
        (1, 1, -5),
    ],
)
def test_A1_modifier_is_score_minus_ten_halved_minus_half_the_damage(score, damage, mod):
    """A1: modifier = (score - 10) // 2 - damage // 2."""
    t = Table()
    a = t.add(abilities=scores(str=score))
    t.do("ability_damage", char=a, ability="str", amount=damage)
    assert ch(t, a)["mods"]["str"] == mod
    assert t.char(a).mod("str") == mod
    assert t.events == [
        {
            "kind": "ability",
            "char": a,
            "ability": "str",
            "delta": damage,
            "damage": damage,
            "mod": mod,
        }
    ]


def test_A1_damage_accumulates_and_never_exceeds_the_score():
    """A1: damage accumulates; it never exceeds the score."""
    t = Table()
    a = t.add()
    t.do("ability_damage", char=a, ability="dex", amount=2)
    t.do("ability_damage", char=a, ability="dex", amount=3)
    assert t.char(a).ability_damage["dex"] == 5
    t.do("ability_damage", char=a, ability="dex", amount=1000)
    assert t.char(a).ability_damage["dex"] == 14
    assert t.events[0]["delta"] == 9  # only what was left up to the score
    assert ch(t, a)["mods"]["dex"] == 2 - 7
    t.do("ability_damage", char=a, ability="dex", amount=1)
    assert (t.char(a).ability_damage["dex"], t.events[0]["delta"]) == (14, 0)
    assert t.char(a).condition == "conscious"  # only Constitution kills (A2)
    ok(t)


@pytest.mark.parametrize("ability", ABILITIES)
def test_A1_each_ability_is_tracked_on_its_own(ability):
    """A1: damage to one ability leaves the others untouched."""
    t = Table()
    a = t.add()
    t.do("ability_damage", char=a, ability=ability, amount=2)
    assert t.char(a).ability_damage == {x: (2 if x == ability else 0) for x in ABILITIES}


# ---------------------------------------------------------------- A2


@pytest.mark.parametrize(
    ("con_damage", "pe_max", "pe"),
    [(1, 15, 15), (2, 12, 12), (3, 12, 12), (4, 9, 9), (6, 6, 6), (10, 0, 0), (13, 0, 0)],
)
def test_A2_each_con_modifier_point_lost_lowers_pe_max_by_level(con_damage, pe_max, pe):
    """A2: each point of Con modifier lost lowers pe_max by `level` (not below
    0) and PE are capped to the new maximum (level 3, pe_max 15, Con 14)."""
    t = Table()
    a = t.add()
    t.do("ability_damage", char=a, ability="con", amount=con_damage)
    c = t.char(a)
    assert (c.pe_max, c.pe, c.pe_max_base, c.condition) == (pe_max, pe, 15, "conscious")
    assert ch(t, a)["pe_max"] == pe_max
    ok(t)


def test_A2_pe_below_the_new_maximum_is_unchanged():
    """A2: PE only get capped; PE already below stay."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=10)  # PE 5
    t.do("ability_damage", char=a, ability="con", amount=4)  # pe_max 9
    assert (t.char(a).pe, t.char(a).pe_max) == (5, 9)


def test_A2_pe_max_never_below_zero():
    """A2: pe_max does not go below 0 (level 10: 2 points lost = 20 > 15)."""
    t = Table()
    a = t.add(level=10)
    t.do("ability_damage", char=a, ability="con", amount=4)
    assert (t.char(a).pe_max, t.char(a).pe) == (0, 0)
    ok(t)


def test_A2_regained_modifier_raises_pe_max_back_pe_unchanged():
    """A2: a point of modifier regained raises pe_max back, current PE unchanged."""
    t = Table()
    a = t.add()
    t.do("ability_damage", char=a, ability="con", amount=4)  # pe_max 9, PE 9
    t.do("ability_restore", char=a, ability="con", amount=1)  # 3 damage: -1 mod
    assert (t.char(a).pe_max, t.char(a).pe) == (12, 9)
    t.do("ability_restore", char=a, ability="con", amount=3)
    c = t.char(a)
    assert (c.pe_max, c.pe, c.ability_damage["con"]) == (15, 9, 0)
    assert t.events == [
        {"kind": "ability", "char": a, "ability": "con", "delta": -3, "damage": 0, "mod": 2}
    ]


@pytest.mark.parametrize(("con_damage", "mod", "outcome"), [(0, 2, "wake"), (4, 0, "stay")])
def test_A2_the_lower_modifier_applies_to_later_constitution_checks(con_damage, mod, outcome):
    """A2: the lower modifier applies to every later Constitution check (L1)."""
    t = Table()
    a = t.add()
    if con_damage:
        t.do("ability_damage", char=a, ability="con", amount=con_damage)
    t.stabilised(a)
    t.dice.push(18)
    t.do("advance_clock", seconds=HOUR)
    roll = t.kinds("roll")[0]
    assert (roll["mod"], roll["total"], roll["outcome"]) == (mod, 18 + mod, outcome)


@pytest.mark.parametrize("setup", ["conscious", "dying", "stable", "resting"])
def test_A2_constitution_damage_equal_to_the_score_kills(setup):
    """A2 ruling (Pathfinder): Constitution damage equal to the score kills."""
    t = Table()
    a = t.add()
    if setup == "dying":
        t.down(a)
    elif setup == "stable":
        t.stabilised(a)
    elif setup == "resting":
        t.do("rest", char=a, kind="night")
    t.do("ability_damage", char=a, ability="con", amount=13)
    assert t.char(a).condition == ("conscious" if setup in ("conscious", "resting") else setup)
    t.do("ability_damage", char=a, ability="con", amount=1)
    c = t.char(a)
    assert (c.condition, c.ability_damage["con"], c.activity) == ("dead", 14, None)
    frm = "conscious" if setup == "resting" else setup
    assert t.kinds("condition") == [
        {"kind": "condition", "char": a, "from": frm, "to": "dead", "cause": "constitution_damage"}
    ]
    ok(t)


def test_A2_other_abilities_at_their_score_do_not_kill():
    """A2: the death rule is Constitution's only."""
    t = Table()
    a = t.add()
    for ability in ("str", "dex", "int", "wis", "cha"):
        t.do("ability_damage", char=a, ability=ability, amount=100)
    assert t.char(a).condition == "conscious"


# ---------------------------------------------------------------- A3


def test_A3_gm_restore_removes_damage_never_below_zero():
    """A3: a GM restore removes ability damage, not below 0."""
    t = Table()
    a = t.add()
    t.do("ability_damage", char=a, ability="wis", amount=5)
    t.do("ability_restore", char=a, ability="wis", amount=2)
    assert t.char(a).ability_damage["wis"] == 3
    t.do("ability_restore", char=a, ability="wis", amount=10)
    assert t.char(a).ability_damage["wis"] == 0
    assert t.events == [
        {"kind": "ability", "char": a, "ability": "wis", "delta": -3, "damage": 0, "mod": 1}
    ]
    t.do("ability_restore", char=a, ability="str", amount=3)
    assert t.char(a).ability_damage["str"] == 0 and t.events[0]["delta"] == 0


@pytest.mark.parametrize(
    ("how", "recovered"), [("night", 1), ("bed", 2), ("long_rest", 1), ("short", 0)]
)
def test_A3_ability_damage_recovers_by_rest(how, recovered):
    """A3: ability damage recovers by rest: L2 and R2 one point, R3 two; a
    short rest (R1) heals none. The raised Con modifier raises pe_max (A2)
    and the rest fills PE to it."""
    t = Table()
    a = t.add()
    t.do("ability_damage", char=a, ability="con", amount=5)  # -2: pe_max 9
    t.do("ability_damage", char=a, ability="str", amount=1)
    seconds = {"night": 8 * HOUR, "bed": 24 * HOUR, "short": 600, "long_rest": 8 * HOUR}[how]
    if how == "long_rest":
        t.stabilised(a)
        t.dice.push(*[12] * 8)  # con mod 2 - 2 = 0: 12, stays each hour
    else:
        t.do("rest", char=a, kind=how)
    t.do("advance_clock", seconds=seconds)
    c = t.char(a)
    assert c.ability_damage["con"] == 5 - recovered
    assert c.ability_damage["str"] == max(0, 1 - recovered)
    pe_max = 15 - 3 * ((5 - recovered) // 2)
    assert (c.pe_max, c.pe) == (pe_max, pe_max)
