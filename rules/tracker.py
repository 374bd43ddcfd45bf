"""The combat tracker edited mid-combat (`set_order`), and the clock advance
pinned to where it starts (`advance_clock`'s `from`).

A VTT's tracker reorders, adds and removes combatants while a combat runs;
`combat_start` cannot express that (one combat at a time) and
`remove_character` deletes the character itself. `set_order` replaces the
order; the turn stays with whoever has it unless the sender says where it
is now (a tracker knows who has acted this round). No end-of-turn rule runs:
an edit of the tracker is not the end of anybody's turn. Time passes only if
the edit ends the round (nobody left to act in it).

Joining and leaving are the two halves of `combat_start` and `combat_end`
applied to one character (docs/rules.md, "Tracker edits"):
- a newcomer's rest ends (R4), its dying PP loss moves to the end of its own
  turns (D5) and its S3/S4 allowance now resets on its turns (S4);
- a leaver is out of combat from this instant: a dying one loses its next PP
  a full round of world time later (D5), and a used allowance resets a full
  round after leaving (S4), as for everyone when a combat ends.
"""

from __future__ import annotations

from typing import Any

from rules.clock import advance, check_combat, check_may_join, check_order, give_turn
from rules.context import Ctx
from rules.errors import Conflict, InvalidArgs
from rules.events import TIMED_EVENTS
from rules.op import Args, Check, Doc, Facts, G, Op, WholeRoom
from rules.rest import end_rest
from rules.validate import CLOCK, ORDER, SECONDS, TURN, Arg, optional


def check_new_order(at: Facts, a: Args) -> None:
    """Each combatant once; newcomers alive (D6: the dead already in the
    order may stay). After `check_combat`: a combat is running."""
    room = at.room
    assert room.combat is not None
    check_order(a["order"])
    for cid in a["order"]:
        if cid not in room.combat.order:
            check_may_join(room.characters[cid])


def check_turn_arg(a: dict[str, Any]) -> None:
    """`turn` names a place in `order`, or one past its end (the round ends)."""
    if a["turn"] is not None and a["turn"] > len(a["order"]):
        raise InvalidArgs(f"turn must be between 0 and {len(a['order'])} (the order's length)")


def set_order(ctx: Ctx, order: list[str], turn: int | None) -> None:
    """Replace the running combat's order.

    Without `turn`, the current combatant keeps its turn; if it leaves, the
    turn goes to the first combatant after it (in the old order) that stays,
    or past it to the next living one (T3), and if none does, the round ends
    (as when `remove_character` removes the last combatant of the round).
    With `turn`, the sender (a VTT's tracker) says whose turn it is now:
    `order[turn]` (even a dead one: the sender's word), or, with
    `turn == len(order)`, nobody's in this round any more: the round ends. A
    round that ends starts the next one and advances world time by a round
    (T1, T2); no combatant's end-of-turn rules run (a tracker edit is not a
    turn's end). A combatant whose turn the edit moves away from has had its
    turn passed over (D5 v1.2). The op's checks passed: a combat is running,
    each combatant appears once, newcomers are alive.
    """
    room = ctx.room
    combat = room.combat
    assert combat is not None
    old = list(combat.order)
    joined = [cid for cid in order if cid not in old]
    left = [cid for cid in old if cid not in order]
    current = combat.current
    if turn is None:
        successor = _successor(old, combat.turn, order)
        start = len(order) if successor is None else order.index(successor)
    else:
        start = turn
    for cid in left:
        _leave(ctx, cid)
    for cid in joined:
        _join(ctx, cid)
    combat.order = list(order)
    ctx.emit("combat", outcome="order", order=list(order), joined=joined, left=left)
    place_turn(ctx, current, start, explicit=turn is not None)


def place_turn(ctx: Ctx, current: str, start: int, explicit: bool) -> None:
    """After an edit of the order: the turn at place `start` of the new order.
    The combatant who had it (`current`) keeps it if it is still there;
    otherwise its turn is passed over and the turn goes to `order[start]`
    when the sender named it (`explicit`), else to the first combatant from
    `start` that takes its turn (T3); past the end, the round ends."""
    combat = ctx.room.combat
    assert combat is not None
    order = combat.order
    if start < len(order) and order[start] == current:
        combat.turn = start
    elif explicit and start < len(order):
        if current in ctx.room.characters and ctx.room.characters[current].dying_fresh:
            ctx.edit(current).dying_fresh = False  # D5 v1.2: its turn was passed over
        combat.turn = start
        ctx.emit("turn", char=combat.current, round=combat.round, turn=combat.turn)
    else:
        give_turn(ctx, start, passed=current)


def _successor(old: list[str], turn: int, new: list[str]) -> str | None:
    """Who keeps the turn in `new`: the current combatant if it stays, else
    the first survivor after it; None when nobody after it stays."""
    kept = set(new)
    if old[turn] in kept:
        return old[turn]
    after = [cid for cid in old[turn + 1 :] if cid in kept]
    return after[0] if after else None


def _join(ctx: Ctx, cid: str) -> None:
    """What combat_start does to each combatant (R4, D5, S4)."""
    c = ctx.edit(cid)
    end_rest(ctx, c, "combat")  # R4
    c.dying_next = None  # D5: in combat, PP are lost at the end of own turns
    c.dying_fresh = False
    c.regained_at = None  # S4: the allowance now resets on the character's turns


def _leave(ctx: Ctx, cid: str) -> None:
    """What combat_end does to each combatant (D5, S4), for one character."""
    room = ctx.room
    c = ctx.edit(cid)
    c.dying_fresh = False
    room.initiative.pop(cid, None)  # T4: its total was for this combat's order
    if c.condition == "dying":
        c.dying_next = room.clock + room.round_seconds  # D5: full rounds from leaving
    if c.regained_this_turn:
        c.regained_at = room.clock  # S4 ruling: the round counts from leaving


def check_clock_from(at: Facts, a: Args) -> None:
    """T2 `advance_clock`'s optional `from`: the clock the sender saw.

    Like `end_turn`'s `round`, it makes the command idempotent by content:
    a VTT that mirrors its own world-time changes may send the same advance
    twice (two GM tabs, a re-fired hook); the second finds the clock moved
    and is a `conflict`, never a second advance."""
    start, clock = a["from"], at.room.clock
    if start is not None and start != clock:
        raise Conflict(
            f"the clock is at {clock}, not {start}: that advance was made already"
            " or is based on an old clock",
            "clock_moved",
            clock=clock,
        )


SET_ORDER = Op(
    "set_order",
    {"order": Arg(ORDER), "turn": optional(TURN)},
    G,
    lambda ctx, a: set_order(ctx, a["order"], a["turn"]),
    WholeRoom(choose="order"),
    Doc(
        summary="change the running combat's order: reorder, add, remove combatants",
        changes="The combat order. Without `turn` the current combatant keeps its turn (if it"
        " left, the next one after it has it, passing over the dead, T3); `turn` says whose"
        " turn it is now, its length ending the round (the clock advances, T2). No end-of-turn"
        " rule runs; a combatant whose turn moves away has had it passed over (a dying one"
        " loses 1 PP at the end of its next turn, D5). Newcomers' rests end (R4); their dying"
        " PP loss moves to their turns (D5); leavers are out of combat from now (D5, S4 count a"
        " full round from here). Initiative totals (T4) of leavers are dropped.",
        meaning={
            "order": "the combatants' ids, in turn order",
            "turn": "whose turn it is now: an index in `order`, or its length to end the round",
        },
        example={"order": ["c2", "c1", "c3"]},
        errors=(("rule", "no combat is running; a character appears twice, or is dead (D6)"),),
        rules="T1, T2, T3, D5, R4, S4",
    ),
    events=("rest", "combat", "turn", "clock", *TIMED_EVENTS),
    checks=(
        Check(
            lambda at, a: check_combat(at.room, "no combat is running: start one with combat_start")
        ),
        Check(check_new_order, of="order"),
    ),
    chars=("order",),
    check=check_turn_arg,
    on_dead=True,  # the dead may stay in the order; only newcomers are checked (D6)
)

ADVANCE_CLOCK = Op(
    "advance_clock",
    {"seconds": Arg(SECONDS), "from": optional(CLOCK)},
    G,
    lambda ctx, a: advance(ctx, a["seconds"]),
    WholeRoom(),
    Doc(
        summary="move the world clock forward; the timed rules fire",
        changes="The clock; every timed rule inside the interval fires at its own instant, in"
        " order: dying PP losses (D5), hourly stability checks (L1-L5), rests completing"
        " (R1-R3).",
        meaning={
            "seconds": "world seconds to add",
            "from": "the clock the sender saw; if the room's clock is elsewhere the advance is "
            "refused, so an advance sent twice advances once",
        },
        example={"seconds": 3600},
        errors=(("conflict", "`from` is not the room's clock"),),
        rules="T2",
    ),
    events=("clock", *TIMED_EVENTS),
    checks=(Check(check_clock_from),),
)
