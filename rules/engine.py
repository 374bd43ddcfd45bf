"""`apply`: one command against a room, as data.

The op table, `OPS`, is the game's definition (like a boardgame.io game's
`moves`): each rules module declares its ops once (`rules.op.Op`: the
arguments, who may send it, the arguments naming characters, its checks, its
change, its offer, its events, its words) and this module gathers them.
`apply` checks in the protocol's order (docs/protocol.md, "Refusals"):
unknown_op, invalid_args, not_found, forbidden, then the op's own checks
(conflict and rule refusals), and only then lets the op change the room.
"""

from __future__ import annotations

import difflib
from typing import Any

import attrs

from rules import (
    abilities,
    clock,
    damage,
    initiative,
    rest,
    roster,
    stability,
    stabilizing,
    tracker,
    users,
)
from rules.context import Actor, Ctx
from rules.dice import Dice
from rules.effects import Effect
from rules.errors import Forbidden, NotFound, RuleBroken, UnknownOp
from rules.model import Character, Room, User
from rules.op import OWNER_OR_GM, UNTEND, Facts, G, Op
from rules.validate import check_args

__all__ = ["ADMIN_OPS", "LOG_OPS", "OPS", "USER_OPS", "Actor", "Outcome", "apply", "new_room"]


@attrs.frozen
class Outcome:
    """What one accepted command did: the new room, its events for the
    table's log, its result for the ack, the effects the server must carry
    out (effects.py) and whether `undo` may later revert it."""

    room: Room
    events: list[dict[str, Any]]
    result: dict[str, Any]
    effects: tuple[Effect, ...] = ()
    undoable: bool = True
    # The characters the command changed, added or removed (`Ctx.touched`):
    # every other one is the very object of the room it was applied to.
    touched: frozenset[str] = frozenset()


def _table(*groups: tuple[Op, ...]) -> dict[str, Op]:
    """The op table from the modules' declarations, in the reference's order
    (docs/operations.md: the room, its users and characters, the combat and
    the clock, hurting and healing, abilities, dice)."""
    table: dict[str, Op] = {}
    for group in groups:
        for op in group:
            if op.name in table:
                raise ValueError(f"op {op.name!r} is declared twice")
            table[op.name] = op
    return table


OPS: dict[str, Op] = _table(
    roster.ROOM_OPS,
    users.OPS,
    roster.CHARACTER_OPS,
    clock.OPS,
    (tracker.SET_ORDER,),
    initiative.OPS,
    (tracker.ADVANCE_CLOCK,),
    damage.OPS,
    stabilizing.OPS,
    stability.OPS,
    rest.OPS,
    abilities.OPS,
    roster.DICE_OPS,
)


USER_OPS = frozenset(op for op, spec in OPS.items() if not spec.undoable)  # users and tokens
LOG_OPS = frozenset({"undo"})  # the room core walks the log; `revert` decides what it restores
ADMIN_OPS = frozenset(
    {"create_room", "delete_room", "import_room", "reissue_gm_link"}
)  # server-wide


def authorize(room: Room, spec: Op, a: dict[str, Any], actor: Actor, op: str) -> None:
    """May `actor` send `op` with the (clean) args `a`? Raises Forbidden.
    Apply asks it, and so do the affordances (rules/affordances.py)."""
    authorize_role(spec, actor, op)
    if actor.is_gm:
        return
    if "roll" in a and a["roll"] is not None:
        raise Forbidden("only the GM may supply a die roll (X1)", "gm_roll")
    if spec.role == OWNER_OR_GM:
        c = room.characters[a["char"]]
        if c.owner != actor.user:
            raise Forbidden(f"{c.name} is not your character", "not_yours", char=c.id)
    elif spec.role == UNTEND:
        p = room.characters[a["patient"]]
        owners = {p.owner}
        if p.healer is not None:
            owners.add(room.characters[p.healer].owner)
        if actor.user not in owners:
            raise Forbidden(
                f"only the GM or the owner of {p.name} or of its healer may stop the tending",
                "untend_forbidden",
                patient=p.id,
            )


def authorize_role(spec: Op, actor: Actor, op: str) -> None:
    """The part of `authorize` that the role alone decides, whatever the
    arguments (observers send nothing; G ops are the GM's)."""
    if actor.is_gm:
        return
    if actor.role == "observer":
        raise Forbidden("observers may only watch", "observer")
    if spec.role == G:
        raise Forbidden(f"only the GM may {op}", "gm_only", op=op)


def check_alive(spec: Op, c: Character) -> None:
    """D6: an op that may not target the dead, on a dead character."""
    if not spec.on_dead and c.condition == "dead":
        raise RuleBroken(f"{c.name} is dead (D6)", "dead", char=c.id)


def check_seen(room: Room, actor: Actor, cid: str) -> None:
    """A character hidden from the sender (views) does not exist for them:
    the same refusal as a wrong id, so that guessing ids reveals nothing."""
    if cid not in room.characters or not actor.sees(room.characters[cid]):
        raise NotFound(f"no character {cid!r} in this room", "no_character")


def _named(a: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    """The ids that the arguments `keys` name ("set.owner" looks inside `set`;
    a list argument names each of its items, a map each of its keys; None
    names nobody)."""
    out: list[str] = []
    for key in keys:
        value: Any = a
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, list | dict):
            out.extend(value)
        elif value is not None:
            out.append(value)
    return out


def _did_you_mean(op: Any) -> str:
    """A hint for a mistyped op: the nearest names of the room ops."""
    if not isinstance(op, str):
        return ""
    near = difflib.get_close_matches(op[:64], [*OPS, *LOG_OPS], n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def apply(room: Room, op: str, args: Any, actor: Actor, dice: Dice) -> Outcome:
    """Apply one command; return the new state, its events and its result.

    Raises a `Refused` subclass for any refusal; `room` itself is never
    changed, so the caller keeps the old state on a refusal.
    """
    spec = OPS.get(op) if isinstance(op, str) else None
    if spec is None:
        raise UnknownOp(f"unknown op {op!r}{_did_you_mean(op)}")
    a = check_args(op, spec.args, args)
    if spec.check is not None:
        spec.check(a)
    if spec.bounds is not None:
        spec.bounds(room, a)
    chars = _named(a, spec.chars)
    for cid in chars:
        check_seen(room, actor, cid)
    for uid in _named(a, spec.users):
        if uid not in room.users:
            raise NotFound(f"no user {uid!r} in this room", "no_user")
    authorize(room, spec, a, actor, op)
    for cid in chars:
        check_alive(spec, room.characters[cid])
    if spec.checks:
        facts = Facts(room, actor)
        for check in spec.checks:
            check.test(facts, a)
    ctx = Ctx(room.copy(), dice, actor)
    spec.apply(ctx, a)  # Ctx.emit refuses past MAX_EVENTS: the room is a copy
    return Outcome(
        ctx.room,
        ctx.events,
        ctx.result,
        tuple(ctx.effects),
        spec.undoable,
        frozenset(ctx.touched),
    )


def authorize_undo(actor: Actor) -> None:
    """Undo is the GM's (docs/protocol.md, "undo"); the server replays the log."""
    if not actor.is_gm:
        raise Forbidden("only the GM may undo", "undo_gm_only")


def new_room(room_id: str, name: str, gm_name: str = "GM") -> tuple[Room, str]:
    """The initial state of a room and its first GM's user id."""
    room = Room(room=room_id, name=name)
    uid = f"u{room.next_user}"
    room.next_user += 1
    room.users[uid] = User(gm_name, "gm")
    return room, uid
