"""Damage (D1-D6) and nonlethal damage (N1), rule by rule (docs/rules.md, "Damage").

The default sheet (tests/helpers/table.py): level 3, PV 20, PE 15, PP 6,
Con 14 (modifier +2), Medicine +5; a round is 6 s.
"""

from __future__ import annotations

import pytest

from rules import Forbidden, RuleBroken
from tests.helpers.table import Table
from tests.rules.rulekit import HOUR, ch, kill, knocked_out, ok, refused, state

# ---------------------------------------------------------------- D1


@pytest.mark.parametrize(
    ("amount", "pv_only", "pe", "pv"),
    [
        (1, False, 14, 20),
        (15, False, 0, 20),  # PE exactly absorb it
        (16, False, 0, 19),  # the rest goes to PV
        (34, False, 0, 1),
        (5, True, 15, 15),  # pv_only skips PE
        (19, True, 15, 1),
    ],
)
def test_D1_damage_takes_pe_first_then_pv(amount, pv_only, pe, pv):
    """D1: damage comes off PE first, then PV; `pv_only` skips PE."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=amount, pv_only=pv_only)
    c = t.char(a)
    assert (c.pe, c.pv, c.pp, c.condition) == (pe, pv, 6, "conscious")
    assert t.events == [
        {
            "kind": "damage",
            "char": a,
            "amount": amount,
            "pe": pe - 15,
            "pv": pv - 20,
            "nonlethal": False,
        }
    ]
    ok(t)


@pytest.mark.parametrize("amount", [35, 36, 1000, 1_000_000])
def test_D1_pv_never_below_zero_and_no_massive_damage(amount):
    """D1: PV stop at 0 and there is no massive-damage rule: any overkill
    leaves the character merely dying (D2), with all its PP."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=amount)
    c = t.char(a)
    assert (c.pv, c.pe, c.pp, c.condition) == (0, 0, 6, "dying")
    assert t.kinds("damage")[0]["pv"] == -20 and t.kinds("damage")[0]["pe"] == -15
    ok(t)


@pytest.mark.parametrize("setup", ["conscious", "resting", "dying", "stable", "knocked_out"])
@pytest.mark.parametrize("flags", [{}, {"nonlethal": True}, {"pv_only": True}])
def test_D1_zero_damage_changes_nothing(setup, flags):
    """D1: damage of 0 changes nothing (D4: only damage above 0 ends a rest;
    D3: zero damage costs a dying character no PP)."""
    t = Table()
    a = t.add()
    if setup == "resting":
        t.do("rest", char=a, kind="night")
    elif setup == "dying":
        t.down(a)
    elif setup == "stable":
        t.stabilised(a)
    elif setup == "knocked_out":
        knocked_out(t, a)
    before = state(t)
    t.do("damage", char=a, amount=0, **flags)
    assert state(t) == before
    assert t.kinds("damage")[0]["pv"] == 0 and t.kinds("damage")[0]["pe"] == 0
    assert t.kinds("condition") == [] and t.kinds("pp") == [] and t.kinds("rest") == []


# ---------------------------------------------------------------- D2


@pytest.mark.parametrize("pv_only", [False, True])
def test_D2_conscious_reaching_zero_pv_by_lethal_damage_becomes_dying(pv_only):
    """D2: a conscious character whose PV reach 0 from lethal damage is dying."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=20 if pv_only else 35, pv_only=pv_only)
    c = t.char(a)
    assert (c.pv, c.condition, c.pp, c.nonlethal) == (0, "dying", 6, False)
    assert t.kinds("condition") == [
        {"kind": "condition", "char": a, "from": "conscious", "to": "dying", "cause": "damage"}
    ]
    assert t.kinds("pp") == []  # D3's PP cost is for one already dying
    ok(t)


def test_D2_damage_leaving_pv_above_zero_keeps_conscious():
    """D2: only reaching 0 PV makes a character dying."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=34)
    assert (t.char(a).pv, t.char(a).condition) == (1, "conscious")
    assert t.kinds("condition") == []


# ---------------------------------------------------------------- D3


def test_D3_lethal_damage_on_dying_costs_one_pp():
    """D3: lethal damage that reaches the PV of a dying character costs 1 PP."""
    t = Table()
    a = t.add()
    t.down(a)
    t.do("damage", char=a, amount=4)
    c = t.char(a)
    assert (c.pv, c.pp, c.condition) == (0, 5, "dying")
    assert t.kinds("pp") == [{"kind": "pp", "char": a, "delta": -1, "cause": "damage"}]
    # One PP per hit, whatever its size.
    t.do("damage", char=a, amount=500)
    assert (t.char(a).pp, t.char(a).condition) == (4, "dying")
    ok(t)


def test_D3_damage_absorbed_by_pe_does_not_reach_pv_of_dying():
    """D3: only damage that reaches PV costs PP; PE absorb first (D1)."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=20, pv_only=True)  # dying with 15 PE left
    assert t.char(a).condition == "dying"
    t.do("damage", char=a, amount=15)
    c = t.char(a)
    assert (c.pe, c.pp, c.condition) == (0, 6, "dying")
    assert t.kinds("pp") == []
    t.do("damage", char=a, amount=1)
    assert (t.char(a).pp, t.char(a).condition) == (5, "dying")


def test_D3_lethal_damage_on_dying_at_one_pp_kills_at_once():
    """D3 then D5: the PP cost brings PP to 0, which kills at once."""
    t = Table()
    a = t.add(pp=1)
    t.down(a)
    t.do("damage", char=a, amount=1)
    c = t.char(a)
    assert (c.pp, c.condition) == (0, "dead")
    assert [e["kind"] for e in t.events] == ["damage", "pp", "condition"]
    assert t.kinds("condition") == [
        {"kind": "condition", "char": a, "from": "dying", "to": "dead", "cause": "damage"}
    ]
    ok(t)


def test_D3_lethal_damage_on_dying_at_zero_pp_kills():
    """D3 + D5 ruling: one already at 0 PP dies the next time it would lose a PP."""
    t = Table()
    a = t.add(pp=0)
    t.down(a)
    assert (t.char(a).pp, t.char(a).condition) == (0, "dying")
    t.do("damage", char=a, amount=1)
    assert (t.char(a).pp, t.char(a).condition) == (0, "dead")
    assert t.kinds("pp") == []


def test_D3_lethal_damage_on_stable_makes_dying_without_pp_cost_and_discards_clock():
    """D3 + L3: lethal damage reaching a stable character's PV makes it dying
    again, costs no PP, and discards its stability clock."""
    t = Table()
    a = t.add()
    t.stabilised(a)
    t.dice.push(12)  # +1 h: 12 + 2 = 14, stays stable
    t.do("advance_clock", seconds=HOUR)
    assert (t.char(a).stable_since, t.char(a).stability_checks) == (0, 1)
    t.do("damage", char=a, amount=1)
    c = t.char(a)
    assert (c.condition, c.pp, c.pv) == ("dying", 6, 0)
    assert (c.stable_since, c.stability_checks) == (None, 0)
    assert ch(t, a)["dying_next"] == HOUR + 6  # D5 counts from now
    assert t.kinds("condition") == [
        {"kind": "condition", "char": a, "from": "stable", "to": "dying", "cause": "damage"}
    ]
    assert t.kinds("pp") == []
    ok(t)


def test_D3_lethal_damage_on_nonlethal_stable_makes_dying():
    """D3/N1: a character knocked out by nonlethal damage is stable; lethal
    damage makes it dying, no longer marked nonlethal."""
    t = Table()
    a = t.add()
    knocked_out(t, a)
    t.do("damage", char=a, amount=1)
    c = t.char(a)
    assert (c.condition, c.nonlethal, c.pp, c.stable_since) == ("dying", False, 6, None)
    ok(t)


def test_D3_stable_made_dying_loses_its_healer():
    """D3 + L4: the patient stops being stable, so its tending ends."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.stabilised(a)
    t.do("tend", char=b, patient=a)
    t.do("damage", char=a, amount=1)
    assert t.char(a).healer is None
    assert t.kinds("tend") == [
        {"kind": "tend", "char": b, "patient": a, "outcome": "end", "cause": "not_stable"}
    ]
    ok(t)


# ---------------------------------------------------------------- D4


@pytest.mark.parametrize(
    ("amount", "flags", "pe", "pv"),
    [
        (3, {}, 12, 20),  # fully absorbed by PE: still "damage above 0"
        (3, {"pv_only": True}, 15, 17),
        (3, {"nonlethal": True}, 12, 20),  # N1: nonlethal ends rests too
        (1, {}, 14, 20),
    ],
)
@pytest.mark.parametrize("kind", ["short", "night", "bed"])
def test_D4_any_damage_above_zero_ends_a_rest(kind, amount, flags, pe, pv):
    """D4 / R4: any damage above 0 ends a rest in progress, without benefit."""
    t = Table()
    a = t.add()
    t.do("rest", char=a, kind=kind)
    t.do("damage", char=a, amount=amount, **flags)
    c = t.char(a)
    assert c.activity is None
    assert (c.pe, c.pv, c.pp) == (pe, pv, 6)
    assert t.kinds("rest") == [
        {"kind": "rest", "char": a, "rest": kind, "outcome": "interrupted", "cause": "damage"}
    ]
    # The rest's end passes with no benefit.
    t.do("advance_clock", seconds=24 * HOUR)
    c = t.char(a)
    assert (c.pe, c.pv, c.pp) == (pe, pv, 6)
    assert t.kinds("recover") == [] and t.kinds("rest") == []


# ---------------------------------------------------------------- D5


def test_D5_out_of_combat_dying_loses_one_pp_per_full_round():
    """D5: outside combat, 1 PP per full round of world time while dying,
    counted from when it started dying."""
    t = Table()
    a = t.add()
    t.do("advance_clock", seconds=100)
    t.down(a)  # at 100
    t.do("advance_clock", seconds=5)
    assert t.char(a).pp == 6 and t.kinds("pp") == []
    t.do("advance_clock", seconds=1)  # 106: one full round
    assert t.char(a).pp == 5
    assert t.kinds("pp") == [
        {"kind": "pp", "char": a, "delta": -1, "cause": "dying", "rounds": 1, "at": 106}
    ]
    t.do("advance_clock", seconds=13)  # 119: rounds ending at 112 and 118
    assert t.char(a).pp == 3
    # T2: the repeated losses of one advance are one event, at the last one.
    assert t.kinds("pp") == [
        {"kind": "pp", "char": a, "delta": -2, "cause": "dying", "rounds": 2, "at": 118}
    ]
    assert (t.room.clock, t.char(a).dying_next) == (119, 124)
    ok(t)


def test_D5_out_of_combat_pp_falling_to_zero_kills_at_once():
    """D5: a dying character whose PP fall to 0 dies at once (6 PP: 36 s)."""
    t = Table()
    a = t.add()
    t.down(a)
    t.do("advance_clock", seconds=600)
    c = t.char(a)
    assert (c.pp, c.condition) == (0, "dead")
    # Six rounds' losses (6, 12, ... 36) in one event at the last, the one that kills.
    assert t.kinds("pp") == [
        {"kind": "pp", "char": a, "delta": -6, "cause": "dying", "rounds": 6, "at": 36}
    ]
    assert t.kinds("condition") == [
        {
            "kind": "condition",
            "char": a,
            "from": "dying",
            "to": "dead",
            "cause": "dying",
            "at": 36,
        }
    ]
    assert t.room.clock == 600
    ok(t)


@pytest.mark.parametrize("round_seconds", [1, 10, 60])
def test_D5_out_of_combat_round_length_is_round_seconds(round_seconds):
    """D5: "a full round of world time" lasts `round_seconds`."""
    t = Table(round_seconds=round_seconds)
    a = t.add()
    t.down(a)
    t.do("advance_clock", seconds=round_seconds * 3 - 1)
    assert t.char(a).pp == 4
    t.do("advance_clock", seconds=1)
    assert t.char(a).pp == 3


def test_D5_at_zero_pp_dies_at_next_loss_leaving_one_round():
    """D5 ruling: already at 0 PP while dying, it dies the next time it would
    lose a PP, which leaves its allies one round to stabilise it."""
    t = Table()
    a, b = t.add("A", pp=0), t.add("B")
    t.down(a)
    t.do("advance_clock", seconds=5)
    assert t.char(a).condition == "dying"
    t.dice.push(10)  # 10 + 5 = 15: success
    t.do("first_aid", char=b, patient=a)
    assert t.char(a).condition == "stable"
    # Without help it dies at the end of that round.
    t2 = Table()
    a2 = t2.add("A", pp=0)
    t2.down(a2)
    t2.do("advance_clock", seconds=6)
    assert (t2.char(a2).condition, t2.char(a2).pp) == ("dead", 0)
    assert t2.kinds("pp") == []


def test_D5_in_combat_loses_one_pp_at_end_of_each_own_turn():
    """D5: in combat, 1 PP at the end of each of its own turns, not by
    world time (the round's 6 s cost it nothing more)."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)  # dying before the combat
    t.do("combat_start", order=[a, b])
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    assert t.kinds("pp") == [{"kind": "pp", "char": a, "delta": -1, "cause": "dying"}]
    t.do("end_turn", char=b)  # round 2: +6 s of world time
    assert (t.room.clock, t.char(a).pp) == (6, 5)
    t.do("advance_clock", seconds=60)  # the GM moves time mid-combat
    assert t.char(a).pp == 5
    t.do("end_turn", char=a, round=2)
    assert t.char(a).pp == 4
    ok(t)


def test_D5_in_combat_no_loss_at_end_of_turn_it_started_dying():
    """D5 ruling (Starfinder): not at the end of a turn during which it
    started dying; at the end of its next turn it loses 1 PP."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.do("combat_start", order=[a, b])
    t.down(a)  # during its own turn
    t.do("end_turn", char=a)
    assert (t.char(a).pp, t.kinds("pp")) == (6, [])
    t.do("end_turn", char=b)
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    ok(t)


def test_D5_in_combat_dying_during_another_turn_loses_at_its_own_turn_end():
    """D5: the exemption is only for the turn during which it started dying."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.do("combat_start", order=[a, b])
    t.do("end_turn", char=a)
    t.down(a)  # during B's turn
    t.do("end_turn", char=b)  # round 2
    assert t.char(a).pp == 6
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5


def test_D5_in_combat_stable_then_dying_again_in_own_turn_is_exempt_again():
    """D5 ruling: dying again (D3) during its own turn is "a turn during which
    it started dying"."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)
    t.do("combat_start", order=[a, b])
    t.do("heal", char=a, amount=0, stabilize=True)
    t.do("damage", char=a, amount=1)
    assert t.char(a).condition == "dying"
    t.do("end_turn", char=a)
    assert t.char(a).pp == 6


def test_D5_in_combat_dying_at_zero_pp_dies_at_end_of_own_turn():
    """D5 ruling, in combat: at 0 PP it dies at its next own turn's end."""
    t = Table()
    a, b = t.add("A", pp=0), t.add("B")
    t.down(a)
    t.do("combat_start", order=[a, b])
    t.do("end_turn", char=a)
    assert t.char(a).condition == "dead"
    assert t.kinds("condition") == [
        {"kind": "condition", "char": a, "from": "dying", "to": "dead", "cause": "dying"}
    ]
    assert t.room.combat.current == b


def test_D5_in_combat_pp_falling_to_zero_at_end_of_turn_kills_at_once():
    """D5: in combat too, PP falling to 0 kill at once (at the turn's end)."""
    t = Table()
    a, b = t.add("A", pp=1), t.add("B")
    t.down(a)
    t.do("combat_start", order=[a, b])
    t.do("end_turn", char=a)
    assert (t.char(a).pp, t.char(a).condition) == (0, "dead")
    assert [e["kind"] for e in t.events] == ["pp", "condition", "turn"]
    ok(t)


def test_D5_not_in_the_order_loses_pp_by_world_time_during_combat():
    """D5: a character not in the running combat's order counts as outside
    combat: it loses PP per round of world time (the rounds advance it)."""
    t = Table()
    a, b, c = t.add("A"), t.add("B"), t.add("C")
    t.down(c)
    t.do("combat_start", order=[a, b])
    t.do("end_turn", char=a)
    assert t.char(c).pp == 6
    t.do("end_turn", char=b)  # the round ends: clock 6
    assert (t.room.clock, t.char(c).pp) == (6, 5)
    assert t.kinds("pp") == [
        {"kind": "pp", "char": c, "delta": -1, "cause": "dying", "rounds": 1, "at": 6}
    ]


def test_D5_after_combat_counts_full_rounds_from_combat_end():
    """D5: outside combat the rounds count from when it started dying or from
    when the combat ended, whichever is later."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.do("combat_start", order=[a, b])
    t.do("end_turn", char=a)
    t.down(a)  # at 0, in the order
    t.do("advance_clock", seconds=40)  # in combat: no loss by time
    assert t.char(a).pp == 6
    t.do("combat_end")  # at 40
    t.do("advance_clock", seconds=5)
    assert t.char(a).pp == 6
    t.do("advance_clock", seconds=1)  # 46 = 40 + one round
    assert t.char(a).pp == 5
    assert t.kinds("pp")[0]["at"] == 46


# ---------------------------------------------------------------- D6


def _dead_table():
    t = Table()
    a = t.add("A", owner=t.p1)
    b = t.add("B", owner=t.p1)
    s = t.add("S")
    t.stabilised(s)
    kill(t, a)
    return t, a, b, s


DEAD_COMMANDS = [
    ("damage", {"char": "A", "amount": 1}),
    ("damage", {"char": "A", "amount": 0}),
    ("damage", {"char": "A", "amount": 1, "nonlethal": True}),
    ("heal", {"char": "A", "amount": 5}),
    ("heal", {"char": "A", "amount": 0, "stabilize": True}),
    ("first_aid", {"char": "B", "patient": "A"}),
    ("first_aid", {"char": "A", "patient": "S"}),
    ("stabilize", {"char": "A"}),
    ("stay_in_fight", {"char": "A"}),
    ("tend", {"char": "A", "patient": "S"}),
    ("tend", {"char": "B", "patient": "A"}),
    ("untend", {"patient": "A"}),
    ("rest", {"char": "A", "kind": "short"}),
    ("stop_rest", {"char": "A"}),
    ("ability_damage", {"char": "A", "ability": "str", "amount": 1}),
    ("ability_restore", {"char": "A", "ability": "con", "amount": 1}),
    ("combat_start", {"order": ["B", "A"]}),
]
OWNER_OPS = {"first_aid", "stabilize", "stay_in_fight", "tend", "untend", "rest", "stop_rest"}


@pytest.mark.parametrize(("op", "args"), DEAD_COMMANDS, ids=[c[0] for c in DEAD_COMMANDS])
@pytest.mark.parametrize("sender", ["gm", "owner"])
def test_D6_every_command_on_a_dead_character_is_refused(op, args, sender):
    """D6: every command on a dead character is refused with `rule`, from the
    GM as from its owner (who may otherwise send the O commands)."""
    t, a, b, s = _dead_table()
    names = {"A": a, "B": b, "S": s}
    real = {
        k: ([names[x] for x in v] if isinstance(v, list) else names.get(v, v))
        for k, v in args.items()
    }
    by = t.gm if sender == "gm" else t.p1
    # The owner may send the O commands; a G command from it is refused
    # earlier, for its role (docs/protocol.md, "Refusals").
    exc = RuleBroken if sender == "gm" or op in OWNER_OPS else Forbidden
    refused(t, exc, op, by=by, **real)


def test_D6_gm_correction_may_revive_a_dead_character():
    """D6: dead is terminal for the rules; only a GM correction changes it."""
    t, a, _b, _s = _dead_table()
    t.do("update_character", char=a, set={"condition": "conscious", "pv": 5, "pp": 2})
    c = t.char(a)
    assert (c.condition, c.pv, c.pp) == ("conscious", 5, 2)
    assert t.kinds("condition") == [
        {"kind": "condition", "char": a, "from": "dead", "to": "conscious", "cause": "correction"}
    ]
    ok(t)


def test_D6_gm_may_correct_and_remove_a_dead_character():
    """D6: update_character and remove_character are the GM's corrections."""
    t, a, _b, _s = _dead_table()
    t.do("update_character", char=a, set={"name": "Feu Aline"})
    assert (t.char(a).name, t.char(a).condition) == ("Feu Aline", "dead")
    t.do("remove_character", char=a)
    assert a not in t.room.characters


@pytest.mark.parametrize("by", ["gm", "owner"])
def test_D6_end_turn_passes_a_dead_combatants_turn(by):
    """D6: end_turn is allowed on a dead combatant and simply passes its turn."""
    t = Table()
    a, b = t.add("A", owner=t.p1), t.add("B")
    t.do("combat_start", order=[a, b])
    kill(t, a)
    t.do("end_turn", by=t.gm if by == "gm" else t.p1, char=a, round=1)
    assert t.room.combat.to_dict() == {"order": [a, b], "turn": 1, "round": 1}
    assert (t.char(a).condition, t.char(a).pp) == ("dead", 0)
    assert t.events == [{"kind": "turn", "char": b, "round": 1, "turn": 1}]


def test_D6_dead_is_terminal_under_time():
    """D6: no timed rule changes a dead character."""
    t, a, _b, _s = _dead_table()
    t.dice.push(*[12] * 8)  # S's eight hourly checks
    before = ch(t, a)
    t.do("advance_clock", seconds=10 * HOUR)
    assert ch(t, a) == before


# ---------------------------------------------------------------- N1


def test_N1_nonlethal_damage_follows_d1_pe_first():
    """N1: nonlethal damage follows D1: PE first, then PV."""
    t = Table()
    a = t.add()
    t.do("damage", char=a, amount=20, nonlethal=True)
    c = t.char(a)
    assert (c.pe, c.pv, c.condition, c.nonlethal) == (0, 15, "conscious", False)
    assert t.events == [
        {"kind": "damage", "char": a, "amount": 20, "pe": -15, "pv": -5, "nonlethal": True}
    ]


@pytest.mark.parametrize(("amount", "pv_only"), [(35, False), (20, True), (999, False)])
def test_N1_nonlethal_damage_to_zero_pv_is_stable_and_marked(amount, pv_only):
    """N1: nonlethal damage bringing PV to 0 makes the character stable (not
    dying), marked `nonlethal`; its stability clock starts (L3)."""
    t = Table()
    a = t.add()
    t.do("advance_clock", seconds=50)
    t.do("damage", char=a, amount=amount, nonlethal=True, pv_only=pv_only)
    c = t.char(a)
    assert (c.pv, c.pp, c.condition, c.nonlethal) == (0, 6, "stable", True)
    assert (c.stable_since, c.stability_checks, c.dying_next) == (50, 0, None)
    assert t.kinds("condition") == [
        {"kind": "condition", "char": a, "from": "conscious", "to": "stable", "cause": "nonlethal"}
    ]
    t.do("advance_clock", seconds=HOUR - 1)  # not dying: no PP lost
    assert (t.char(a).pp, t.char(a).condition) == (6, "stable")
    ok(t)


@pytest.mark.parametrize("setup", ["dying", "stable", "knocked_out"])
def test_N1_nonlethal_damage_on_zero_pv_changes_nothing(setup):
    """N1: nonlethal damage reaching PV already at 0 changes nothing: no PP,
    no condition, the stability clock keeps running."""
    t = Table()
    a = t.add()
    {"dying": t.down, "stable": t.stabilised, "knocked_out": lambda c: knocked_out(t, c)}[setup](a)
    t.do("advance_clock", seconds=1)
    before = state(t)
    t.do("damage", char=a, amount=10, nonlethal=True)
    assert state(t) == before
    assert t.kinds("condition") == [] and t.kinds("pp") == []
