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
from rules.events import TIMED_EVENTS
from rules.model import Character, Room
from rules.op import Args, Check, Doc, Facts, G, Op, WholeRoom
from rules.tracker import place_turn
from rules.validate import BONUSES, CHAR_IDS, D20S, optional

CHECK = "initiative"  # the X2 event's `check`


def check_someone_rolls(at: Facts, a: Args) -> None:
    """In a running combat, rolling for its combatants (no `chars`) needs a
    living one."""
    room = at.room
    if a["chars"] is None and room.combat is not None and not living_combatants(room):
        raise RuleBroken("every combatant is dead: nobody rolls initiative", "initiative_all_dead")


def check_rollers(at: Facts, a: Args) -> None:
    """T4: who rolls: each character once; without a combat, `chars` are
    required (they start it); in one, they are its combatants; a `bonus` or
    `rolls` only for a character who rolls."""
    room = at.room
    chars: list[str] | None = a["chars"]
    if chars is not None and len(set(chars)) != len(chars):
        raise RuleBroken("a character can appear only once in chars", "order_duplicate")
    if room.combat is None:
        if chars is None:
            raise RuleBroken(
                "no combat is running: name the characters (chars) to start one in"
                " initiative order",
                "initiative_chars",
            )
    elif chars is not None:
        outside = [cid for cid in chars if cid not in room.combat.order]
        if outside:
            name = at.actor.name_of(room.characters[outside[0]])
            raise RuleBroken(f"{name} is not in the combat: add it with set_order first")
    rolled = set(chars if chars is not None else living_combatants(room))
    for key in ("bonus", "rolls"):
        stray = [cid for cid in a[key] or {} if cid not in rolled]
        if stray:
            name = at.actor.name_of(room.characters[stray[0]])
            raise RuleBroken(f"{key} names {name}, who does not roll initiative here")


def roll_initiative(ctx: Ctx, a: dict[str, Any]) -> None:
    """T4 `roll_initiative {chars?, bonus?, rolls?}`: roll for `chars` (in a
    combat, by default its living combatants), then start the combat in the
    sorted order, or sort the running one again (the op's checks passed)."""
    room = ctx.room
    combat = room.combat
    chars: list[str] = a["chars"] if a["chars"] is not None else living_combatants(room)
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


def living_combatants(room: Room) -> list[str]:
    """Who rolls in a running combat by default: its living combatants."""
    assert room.combat is not None
    return [cid for cid in room.combat.order if room.characters[cid].condition != "dead"]


def ranked(order: list[str], totals: dict[str, int], chars: dict[str, Character]) -> list[str]:
    """`order` sorted by initiative (T4): the rolled by total, then the higher
    Dexterity modifier, then character order; the others after them, in
    their place in `order`."""
    rolled = [cid for cid in order if cid in totals]
    rolled.sort(key=lambda cid: (-totals[cid], -chars[cid].mod("dex"), chars[cid].seq))
    return rolled + [cid for cid in order if cid not in totals]


OPS = (
    Op(
        "roll_initiative",
        {"chars": optional(CHAR_IDS), "bonus": optional(BONUSES), "rolls": optional(D20S)},
        G,
        roll_initiative,
        # T4: outside combat, the characters to start one with (those who may
        # join); in a combat, its living combatants (who roll by default).
        WholeRoom(choose="chars"),
        Doc(
            summary="roll initiative: the combat order sorted by d20 + Dex modifier + bonus",
            changes="Each character rolls d20 + its Dexterity modifier (ability damage included)"
            " + its `bonus` (T4); the order is by total, ties by the higher Dexterity modifier,"
            " then character order. With no combat running, `chars` are the combatants and the"
            " combat starts in that order (as combat_start). In a combat, `chars` (default:"
            " every living combatant) roll and the order is sorted again: combatants never"
            " rolled for come last; the current combatant keeps its turn, except in round 1"
            " before the first turn ends, when the top of the order has it. The totals stay in"
            " `initiative` (the GM's only) until the combat ends. Dice: `rolls`, then the queue"
            " (in character order), then the server's (X1).",
            meaning={
                "chars": "the characters who roll (without a combat: required, the combatants); "
                "default every living combatant",
                "bonus": "a bonus per character, added to its roll",
                "rolls": "natural d20s the GM rolled at the table, per character (X1)",
            },
            example={"chars": ["c1", "c2", "c3"], "bonus": {"c2": 2}},
            errors=(
                (
                    "rule",
                    "no combat and no `chars`; a character twice, dead (D6), or not in the "
                    "running combat; a `bonus` or `rolls` for a character who does not roll",
                ),
            ),
            rules="T4, X1, X2, T3",
        ),
        events=("roll", "rest", "combat", "turn", "clock", *TIMED_EVENTS),
        checks=(Check(check_someone_rolls), Check(check_rollers, of="chars")),
        chars=("chars", "bonus", "rolls"),
    ),
)

__all__ = [
    "CHECK",
    "OPS",
    "check_rollers",
    "check_someone_rolls",
    "living_combatants",
    "ranked",
    "roll_initiative",
]
