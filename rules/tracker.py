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

from rules.clock import advance, give_turn
from rules.context import Ctx
from rules.errors import Conflict, InvalidArgs, RuleBroken
from rules.rest import end_rest


def check_set_order(a: dict[str, Any]) -> None:
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
    turn passed over (D5 v1.2).
    """
    room = ctx.room
    combat = room.combat
    if combat is None:
        raise RuleBroken("no combat is running: start one with combat_start")
    if len(set(order)) != len(order):
        raise RuleBroken("a character can appear only once in the combat order")
    old = list(combat.order)
    joined = [cid for cid in order if cid not in old]
    left = [cid for cid in old if cid not in order]
    for cid in joined:
        c = ctx.char(cid)
        if c.condition == "dead":
            raise RuleBroken(f"{c.name} is dead and cannot join a combat (D6)")
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


def advance_from(ctx: Ctx, seconds: int, start: int | None) -> None:
    """T2 `advance_clock`, with an optional `from`: the clock the sender saw.

    Like `end_turn`'s `round`, it makes the command idempotent by content:
    a VTT that mirrors its own world-time changes may send the same advance
    twice (two GM tabs, a re-fired hook); the second finds the clock moved
    and is a `conflict`, never a second advance."""
    if start is not None and start != ctx.room.clock:
        raise Conflict(
            f"the clock is at {ctx.room.clock}, not {start}: that advance was made already"
            " or is based on an old clock"
        )
    advance(ctx, seconds)
