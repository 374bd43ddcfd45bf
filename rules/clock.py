"""Time and turns (T1, T2): the combat tracker and the world clock; the ops
`combat_start`, `combat_end` and `end_turn` (`OPS`).

`advance` is a discrete-event scheduler: it asks each character for the
instant of its next timed rule (`TIMERS`), fires them in chronological order
(ties: character order, then the order of `TIMERS`), and re-asks only the
character that just changed. Its cost grows with the firings, never with the
seconds crossed, and one jump equals many small steps for the same dice
because every rule fires at its own instant.

The one rule that could fire without bound is D5's out-of-combat loss (one
PP per round for as long as the character has PP). Its repeats are
collapsed: one firing covers every loss due before the advance ends or the
character dies, and reports them in one `pp` event with `rounds`. That is
exact, not an approximation, because nothing can come between two of those
losses: they use no dice and change only that character; a dying character
has no stability check (it is not stable) and no rest (it is not conscious);
its only other timer, the S3/S4 allowance reset, neither reads nor changes
PP or the condition (and dying clears it), so its place among the losses
changes nothing; and no other character's rule touches a dying one (a dying
character tends nobody and is tended by nobody). The collapsed firing is
placed at the instant of the last loss it covers, so events stay in
chronological order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from rules.conditions import lose_pp
from rules.context import Actor, Ctx
from rules.errors import Conflict, RuleBroken
from rules.events import TIMED_EVENTS
from rules.model import Character, Combat, Room
from rules.op import OWNER_OR_GM, Args, Check, Doc, Facts, G, Op, Subject, WholeRoom
from rules.rest import complete_rest, end_rest
from rules.stability import next_check, stability_check
from rules.stabilizing import reset_allowance
from rules.validate import ID, ORDER, ROUND, Arg, optional


def dying_rounds(room: Room, c: Character, until: int) -> int:
    """D5 out of combat: how many of `c`'s PP losses fall in
    [c.dying_next, until], stopping at the one that kills (PP reaching 0,
    or the next loss of one already at 0 PP). At least 1: the first is due."""
    assert c.dying_next is not None and c.dying_next <= until
    due = (until - c.dying_next) // room.round_seconds + 1
    return min(due, max(c.pp, 1))


def _dying_due(room: Room, c: Character, end: int) -> int | None:
    """The instant of the last loss this advance covers (see the module's
    docstring), or of the next one when it falls after the advance."""
    if c.condition != "dying" or c.dying_next is None:
        return None
    if c.dying_next > end:
        return c.dying_next
    return c.dying_next + (dying_rounds(room, c, end) - 1) * room.round_seconds


def _fire_dying(ctx: Ctx, c: Character) -> None:
    """D5 out of combat: 1 PP per full round of world time, every round due
    by now (`room.clock`, the last loss's instant) in one step. Later rounds
    use the current round length; the loss already scheduled keeps its
    instant (v1.1 ruling on round_seconds changed while dying)."""
    room = ctx.room
    assert c.dying_next is not None
    rounds = dying_rounds(room, c, room.clock)
    nxt = c.dying_next + rounds * room.round_seconds
    lose_pp(ctx, c, "dying", rounds)
    if c.condition == "dying":
        c.dying_next = nxt


def _stability_due(room: Room, c: Character, end: int) -> int | None:
    return next_check(c)


def _rest_due(room: Room, c: Character, end: int) -> int | None:
    return None if c.activity is None else c.activity.ends


def _allowance_due(room: Room, c: Character, end: int) -> int | None:
    if not c.regained_this_turn or c.regained_at is None:
        return None
    return c.regained_at + room.round_seconds


# Tie order at one instant for one character (T2): dying loss, then the
# stability check, then rest completion; the S4 allowance reset last.
# `due(room, c, end)` gets the advance's end for the collapsed D5 run.
TIMERS: tuple[
    tuple[str, Callable[[Room, Character, int], int | None], Callable[[Ctx, Character], None]],
    ...,
] = (
    ("dying", _dying_due, _fire_dying),
    ("stability", _stability_due, stability_check),
    ("rest", _rest_due, complete_rest),
    ("allowance", _allowance_due, lambda ctx, c: reset_allowance(c)),
)


def advance(ctx: Ctx, seconds: int) -> None:
    """T2: move the clock forward, firing every timed rule inside the interval."""
    room = ctx.room
    start = room.clock
    end = start + seconds
    ctx.emit("clock", **{"from": start}, to=end)
    heap: list[tuple[int, int, int, str]] = []

    def schedule(c: Character) -> bool:
        """Push `c`'s timed rules due by `end`; False if it has none at all."""
        pending = False
        for rank, (_, due, _) in enumerate(TIMERS):
            t = due(room, c, end)
            if t is not None:
                pending = True
                if t <= end:
                    heapq.heappush(heap, (t, c.seq, rank, c.id))
        return pending

    # Only the characters that may have a timed rule (`Room.timed`, kept by
    # Ctx.edit): the others' rules are all None, and a big table's quiet
    # characters are not asked. Those found with none leave the set.
    timed = room.characters.keys() if room.timed is None else room.timed
    still = set()
    for cid in timed:
        c = room.characters.get(cid)
        if c is not None and schedule(c):
            still.add(cid)
    room.timed = still
    while heap:
        t, _, rank, cid = heapq.heappop(heap)
        current = room.characters.get(cid)
        _, due, fire = TIMERS[rank]
        if current is None or due(room, current, end) != t:
            continue  # stale: the character changed since this was scheduled
        c = ctx.edit(cid)
        room.clock = max(room.clock, t)
        ctx.at = room.clock
        fire(ctx, c)
        ctx.at = None
        schedule(c)  # (c is in room.timed: Ctx.edit put it there)
    room.clock = end


def check_no_combat(room: Room) -> None:
    if room.combat is not None:
        raise RuleBroken("a combat is already running; end it first", "combat_running")


def check_order(order: list[str]) -> None:
    if len(set(order)) != len(order):
        raise RuleBroken("a character can appear only once in the combat order", "order_duplicate")


def check_may_join(c: Character) -> None:
    """D6: the dead cannot join a combat."""
    if c.condition == "dead":
        raise RuleBroken(
            f"{c.name} is dead and cannot join a combat (D6)", "dead_cannot_join", char=c.id
        )


def check_combatants(at: Facts, a: Args) -> None:
    """T1, D6: each combatant once, and alive."""
    check_order(a["order"])
    for cid in a["order"]:
        check_may_join(at.room.characters[cid])


def combat_start(ctx: Ctx, order: list[str]) -> None:
    """T1: a combat in `order` (combat_start's checks passed: no combat
    running, each combatant once and alive)."""
    room = ctx.room
    room.combat = Combat(list(order), 0, 1)
    room.initiative = {}
    for cid in order:
        c = ctx.edit(cid)
        end_rest(ctx, c, "combat")  # R4 / T1
        c.dying_next = None  # D5: in combat, PP are lost at the end of own turns
        c.regained_at = None  # S4: the allowance now resets on turns
    ctx.emit("combat", outcome="start", order=list(order))
    ctx.emit("turn", char=order[0], round=1, turn=0)


def check_combat(room: Room, message: str = "no combat is running") -> None:
    """A combat must be running (combat_end, set_order)."""
    if room.combat is None:
        raise RuleBroken(message, "no_combat")


def combat_end(ctx: Ctx) -> None:
    """T1, D5: no combat (the op's check passed: one was running)."""
    room = ctx.room
    assert room.combat is not None
    order = room.combat.order
    room.combat = None
    room.initiative = {}
    for cid in order:
        c = ctx.edit(cid)
        c.dying_fresh = False
        if c.condition == "dying":
            # D5: out of combat, full rounds count from the combat's end.
            c.dying_next = room.clock + room.round_seconds
        if c.regained_this_turn:
            c.regained_at = room.clock
    ctx.emit("combat", outcome="end")


def check_end_turn(room: Room, actor: Actor, cid: str, round_: int | None) -> None:
    """T1: only the current combatant's turn can end (a `conflict`: that turn
    is over, e.g. a second tab ended it already). The reason names no
    combatant nor round: the state shows them, and a reason that changed at
    every turn would change every player's affordances at every turn."""
    combat = room.combat
    if combat is None:
        raise Conflict("no combat is running: that turn is already over", "turn_no_combat")
    if combat.current != cid or (round_ is not None and round_ != combat.round):
        current = room.characters[combat.current]
        raise Conflict(
            f"it is {actor.name_of(current)}'s turn in round {combat.round}:"
            " that turn is already over",
            "not_the_turn",
        )


def end_turn(ctx: Ctx, cid: str) -> None:
    """T1: the current combatant's end-of-turn rules, then the next turn
    (the op's check passed: `check_end_turn`)."""
    c = ctx.edit(cid)
    if c.condition == "dying":
        if c.dying_fresh:
            c.dying_fresh = False  # D5 ruling: not the turn it started dying
        else:
            lose_pp(ctx, c, "dying")
    reset_allowance(c)  # S4
    next_turn(ctx)


def next_turn(ctx: Ctx) -> None:
    """Pass the turn to the next combatant (T3: the next living one); after
    the last a new round starts and world time advances by one round, running
    T2."""
    combat = ctx.room.combat
    assert combat is not None
    give_turn(ctx, combat.turn + 1, passed=combat.current)


def takes_turn(room: Room, cid: str) -> bool:
    """T3: does this combatant get its turns? Not a dead one while the room
    passes the dead over (`skip_dead`); then the turn goes to the next."""
    return not (room.skip_dead and room.characters[cid].condition == "dead")


def first_to_act(room: Room, start: int) -> int | None:
    """The first place from `start` on in the order whose combatant takes
    its turn (T3); None when nobody is left to act in this round."""
    assert room.combat is not None
    order = room.combat.order
    return next((i for i in range(start, len(order)) if takes_turn(room, order[i])), None)


def give_turn(ctx: Ctx, start: int, passed: str | None) -> None:
    """Give the turn to the first combatant from place `start` that takes it
    (T3 passes over the dead: none of their end-of-turn rules run). When
    nobody is left in this round, the round ends: the next one starts, world
    time advances by a round (T2 fires), and the first combatant from the top
    that takes its turn has it; if every combatant is dead, the top of the
    order does (an empty turn the GM ends: T3 ruling), so one end of turn
    ends at most one round.

    `passed` is the combatant whose turn this was: its turn is over, ended or
    passed over, so D5's exemption for the turn it started dying in is gone
    (D5 v1.2: a turn passed over does not carry it to the next one)."""
    room = ctx.room
    combat = room.combat
    assert combat is not None
    if passed is not None and passed in room.characters:
        c = room.characters[passed]
        if c.dying_fresh:
            ctx.edit(passed).dying_fresh = False
    turn = first_to_act(room, start)
    if turn is None:
        combat.turn = 0
        combat.round += 1
        advance(ctx, room.round_seconds)
        turn = first_to_act(room, 0)
        if turn is None:
            turn = 0  # T3 ruling: every combatant is dead
    combat.turn = turn
    ctx.emit("turn", char=combat.current, round=combat.round, turn=combat.turn)


def leave_combat(ctx: Ctx, cid: str) -> None:
    """A removed character leaves the order; the turn stays with whoever now
    stands at the current index (T3: the next living one from there). An
    empty order ends the combat."""
    room = ctx.room
    combat = room.combat
    if combat is None or cid not in combat.order:
        return
    idx = combat.order.index(cid)
    combat.order.remove(cid)
    room.initiative.pop(cid, None)
    if not combat.order:
        room.combat = None
        room.initiative = {}
        ctx.emit("combat", outcome="end")
        return
    if idx < combat.turn:
        combat.turn -= 1
    elif idx == combat.turn:
        give_turn(ctx, idx, passed=None)  # past the end, the round ends


OPS = (
    Op(
        "combat_start",
        {"order": Arg(ORDER)},
        G,
        lambda ctx, a: combat_start(ctx, a["order"]),
        WholeRoom(choose="order"),
        Doc(
            summary="start a combat in the given order",
            changes="A combat: round 1, the first character's turn (T1). Rests of the combatants"
            " end (R4).",
            meaning={"order": "the combatants' ids, in turn order"},
            example={"order": ["c2", "c1", "c3"]},
            errors=(
                ("rule", "a combat is running already"),
                ("rule", "a character appears twice, or is dead (D6)"),
            ),
            rules="T1",
        ),
        events=("rest", "combat", "turn"),
        checks=(
            Check(lambda at, a: check_no_combat(at.room)),
            Check(check_combatants, of="order"),
        ),
        chars=("order",),
    ),
    Op(
        "combat_end",
        {},
        G,
        lambda ctx, a: combat_end(ctx),
        WholeRoom(),
        Doc(
            summary="end the combat",
            changes="No combat. A dying combatant now loses PP by world time (D5).",
            meaning={},
            example={},
            errors=(("rule", "no combat is running"),),
            rules="T1, D5",
        ),
        events=("combat",),
        checks=(Check(lambda at, a: check_combat(at.room)),),
    ),
    Op(
        "end_turn",
        {"char": Arg(ID), "round": optional(ROUND)},
        OWNER_OR_GM,
        lambda ctx, a: end_turn(ctx, a["char"]),
        Subject(reads="combat"),
        Doc(
            summary="end the current character's turn",
            changes="The end-of-turn rules of the current character (a dying one loses 1 PP, D5;"
            " its S3/S4 allowance resets), then the next turn, passing over dead combatants"
            " unless the room's `skip_dead` is off (T3); after the last combatant a new round"
            " starts and the clock advances by `round_seconds` (T2).",
            meaning={
                "char": "the character whose turn it is",
                "round": "the current round; a stale one is refused, so two clicks end one turn",
            },
            example={"char": "c2", "round": 1},
            errors=(
                ("conflict", "no combat, or that turn is over (another character, another round)"),
            ),
            rules="T1, T2, T3, D5",
        ),
        events=("pp", "condition", "turn", "clock", *TIMED_EVENTS),
        checks=(Check(lambda at, a: check_end_turn(at.room, at.actor, a["char"], a["round"])),),
        chars=("char",),
        on_dead=True,
    ),
)
