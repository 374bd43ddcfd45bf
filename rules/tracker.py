"""The combat tracker edited mid-combat (`set_order`), and the clock advance
pinned to where it starts (`advance_clock`'s `from`).

A VTT's tracker reorders, adds and removes combatants while a combat runs;
`combat_start` cannot express that (one combat at a time) and
`remove_character` deletes the character itself. `set_order` replaces the
order and keeps the turn with whoever has it, so an edit of the tracker
never ends, skips or replays anybody's turn by itself. No time passes and
the round stays.

Joining and leaving are the two halves of `combat_start` and `combat_end`
applied to one character (docs/rules.md, "Tracker edits"):
- a newcomer's rest ends (R4), its dying PP loss moves to the end of its own
  turns (D5) and its S3/S4 allowance now resets on its turns (S4);
- a leaver is out of combat from this instant: a dying one loses its next PP
  a full round of world time later (D5), and a used allowance resets a full
  round after leaving (S4), as for everyone when a combat ends.
"""

from __future__ import annotations

from rules.clock import advance
from rules.context import Ctx
from rules.errors import Conflict, RuleBroken
from rules.rest import end_rest


def set_order(ctx: Ctx, order: list[str]) -> None:
    """Replace the running combat's order; the current combatant keeps its
    turn. If it leaves, the turn goes to the next combatant after it (in the
    old order) that stays, else to the last one before it that stays (what a
    VTT tracker does when the current combatant is deleted), else to the
    first of the new order."""
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
    successor = _successor(old, combat.turn, order)
    combat.order = list(order)
    combat.turn = order.index(successor)
    for cid in left:
        _leave(ctx, cid)
    for cid in joined:
        _join(ctx, cid)
    ctx.emit("combat", outcome="order", order=list(order), joined=joined, left=left)
    if combat.current != current:
        ctx.emit("turn", char=combat.current, round=combat.round, turn=combat.turn)


def _successor(old: list[str], turn: int, new: list[str]) -> str:
    """Who has the turn in `new`: the current combatant if it stays, else
    the first survivor after it, else the last survivor before it."""
    kept = set(new)
    if old[turn] in kept:
        return old[turn]
    after = [cid for cid in old[turn + 1 :] if cid in kept]
    if after:
        return after[0]
    before = [cid for cid in old[:turn] if cid in kept]
    if before:
        return before[-1]
    return new[0]


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
