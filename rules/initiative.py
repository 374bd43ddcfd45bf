"""Initiative (T4): the combat order from checks the server rolls.

Each character rolls d20 + its Dexterity modifier (ability damage included,
A1) + the bonus the GM gives it; the order is by total, ties by the higher
Dexterity modifier, then by character order. Dice work as for every check
(X1: the GM's own die, then the queue, then the server's), and every roll is
an X2 event. The totals are kept for the running combat (`room.initiative`),
so that rolling for one newcomer places it among the others; combatants
never rolled for come after those rolled, in their order. The GM may still
set the order by hand (`set_order`), which keeps the totals but not their
order.

With no combat running, rolling for `chars` starts one in that order (what
`combat_start` does, the order sorted). In a running combat the current
combatant keeps its turn, as in any tracker edit, except at the very start
of the combat (round 1, its first turn not ended): then nobody has acted yet
and the turn goes to the top of the new order.
"""

from __future__ import annotations

from typing import Any

from rules.clock import combat_start
from rules.context import Ctx
from rules.errors import RuleBroken
from rules.model import Character
from rules.tracker import place_turn

CHECK = "initiative"  # the X2 event's `check`


def roll_initiative(ctx: Ctx, a: dict[str, Any]) -> None:
    """T4 `roll_initiative {chars?, bonus?, rolls?}`: roll for `chars` (in a
    combat, by default its living combatants), then start the combat in the
    sorted order, or sort the running one again."""
    room = ctx.room
    combat = room.combat
    chars: list[str] | None = a["chars"]
    if chars is not None and len(set(chars)) != len(chars):
        raise RuleBroken("a character can appear only once in chars")
    if combat is None:
        if chars is None:
            raise RuleBroken(
                "no combat is running: name the characters (chars) to start one in initiative order"
            )
    elif chars is None:
        chars = [cid for cid in combat.order if room.characters[cid].condition != "dead"]
        if not chars:
            raise RuleBroken("every combatant is dead: nobody rolls initiative")
    else:
        outside = [cid for cid in chars if cid not in combat.order]
        if outside:
            name = ctx.actor.name_of(room.characters[outside[0]])
            raise RuleBroken(f"{name} is not in the combat: add it with set_order first")
    rolled = set(chars)
    for key in ("bonus", "rolls"):
        stray = [cid for cid in a[key] or {} if cid not in rolled]
        if stray:
            name = ctx.actor.name_of(room.characters[stray[0]])
            raise RuleBroken(f"{key} names {name}, who does not roll initiative here")
    bonus: dict[str, int] = a["bonus"] or {}
    rolls: dict[str, int] = a["rolls"] or {}
    totals: dict[str, int] = {}
    # X1: the queue's dice go in character order, whatever order `chars` has.
    for c in sorted((room.characters[cid] for cid in chars), key=lambda c: c.seq):
        totals[c.id] = ctx.check(
            c,
            CHECK,
            c.mod("dex"),
            dc=None,
            bonus=bonus.get(c.id, 0),
            roll=rolls.get(c.id),
            outcome=lambda total: "rolled",
        )
    if combat is None:
        combat_start(ctx, ranked(list(totals), totals, ctx.room.characters))
        room.initiative = totals
        return
    room.initiative = {**room.initiative, **totals}
    current = combat.current
    order = ranked(combat.order, room.initiative, room.characters)
    fresh = combat.round == 1 and combat.turn == 0
    combat.order = order
    ctx.emit("combat", outcome="order", order=list(order), joined=[], left=[])
    if fresh:
        place_turn(ctx, current, 0, explicit=False)  # the top acts first (T3: a living one)
    else:
        combat.turn = order.index(current)


def ranked(order: list[str], totals: dict[str, int], chars: dict[str, Character]) -> list[str]:
    """`order` sorted by initiative (T4): the rolled by total, then the higher
    Dexterity modifier, then character order; the others after them, in
    their place in `order`."""
    rolled = [cid for cid in order if cid in totals]
    rolled.sort(key=lambda cid: (-totals[cid], -chars[cid].mod("dex"), chars[cid].seq))
    return rolled + [cid for cid in order if cid not in totals]


__all__ = ["CHECK", "ranked", "roll_initiative"]
