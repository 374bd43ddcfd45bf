"""Time and turns (T1, T2), rule by rule (docs/rules.md, "Time and turns"): the combat tracker and
the world clock's scheduler.

Default sheet: level 3, PV 20, PE 15, PP 6, Con 14 (+2), Medicine +5.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules import (
    Conflict,
    Forbidden,
    InvalidArgs,
    Room,
    RuleBroken,
    ScriptedDice,
    SeededDice,
    apply,
)
from rules import clock as clock_module
from rules.stabilizing import stabilize_cost
from rules.validate import MAX_ADVANCE, MAX_PP
from tests.helpers.table import Table
from tests.rules.rulekit import HOUR, ch, kill, knocked_out, no_at, ok, refused, state

# ---------------------------------------------------------------- T1: start, end


def test_T1_combat_start_is_round_one_first_combatant_and_advances_no_time():
    """T1: starting combat: round 1, first combatant, no time advanced."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.do("advance_clock", seconds=50)
    t.do("combat_start", order=[b, a])
    assert t.room.to_dict()["combat"] == {"order": [b, a], "turn": 0, "round": 1}
    assert t.room.clock == 50
    assert t.events == [
        {"kind": "combat", "outcome": "start", "order": [b, a]},
        {"kind": "turn", "char": b, "round": 1, "turn": 0},
    ]
    ok(t)


def test_T1_combat_start_ends_the_rests_of_those_in_the_order_only():
    """T1 / R4: starting combat ends the rests of those in the order; a
    character outside the order keeps resting."""
    t = Table()
    a, b, c = t.add("A"), t.add("B"), t.add("C")
    t.do("rest", char=a, kind="night")
    t.do("rest", char=c, kind="short")
    t.do("combat_start", order=[a, b])
    assert t.char(a).activity is None
    assert ch(t, c)["activity"] == {"kind": "short", "ends": 600}
    assert t.kinds("rest") == [
        {"kind": "rest", "char": a, "rest": "night", "outcome": "interrupted", "cause": "combat"}
    ]


@pytest.mark.parametrize("case", ["running", "dead", "duplicate"])
def test_T1_combat_start_refusals(case):
    """T1 (engine rulings, docs/rules.md): a second combat while one runs, a
    dead combatant (D6) and a character twice in the order are `rule`."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    order = [a, b]
    if case == "running":
        t.do("combat_start", order=[a])
    elif case == "dead":
        kill(t, b)
    else:
        order = [a, b, a]
    refused(t, RuleBroken, "combat_start", order=order)


def test_T1_combat_end_clears_the_tracker_and_advances_no_time():
    """T1: ending combat advances no time."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.do("combat_start", order=[a, b])
    t.do("end_turn", char=a)
    t.do("combat_end")
    assert (t.room.combat, t.room.clock) == (None, 0)
    assert t.events == [{"kind": "combat", "outcome": "end"}]
    refused(t, RuleBroken, "combat_end")  # engine choice: no combat is `rule`


# ---------------------------------------------------------------- T1: end_turn


def test_T1_end_turn_passes_the_turn_to_the_next_combatant():
    """T1: the turn passes to the next combatant; no world time passes."""
    t = Table()
    a, b, c = t.add("A"), t.add("B"), t.add("C")
    t.do("combat_start", order=[a, b, c])
    t.do("end_turn", char=a, round=1)
    assert t.room.to_dict()["combat"] == {"order": [a, b, c], "turn": 1, "round": 1}
    assert t.events == [{"kind": "turn", "char": b, "round": 1, "turn": 1}]
    t.do("end_turn", char=b)
    assert (t.room.combat.current, t.room.clock) == (c, 0)


@pytest.mark.parametrize("round_seconds", [6, 10, 1, 3600])
def test_T1_after_the_last_combatant_round_goes_up_and_clock_advances_round_seconds(
    round_seconds,
):
    """T1: after the last one the round number goes up and world time
    advances by `round_seconds`."""
    t = Table(round_seconds=round_seconds)
    a, b = t.add("A"), t.add("B")
    t.do("advance_clock", seconds=7)
    t.do("combat_start", order=[a, b])
    t.do("end_turn", char=a)
    t.do("end_turn", char=b)
    assert t.room.to_dict()["combat"] == {"order": [a, b], "turn": 0, "round": 2}
    assert t.room.clock == 7 + round_seconds
    assert t.events == [
        {"kind": "clock", "from": 7, "to": 7 + round_seconds},
        {"kind": "turn", "char": a, "round": 2, "turn": 0},
    ]
    t.do("end_turn", char=a, round=2)
    t.do("end_turn", char=b, round=2)
    assert (t.room.combat.round, t.room.clock) == (3, 7 + 2 * round_seconds)


def test_T1_round_seconds_change_applies_to_the_next_round():
    """T1: a round lasts the room's current `round_seconds`."""
    t = Table()
    a = t.add("A")
    t.do("combat_start", order=[a])
    t.do("end_turn", char=a)
    t.do("update_room", round_seconds=30)
    t.do("end_turn", char=a)
    assert (t.room.combat.round, t.room.clock) == (3, 36)


@pytest.mark.parametrize(
    ("char", "rnd"), [("B", None), ("B", 1), ("A", 2), ("A", 3), ("C", 1), ("C", None)]
)
def test_T1_end_turn_naming_another_combatant_or_round_is_conflict(char, rnd):
    """T1: an end of turn naming a combatant or round other than the current
    one is refused with `conflict` (C is not even in the order)."""
    t = Table()
    ids = {"A": t.add("A"), "B": t.add("B"), "C": t.add("C")}
    t.do("combat_start", order=[ids["A"], ids["B"]])
    args = {"char": ids[char]}
    if rnd is not None:
        args["round"] = rnd
    refused(t, Conflict, "end_turn", **args)


@pytest.mark.parametrize("with_round", [True, False])
def test_T1_end_turn_sent_twice_ends_one_turn(with_round):
    """T1: a repeated end_turn message is refused (`conflict`), so a message
    sent twice never ends two turns."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    t.down(a)
    t.do("combat_start", order=[a, b])
    msg = {"char": a, "round": 1} if with_round else {"char": a}
    t.do("end_turn", **msg)
    assert t.char(a).pp == 5
    refused(t, Conflict, "end_turn", **msg)
    assert t.char(a).pp == 5


def test_T1_end_turn_sent_twice_with_one_combatant_is_caught_by_the_round():
    """T1: with a single combatant the turn comes straight back to it: the
    round number is what tells a repeat from the next turn."""
    t = Table()
    a = t.add("A")
    t.do("combat_start", order=[a])
    t.do("end_turn", char=a, round=1)
    assert (t.room.combat.round, t.room.clock) == (2, 6)
    refused(t, Conflict, "end_turn", char=a, round=1)


def test_T1_end_turn_without_a_combat_is_conflict():
    """T1 (engine ruling, docs/rules.md): with no combat running the turn is
    over: `conflict`."""
    t = Table()
    a = t.add("A")
    refused(t, Conflict, "end_turn", char=a)
    refused(t, Conflict, "end_turn", char=a, round=1)


def test_T1_end_turn_runs_end_of_turn_rules_then_passes_then_the_round_in_one_change():
    """T1: the current combatant's end-of-turn rules (D5 loss, S3/S4 allowance)
    run first, then the turn passes; the round's world time runs T2 (here a
    bystander's hourly check and a rest completion), all in one outcome."""
    t = Table()
    a, b, s, r = t.add("A"), t.add("B"), t.add("S"), t.add("R")
    t.stabilised(s)  # checks at 3600
    t.do("advance_clock", seconds=3000)
    t.do("damage", char=r, amount=4)
    t.do("rest", char=r, kind="short")  # completes at 3600
    t.do("advance_clock", seconds=594)  # 3594
    t.down(b)
    t.do("combat_start", order=[a, b])
    t.do("stabilize", char=b)  # S3 on A's turn: B's allowance is used
    t.do("damage", char=b, amount=1)  # dying again, not in its own turn
    t.do("end_turn", char=a)
    t.dice.push(12)
    out = t.do("end_turn", char=b, round=1)
    assert no_at(out.events) == [
        {"kind": "pp", "char": b, "delta": -1, "cause": "dying"},
        {"kind": "clock", "from": 3594, "to": 3600},
        {
            "kind": "roll",
            "char": s,
            "check": "constitution",
            "d20": 12,
            "mod": 2,
            "bonus": 0,
            "total": 14,
            "dc": None,
            "outcome": "stay",
            "source": "server",
            "hour": 1,
        },
        {"kind": "pp", "char": r, "delta": -1, "cause": "short_rest"},
        {
            "kind": "recover",
            "char": r,
            "cause": "short_rest",
            "pv": 0,
            "pe": 4,
            "pp": 0,
            "abilities": 0,
        },
        {"kind": "rest", "char": r, "rest": "short", "outcome": "complete"},
        {"kind": "turn", "char": a, "round": 2, "turn": 0},
    ]
    assert [e.get("at") for e in out.events if e["kind"] in ("roll", "rest")] == [3600, 3600]
    assert (t.char(b).pp, t.char(b).regained_this_turn) == (4, False)
    assert t.room.clock == 3600
    ok(t)


# ---------------------------------------------------------------- T2


@pytest.mark.parametrize("who", ["p1", "obs"])
def test_T2_advance_clock_is_gm_only(who):
    """T2: clock advance is the GM's only (`forbidden`)."""
    t = Table()
    t.add("A", owner=t.p1)
    refused(t, Forbidden, "advance_clock", by=getattr(t, who), seconds=60)


@pytest.mark.parametrize("seconds", [0, -1, -3600])
def test_T2_advance_clock_is_forward_only(seconds):
    """T2: forward only: 0 or negative seconds are `invalid_args`."""
    t = Table()
    t.add("A")
    refused(t, InvalidArgs, "advance_clock", seconds=seconds)


def test_T2_advance_clock_moves_the_clock_and_says_so():
    """T2: the clock moves by exactly the seconds given."""
    t = Table()
    t.do("advance_clock", seconds=90)
    t.do("advance_clock", seconds=3510)
    assert t.room.clock == 3600
    assert t.events == [{"kind": "clock", "from": 90, "to": 3600}]


def _busy_table(dice: ScriptedDice) -> tuple[Table, dict[str, str]]:
    """Every kind of timed rule at once: hourly checks with and without a
    healer, a nonlethal knock-out, dying characters, rests of every kind, an
    S3/S4 allowance waiting for its round."""
    t = Table()
    t.dice = dice
    ids = {
        n: t.add(n, pp_max=pp)
        for n, pp in zip("ABCDEFGHI", [6, 6, 6, 3, 6, 6, 6, 6, 8], strict=True)
    }
    t.stabilised(ids["A"])
    t.do("tend", char=ids["H"], patient=ids["A"])
    knocked_out(t, ids["B"])
    t.do("advance_clock", seconds=1234)
    t.stabilised(ids["C"])
    t.down(ids["D"])  # 3 PP: dies at +18 s
    t.do("damage", char=ids["E"], amount=20)
    t.do("rest", char=ids["E"], kind="night")
    t.do("damage", char=ids["F"], amount=5)
    t.do("rest", char=ids["F"], kind="short")
    t.do("damage", char=ids["G"], amount=25)
    t.do("rest", char=ids["G"], kind="bed")
    t.down(ids["I"])
    t.do("stabilize", char=ids["I"])  # allowance back at +6 s
    return t, ids


@pytest.mark.parametrize(
    "steps",
    [
        [30 * HOUR],
        [3 * HOUR] * 10,
        [HOUR] * 30,
        [5, 1, 594, 3000, 8 * HOUR - 3600, 22 * HOUR],
        [1, 17, 18, 5, 599, 1000, 30 * HOUR - 1640],
    ],
    ids=["one_jump", "3h_x10", "1h_x30", "irregular", "tiny_first"],
)
def test_T2_one_jump_equals_many_steps_for_the_same_dice(steps):
    """T2: every timed rule fires at its own instant, in chronological order,
    so advancing at once or in steps gives the same state and the same fired
    events for the same dice."""
    rolls = [(i * 7) % 20 + 1 for i in range(200)]
    ref, _ = _busy_table(ScriptedDice(rolls))
    ref.do("advance_clock", seconds=30 * HOUR)
    ref_events = [e for e in ref.events if e["kind"] != "clock"]

    t, _ = _busy_table(ScriptedDice(rolls))
    fired = []
    for s in steps:
        t.do("advance_clock", seconds=s)
        fired += [e for e in t.events if e["kind"] != "clock"]
    assert sum(steps) == 30 * HOUR
    assert state(t) == state(ref)
    # The same events, except that the steps may cut a run of dying losses
    # into several events (T2's collapse): those add up to the same.
    assert _without_dying_losses(fired) == _without_dying_losses(ref_events)
    assert _dying_totals(fired) == _dying_totals(ref_events)
    assert t.dice.used == ref.dice.used
    ats = [e["at"] for e in fired]
    assert ats == sorted(ats)  # chronological order
    assert len(ref_events) >= 25
    ok(t)


def _is_dying_loss(e: dict) -> bool:
    return e["kind"] == "pp" and e["cause"] == "dying"


def _without_dying_losses(events: list[dict]) -> list[dict]:
    return [e for e in events if not _is_dying_loss(e)]


def _dying_totals(events: list[dict]) -> dict[str, tuple[int, int, int]]:
    """Per character: PP lost to D5, rounds covered, instant of the last loss."""
    out: dict[str, tuple[int, int, int]] = {}
    for e in filter(_is_dying_loss, events):
        pp, rounds, _ = out.get(e["char"], (0, 0, 0))
        out[e["char"]] = (pp - e["delta"], rounds + e["rounds"], e["at"])
    return out


def test_T2_ties_at_one_instant_go_in_character_order():
    """T2: ties at one instant go in character order (`seq`), whatever the
    ids or the order of the characters in the state's map."""
    t = Table()
    z = t.add("Zed", id="zz")  # seq 1
    m = t.add("Mia", id="mm")  # seq 2
    a = t.add("Abe", id="aa")  # seq 3
    for c in (z, m, a):
        t.stabilised(c)
    d = t.room.to_dict()
    d["characters"] = dict(reversed(list(d["characters"].items())))
    t.room = Room.from_dict(d)
    assert list(t.room.characters) == [a, m, z]
    t.dice.push(18, 12, 1)  # the first die goes to seq 1
    t.do("advance_clock", seconds=HOUR)
    assert [(r["char"], r["d20"]) for r in t.kinds("roll")] == [(z, 18), (m, 12), (a, 1)]
    assert [t.char(c).condition for c in (z, m, a)] == ["conscious", "stable", "dead"]


def test_T2_character_order_comes_before_the_kind_of_rule():
    """T2: at one instant, character order first: character 1's rest
    completion comes before character 2's dying loss and character 3's
    stability check."""
    t = Table()
    r, d, s = t.add("R"), t.add("D"), t.add("S")
    t.do("damage", char=r, amount=3)
    t.do("rest", char=r, kind="short")  # ends 600
    t.do("advance_clock", seconds=594)
    t.down(d)  # loses its first PP at 600
    t.stabilised(s)  # checks at 594 + 3600
    t.do("update_character", char=s, set={"name": "S"})
    t.dice.push(12)
    t.do("advance_clock", seconds=6)
    assert [(e["kind"], e.get("char")) for e in t.events] == [
        ("clock", None),
        ("pp", r),
        ("recover", r),
        ("rest", r),
        ("pp", d),
    ]
    assert t.dice.rolls == [12]  # S's check is an hour later


def test_T2_per_character_tie_order_dying_then_stability_then_rest():
    """T2: for one character at one instant: dying loss, then stability
    check, then rest completion (then the S4 reset). The three are exclusive
    by condition, so the order is the scheduler's table, checked as data."""
    assert [name for name, _due, _fire in clock_module.TIMERS] == [
        "dying",
        "stability",
        "rest",
        "allowance",
    ]


def test_T2_rules_fire_at_their_own_instant_in_chronological_order():
    """T2: rules of different characters interleave by time, each event
    carrying its instant (`at`)."""
    t = Table()
    a, b = t.add("A", pp_max=2), t.add("B")
    t.stabilised(b)  # checks 3600, 7200
    t.do("damage", char=a, amount=3)
    t.do("rest", char=a, kind="night")  # ends 28800
    t.do("advance_clock", seconds=3)
    t.dice.push(*[12] * 8)
    t.do("advance_clock", seconds=8 * HOUR)
    fired = [(e["kind"], e["char"], e["at"]) for e in t.events if "at" in e]
    assert fired == [
        *[("roll", b, h * HOUR) for h in range(1, 8)],
        # 28800: A's rest and B's last check tie; A comes first (seq 1).
        ("recover", a, 8 * HOUR),
        ("rest", a, 8 * HOUR),
        ("roll", b, 8 * HOUR),
        ("recover", b, 8 * HOUR),
        ("condition", b, 8 * HOUR),
    ]
    assert t.room.clock == 8 * HOUR + 3


def test_T2_cost_follows_the_firings_not_the_seconds():
    """T2: a century in one jump fires only the rules due: a dying character
    dies after its PP, a stable one makes its eight checks, a rest completes
    once; the scripted dice prove no other check is made."""
    t = Table()
    d, s, r = t.add("D"), t.add("S"), t.add("R")
    t.down(d)
    t.stabilised(s)
    t.do("rest", char=r, kind="bed")
    t.dice.push(*[12] * 8)
    t.do("advance_clock", seconds=MAX_ADVANCE)
    assert t.room.clock == MAX_ADVANCE
    assert (t.char(d).condition, t.char(s).condition, t.char(r).activity) == (
        "dead",
        "conscious",
        None,
    )
    assert t.dice.rolls == [] and len(t.dice.used) == 8
    # clock; D: its six losses in one event, death; S: 8 rolls, L2; R
    assert len(t.events) == 1 + 2 + 10 + 2
    refused(t, InvalidArgs, "advance_clock", seconds=MAX_ADVANCE + 1)


def test_T2_advance_during_combat_leaves_turn_based_rules_to_the_turns():
    """T2 + D5: advancing the clock during a combat fires the timed rules of
    those outside the order; a dying combatant loses PP only on its turns."""
    t = Table()
    a, b, c = t.add("A"), t.add("B"), t.add("C")
    t.down(a)
    t.down(c)
    t.do("combat_start", order=[a, b])
    t.do("advance_clock", seconds=12)
    assert (t.char(a).pp, t.char(c).pp) == (6, 4)
    assert t.room.to_dict()["combat"] == {"order": [a, b], "turn": 0, "round": 1}


def test_T2_dead_and_conscious_characters_fire_nothing():
    """T2: with nothing due, a jump only moves the clock."""
    t = Table()
    a, b = t.add("A"), t.add("B")
    kill(t, b)
    before = state(t)
    t.do("advance_clock", seconds=10 * HOUR)
    after = state(t)
    assert after["clock"] == 10 * HOUR
    after["clock"] = before["clock"]
    assert after == before
    assert t.events == [{"kind": "clock", "from": 0, "to": 10 * HOUR}]
    assert a


# ---------------------------------------------------------------- T2: D5's repeats collapsed


def test_T2_D5_a_long_advance_collapses_the_dying_losses_into_one_event():
    """T2 (v1.1 Bounds): the repeated D5 losses of one advance are one
    computed step and one `pp` event saying how many rounds it covers, `at`
    the last of them; PP reaching 0 kill at that instant. A century costs
    what a minute does."""
    t = Table(round_seconds=1)
    a = t.add(pp_max=MAX_PP)
    t.do("advance_clock", seconds=10)
    t.down(a)  # losses at 11, 12, ...: the last PP at 10 + MAX_PP
    t.do("advance_clock", seconds=MAX_ADVANCE)
    last = 10 + MAX_PP
    assert t.events == [
        {"kind": "clock", "from": 10, "to": 10 + MAX_ADVANCE},
        {"kind": "pp", "char": a, "delta": -MAX_PP, "cause": "dying", "rounds": MAX_PP,
         "at": last},
        {"kind": "condition", "char": a, "from": "dying", "to": "dead", "cause": "dying",
         "at": last},
    ]  # fmt: skip
    assert (t.char(a).pp, t.char(a).dying_next) == (0, None)
    ok(t)


def test_T2_D5_the_collapse_stops_at_the_advance_end_and_the_next_loss_stays_scheduled():
    """T2: a run cut by the advance's end covers the rounds inside it; the
    next loss keeps its instant, so the following advance goes on from it."""
    t = Table()
    a = t.add(pp_max=MAX_PP)
    t.down(a)  # losses at 6, 12, ...
    t.do("advance_clock", seconds=6 * 40 + 5)  # 245: rounds 6 ... 240
    assert t.kinds("pp") == [
        {"kind": "pp", "char": a, "delta": -40, "cause": "dying", "rounds": 40, "at": 240}
    ]
    assert (t.char(a).pp, t.char(a).dying_next, t.char(a).condition) == (MAX_PP - 40, 246, "dying")
    t.do("advance_clock", seconds=1)
    assert t.kinds("pp") == [
        {"kind": "pp", "char": a, "delta": -1, "cause": "dying", "rounds": 1, "at": 246}
    ]


def test_T2_D5_at_zero_pp_the_collapsed_step_is_the_one_loss_that_kills():
    """T2 with D5's ruling: at 0 PP the next loss kills (no PP to lose: no pp
    event), whatever the advance's length."""
    t = Table()
    a = t.add(pp=0)
    t.down(a)
    t.do("advance_clock", seconds=MAX_ADVANCE)
    assert t.kinds("pp") == []
    assert [(e["to"], e["at"]) for e in t.kinds("condition")] == [("dead", 6)]


def test_T2_D5_collapsed_events_keep_the_chronological_order():
    """T2: a collapsed run sits at the instant of its last loss among the
    other rules' events: here another character's hourly checks fall inside
    the run and come first; a third one's rest completes after."""
    t = Table(round_seconds=60)
    d, s, r = t.add("D", pp_max=MAX_PP), t.add("S"), t.add("R")
    t.down(d)  # losses every minute from 60; its last PP at 6000
    t.stabilised(s)  # checks at 3600, 7200, ...
    t.do("damage", char=r, amount=3)
    t.do("rest", char=r, kind="night")  # completes at 28800
    t.dice.push(*[12] * 8)
    t.do("advance_clock", seconds=8 * HOUR)
    assert t.char(d).condition == "dead"
    fired = [(e["kind"], e["char"], e["at"]) for e in t.events if "at" in e]
    assert fired[:4] == [
        ("roll", s, HOUR),
        ("pp", d, 100 * 60),
        ("condition", d, 100 * 60),
        ("roll", s, 2 * HOUR),
    ]
    ats = [at for _, _, at in fired]
    assert ats == sorted(ats)


def test_T2_D5_an_allowance_reset_inside_the_run_gives_the_step_by_step_state():
    """T2: the S3/S4 allowance reset of the same character falls inside its
    run of losses (used at 12, back at 18); the collapsed step and a round by
    round advance give the same state, and the allowance is back."""
    t = Table()
    a = t.add(pp_max=MAX_PP)
    t.do("advance_clock", seconds=12)
    t.down(a)
    t.do("stabilize", char=a)  # S3 at 12: allowance back at 18
    t.do("damage", char=a, amount=1)  # dying again (D3), next loss at 18
    start = t.room
    one = apply(start, "advance_clock", {"seconds": 600}, t.gm, t.dice)
    step = start
    losses = 0
    for _ in range(100):
        out = apply(step, "advance_clock", {"seconds": 6}, t.gm, t.dice)
        step = out.room
        losses += sum(1 for e in out.events if e["kind"] == "pp")
    assert one.room.to_dict() == step.to_dict()
    assert losses == 97  # 100 rounds, but its PP ran out at the 97th
    c = one.room.characters[a]
    assert (c.condition, c.regained_this_turn, c.regained_at) == ("dead", False, None)
    assert [e["rounds"] for e in one.events if e["kind"] == "pp"] == [97]


KINDS = ["dying", "dying_allowance", "stable", "resting", "idle"]


@settings(max_examples=120, deadline=None)
@given(
    round_seconds=st.sampled_from([1, 2, 6, 60]),
    cast=st.lists(
        st.tuples(st.integers(0, MAX_PP), st.sampled_from(KINDS), st.integers(0, 30)),
        min_size=1,
        max_size=5,
    ),
    steps=st.lists(st.integers(1, 300), min_size=1, max_size=12),
    seed=st.integers(0, 2**32),
)
def test_T2_D5_collapsed_losses_equal_step_by_step(round_seconds, cast, steps, seed):
    """T2: with dying characters of up to MAX_PP, short rounds, allowances
    pending inside their runs, stable and resting neighbours: one long
    advance gives the state of many small ones; each dying character gets at
    most one loss event per advance; the PP it lost are the sum of its
    events' deltas, in one jump and in steps, over the same rounds."""
    t = Table(round_seconds=round_seconds)
    t.dice = SeededDice(seed)
    for i, (pp, kind, wait) in enumerate(cast):
        if wait:
            t.do("advance_clock", seconds=wait)
        c = t.add(f"C{i}", pp_max=pp)
        if kind.startswith("dying"):
            t.down(c)
            if kind == "dying_allowance" and pp >= stabilize_cost(t.char(c)):
                t.do("stabilize", char=c)
                t.do("damage", char=c, amount=1)
        elif kind == "stable":
            t.stabilised(c)
        elif kind == "resting":
            t.do("damage", char=c, amount=3)
            t.do("rest", char=c, kind="short" if pp else "night")
    start = t.room
    one = apply(start, "advance_clock", {"seconds": sum(steps)}, t.gm, SeededDice(seed + 1))
    many, dice, many_events = start, SeededDice(seed + 1), []
    for s in steps:
        out = apply(many, "advance_clock", {"seconds": s}, t.gm, dice)
        many = out.room
        many_events += out.events
    assert one.room.to_dict() == many.to_dict()

    one_losses = [e for e in one.events if _is_dying_loss(e)]
    assert len({e["char"] for e in one_losses}) == len(one_losses)  # one event each
    for cid, before in start.characters.items():
        if before.condition != "dying":
            continue
        lost = before.pp - one.room.characters[cid].pp
        for events in (one.events, many_events):
            mine = [e for e in events if _is_dying_loss(e) and e["char"] == cid]
            assert -sum(e["delta"] for e in mine) == lost
            assert sum(e["rounds"] for e in mine) == lost  # one PP a round
    assert _dying_totals(one.events) == _dying_totals(many_events)
    ats = [e["at"] for e in one.events if "at" in e]
    assert ats == sorted(ats)
