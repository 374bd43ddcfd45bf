"""Property tests (hypothesis) of the engine's invariants over random
command sequences: the condition invariants of docs/rules.md, "Conditions", 0 <= current <= max,
dead is terminal, refusals change nothing, one clock jump equals many steps,
and the dict form round-trips."""

from __future__ import annotations

import copy
import json

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules import Refused, Room, SeededDice, apply, apply_ops, diff, violations
from rules.clock import TIMERS
from rules.testing import SHEET
from tests.helpers.table import Table

CHARS = ["c1", "c2", "c3", "c4"]
cid = st.sampled_from([*CHARS, "c9"])  # c9 never exists: not_found paths too
small = st.integers(min_value=0, max_value=30)

COMMANDS = st.one_of(
    st.tuples(
        st.just("damage"),
        st.fixed_dictionaries(
            {"char": cid, "amount": small},
            optional={"nonlethal": st.booleans(), "pv_only": st.booleans()},
        ),
    ),
    st.tuples(
        st.just("heal"),
        st.fixed_dictionaries(
            {"char": cid, "amount": st.integers(0, 10)}, optional={"stabilize": st.booleans()}
        ),
    ),
    st.tuples(st.just("first_aid"), st.fixed_dictionaries({"char": cid, "patient": cid})),
    st.tuples(st.just("stabilize"), st.fixed_dictionaries({"char": cid})),
    st.tuples(st.just("stay_in_fight"), st.fixed_dictionaries({"char": cid})),
    st.tuples(st.just("tend"), st.fixed_dictionaries({"char": cid, "patient": cid})),
    st.tuples(st.just("untend"), st.fixed_dictionaries({"patient": cid})),
    st.tuples(
        st.just("rest"),
        st.fixed_dictionaries({"char": cid, "kind": st.sampled_from(["short", "night", "bed"])}),
    ),
    st.tuples(st.just("stop_rest"), st.fixed_dictionaries({"char": cid})),
    st.tuples(
        st.just("ability_damage"),
        st.fixed_dictionaries(
            {"char": cid, "ability": st.sampled_from(["con", "str"]), "amount": st.integers(0, 8)}
        ),
    ),
    st.tuples(
        st.just("ability_restore"),
        st.fixed_dictionaries(
            {"char": cid, "ability": st.sampled_from(["con", "str"]), "amount": st.integers(0, 8)}
        ),
    ),
    st.tuples(
        st.just("advance_clock"),
        st.fixed_dictionaries(
            {"seconds": st.sampled_from([1, 6, 60, 600, 3600, 4 * 3600, 30 * 3600])}
        ),
    ),
    st.tuples(
        st.just("combat_start"),
        st.fixed_dictionaries(
            {"order": st.lists(st.sampled_from(CHARS), min_size=1, max_size=4, unique=True)}
        ),
    ),
    st.tuples(st.just("combat_end"), st.just({})),
    st.tuples(st.just("end_turn"), st.fixed_dictionaries({"char": cid})),
    st.tuples(
        st.just("queue_rolls"),
        st.fixed_dictionaries({"rolls": st.lists(st.integers(1, 20), min_size=1, max_size=3)}),
    ),
    st.tuples(
        st.just("roll_initiative"),
        st.fixed_dictionaries(
            {},
            optional={
                "chars": st.lists(cid, min_size=1, max_size=4, unique=True),
                "bonus": st.dictionaries(cid, st.integers(-5, 5), max_size=3),
                "rolls": st.dictionaries(cid, st.integers(1, 20), max_size=3),
            },
        ),
    ),
    st.tuples(st.just("update_room"), st.fixed_dictionaries({"skip_dead": st.booleans()})),
)
CURRENT = "@current"
# Tracker edits too, for the engine's own invariants (the views tests, which
# reuse COMMANDS, have their own).
TRACKER_COMMANDS = st.one_of(
    COMMANDS,
    st.tuples(
        st.just("set_order"),
        st.fixed_dictionaries(
            {"order": st.lists(st.sampled_from(CHARS), min_size=1, max_size=4, unique=True)},
            optional={"turn": st.integers(0, 4)},
        ),
    ),
    # The current combatant's end of turn (run() puts its id in), so that
    # rounds go by and T3's passing over runs often.
    st.tuples(st.just("end_turn"), st.just({"char": CURRENT})),
    st.tuples(st.just("end_turn"), st.just({"char": CURRENT})),
)
ACTORS = st.sampled_from(["gm", "gm", "gm", "p1", "obs"])


def fresh_table() -> Table:
    t = Table()
    t.add("Aline", owner=t.p1)
    t.add("Bruno", owner=t.p1, pp_max=2, level=1, pv_max=8, pe_max=4)
    t.add("Chloé", owner=t.p2, medicine=12, pp_max=12)
    t.add("Denis", abilities={"str": 8, "dex": 10, "con": 6, "int": 10, "wis": 10, "cha": 10})
    return t


def run(t: Table, commands, actors, dice: SeededDice):
    """Apply the sequence; check the invariants after every command."""
    actor_of = {"gm": t.gm, "p1": t.p1, "obs": t.obs}
    dead: set[str] = set()
    for (op, args), who in zip(commands, actors, strict=False):
        if args.get("char") == CURRENT:
            args = {**args, "char": t.room.combat.current if t.room.combat else "c1"}
        before = t.room.to_dict()
        try:
            out = apply(t.room, op, args, actor_of[who], dice)
        except Refused:
            assert t.room.to_dict() == before, f"refused {op} changed the state"
            continue
        assert t.room.to_dict() == before, f"{op} mutated its input state"
        t.room = out.room
        assert violations(t.room) == [], (op, args, violations(t.room))
        check_turns(t.room, op)
        for c in t.room.characters.values():
            if c.id in dead:
                assert c.condition == "dead", f"D6: {c.id} came back from the dead by {op}"
            if c.condition == "dead":
                dead.add(c.id)
            # docs/rules.md, "Conditions": conditions and their PV invariants.
            assert 0 <= c.pv <= c.pv_max and 0 <= c.pe <= c.pe_max and 0 <= c.pp <= c.pp_max
    return t


def check_turns(room: Room, op: str) -> None:
    """T3 and T4 after each accepted command."""
    combat = room.combat
    if combat is None:
        assert room.initiative == {}, "T4: totals outlive their combat"
        assert not any(c.dying_fresh for c in room.characters.values()), "D5: out of combat"
        return
    chars = room.characters
    if op == "end_turn" and room.skip_dead:
        # T3: an end of turn gives the turn to a living combatant, if any is.
        living = [c for c in combat.order if chars[c].condition != "dead"]
        assert not living or combat.current in living, "T3: a dead combatant got the turn"
    if op == "roll_initiative":
        # T4: the rolled first, by total, higher Dex modifier, character order.
        rolled = [c for c in combat.order if c in room.initiative]
        assert combat.order[: len(rolled)] == rolled, "T4: an unrolled combatant before"
        keys = [(-room.initiative[c], -chars[c].mod("dex"), chars[c].seq) for c in rolled]
        assert keys == sorted(keys), "T4: the order is not sorted"
    # D5 v1.2: only the combatant whose turn it is may hold the exemption.
    for c in chars.values():
        assert not c.dying_fresh or c.id == combat.current, f"D5: {c.id} kept its exemption"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(TRACKER_COMMANDS, max_size=40),
    st.lists(ACTORS, min_size=40, max_size=40),
    st.integers(0, 2**32),
)
def test_invariants_hold_over_random_sequences(commands, actors, seed):
    """D1-D6, S1-S4, L1-L5, R5: invariants, dead is terminal, refusals change nothing."""
    run(fresh_table(), commands, actors, SeededDice(seed))


@settings(max_examples=100, deadline=None)
@given(st.lists(COMMANDS, max_size=25), st.integers(0, 2**32))
def test_dict_form_round_trips(commands, seed):
    """The plain-dict form round-trips through from_dict, JSON and MessagePack,
    and a diff replays old into new."""
    t = fresh_table()
    dice = SeededDice(seed)
    for op, args in commands:
        before = t.room.to_dict()
        old_room = t.room
        try:
            t.room = apply(t.room, op, args, t.gm, dice).room
        except Refused:
            continue
        d = t.room.to_dict()
        assert t.room.to_dict(since=(old_room, before)) == d  # the incremental form too
        assert Room.from_dict(d).to_dict() == d
        assert json.loads(json.dumps(d)) == d
        assert msgpack.unpackb(msgpack.packb(d)) == d
        assert apply_ops(copy.deepcopy(before), diff(before, d)) == d
        assert apply_ops(copy.deepcopy(d), diff(d, before)) == before


@settings(max_examples=100, deadline=None)
@given(
    st.lists(COMMANDS, max_size=20),
    st.lists(st.integers(1, 5 * 3600), min_size=1, max_size=8),
    st.integers(0, 2**32),
)
def test_T2_one_jump_equals_many_steps(commands, steps, seed):
    """T2: advancing the sum at once or step by step gives the same state for the same dice."""
    t = fresh_table()
    setup = SeededDice(seed)
    for op, args in commands:
        if op == "combat_start":
            continue  # end-of-round advances are T1's business
        try:
            t.room = apply(t.room, op, args, t.gm, setup).room
        except Refused:
            continue
    start = t.room
    one = apply(start, "advance_clock", {"seconds": sum(steps)}, t.gm, SeededDice(seed + 1)).room
    many = start
    dice = SeededDice(seed + 1)
    for s in steps:
        many = apply(many, "advance_clock", {"seconds": s}, t.gm, dice).room
    assert one.to_dict() == many.to_dict()


BIG_EXTRA = 16  # bystanders: the table is past rules.model.TOUCHED_CUTOVER


def pending_timers(room: Room) -> set[str]:
    """Characters with any timed rule pending (clock.TIMERS), asked directly."""
    far = room.clock + 10**9
    return {
        c.id
        for c in room.characters.values()
        if any(due(room, c, far) is not None for _, due, _ in TIMERS)
    }


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            COMMANDS,
            st.tuples(st.just("remove_character"), st.fixed_dictionaries({"char": cid})),
            st.tuples(st.just("add_character"), st.just({**SHEET, "name": "Late"})),
        ),
        max_size=30,
    ),
    st.integers(0, 2**32),
)
def test_a_big_table_diffs_only_what_a_command_touched(commands, seed):
    """Past the cutover, `to_dict(since, touched)` and `diff(..., touched)`
    give the full forms' results, and the scheduler's index of characters
    with timed rules (`Room.timed`) misses none: advancing with it equals
    advancing a copy that asks every character (T2)."""
    t = fresh_table()
    for i in range(BIG_EXTRA):
        t.add(f"Bystander {i}")
    dice = SeededDice(seed)
    for op, args in commands:
        before, old_room = t.room.to_dict(), t.room
        try:
            out = apply(t.room, op, args, t.gm, dice)
        except Refused:
            continue
        t.room = out.room
        d = t.room.to_dict(since=(old_room, before), touched=out.touched)
        assert d == t.room.to_dict()
        ops = diff(before, d, touched={"characters": out.touched})
        assert apply_ops(copy.deepcopy(before), ops) == d
        assert sorted(map(repr, ops)) == sorted(map(repr, diff(before, d)))
        if t.room.timed is not None:
            assert pending_timers(t.room) <= t.room.timed
    unindexed = Room.from_dict(t.room.to_dict())  # timed unknown: every character asked
    for seconds in (6, 3600, 30 * 3600):
        a = apply(t.room, "advance_clock", {"seconds": seconds}, t.gm, SeededDice(seed))
        b = apply(unindexed, "advance_clock", {"seconds": seconds}, t.gm, SeededDice(seed))
        assert a.room.to_dict() == b.room.to_dict() and a.events == b.events


TURN_COMMANDS = st.one_of(
    st.tuples(st.just("end_turn"), st.just({"char": CURRENT})),
    st.tuples(st.just("end_turn"), st.just({"char": CURRENT})),
    st.tuples(st.just("end_turn"), st.just({"char": CURRENT})),
    st.tuples(
        st.just("update_character"),
        st.fixed_dictionaries(
            {"char": st.sampled_from(CHARS), "set": st.just({"condition": "dead"})}
        ),
    ),
    st.tuples(
        st.just("damage"),
        st.fixed_dictionaries({"char": st.sampled_from([*CHARS, CURRENT]), "amount": small}),
    ),
    # The current combatant falls (D5's exemption for this turn), or loses a PP.
    st.tuples(st.just("damage"), st.just({"char": CURRENT, "amount": 1_000_000})),
    st.tuples(
        st.just("set_order"),
        st.fixed_dictionaries(
            {
                "order": st.permutations(CHARS).map(list),
                "turn": st.integers(0, len(CHARS)),
            }
        ),
    ),
    st.tuples(st.just("update_room"), st.fixed_dictionaries({"skip_dead": st.booleans()})),
    TRACKER_COMMANDS,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TURN_COMMANDS, max_size=40), st.integers(0, 2**32))
def test_T3_T4_D5_turns_over_random_combats(commands, seed):
    """A combat of everyone, then turns, deaths, tracker edits, initiative
    and the skip_dead setting in any order: the invariants, T3 (an end of
    turn never gives a dead combatant the turn while a living one is in the
    order), T4 (a roll sorts the order) and D5 v1.2 (only the current
    combatant may hold the dying exemption) hold after every command."""
    t = fresh_table()
    t.do("combat_start", order=list(CHARS))
    run(t, commands, ["gm"] * len(commands), SeededDice(seed))
