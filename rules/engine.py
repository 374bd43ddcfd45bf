"""`apply`: one command against a room, as data.

Each op is a row of `OPS`: its arguments (validate.py), who may send it, the
arguments naming characters (checked to exist), and its handler. `apply`
checks in the protocol's order (docs/protocol.md, "Refusals"): unknown_op, invalid_args, not_found,
forbidden, then the handler's own conflict and rule refusals.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import attrs

from rules import abilities, clock, initiative, roster, stability, stabilizing, tracker
from rules.context import Actor, Ctx
from rules.damage import damage
from rules.dice import Dice
from rules.effects import Effect
from rules.errors import Forbidden, NotFound, RuleBroken, UnknownOp
from rules.model import Character, Room, User
from rules.rest import check_stop_rest, end_rest, start_rest
from rules.validate import (
    ABILITY,
    ABILITY_SCORES,
    AMOUNT,
    BONUSES,
    BOOL,
    CHAR_IDS,
    CLOCK,
    CORRECTIONS,
    D20,
    D20S,
    ID,
    LEVEL,
    NAME,
    ORDER,
    OWNER,
    PE,
    PP,
    PV,
    PV_MAX,
    REST,
    ROLE,
    ROLLS,
    ROUND,
    ROUND_SECONDS,
    SECONDS,
    SHOWN,
    SKILL,
    TURN,
    Arg,
    check_args,
    optional,
)

__all__ = ["ADMIN_OPS", "LOG_OPS", "OPS", "USER_OPS", "Actor", "Outcome", "apply", "new_room"]

# Roles (docs/operations.md, "Operations"): G the GM; O the GM or the owner of the
# acting character (the `char` argument); UNTEND the GM or the owner of the
# patient or of its healer.
G, OWNER_OR_GM, UNTEND = "G", "O", "UNTEND"


@attrs.frozen
class OpSpec:
    args: dict[str, Arg]
    role: str
    handler: Callable[[Ctx, dict[str, Any]], None]
    chars: tuple[str, ...] = ()  # arguments that name characters (an id or a list of ids)
    users: tuple[str, ...] = ()  # arguments that name users ("set.owner" looks inside `set`)
    # Argument checks that need several arguments at once (still invalid_args).
    check: Callable[[dict[str, Any]], None] | None = None
    # The room's bounds (v1.1, Bounds): checks that need the room's state
    # but are still `invalid_args`, so they run with the argument checks.
    bounds: Callable[[Room, dict[str, Any]], None] | None = None
    # D6: may this op target a dead character (the `chars` arguments)?
    on_dead: bool = False
    # May `undo` revert it? User and token commands cannot be undone: a
    # token, once issued or revoked, is not brought back (docs/protocol.md, "undo").
    undoable: bool = True


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


def _c(ctx: Ctx, a: dict[str, Any], key: str = "char") -> Character:
    return ctx.edit(a[key])


OPS: dict[str, OpSpec] = {
    "update_room": OpSpec(
        {
            "name": optional(NAME),
            "round_seconds": optional(ROUND_SECONDS),
            "skip_dead": optional(BOOL),
        },
        G,
        roster.update_room,
        check=roster.check_update_room,
    ),
    "add_user": OpSpec(
        {"name": Arg(NAME), "role": Arg(ROLE)},
        G,
        lambda ctx, a: roster.add_user(ctx, a["name"], a["role"]),
        undoable=False,
        bounds=roster.room_has_space_for_a_user,
    ),
    "remove_user": OpSpec(
        {"user": Arg(ID)},
        G,
        lambda ctx, a: roster.remove_user(ctx, a["user"]),
        users=("user",),
        undoable=False,
    ),
    "rotate_token": OpSpec(
        {"user": Arg(ID)},
        G,
        lambda ctx, a: roster.rotate_token(ctx, a["user"]),
        users=("user",),
        undoable=False,
    ),
    "add_character": OpSpec(
        {
            "name": Arg(NAME),
            "level": Arg(LEVEL),
            "pv_max": Arg(PV_MAX),
            "pe_max": Arg(PE),
            "pp_max": Arg(PP),
            "abilities": Arg(ABILITY_SCORES),
            "medicine": Arg(SKILL),
            "owner": optional(OWNER),
            "id": optional(ID),
            "pv": optional(PV),
            "pe": optional(PE),
            "pp": optional(PP),
            "shown": optional(SHOWN),
        },
        G,
        roster.add_character,
        users=("owner",),
        bounds=roster.room_has_space_for_a_character,
    ),
    "update_character": OpSpec(
        {"char": Arg(ID), "set": Arg(CORRECTIONS)},
        G,
        lambda ctx, a: roster.update_character(ctx, _c(ctx, a), a["set"]),
        chars=("char",),
        users=("set.owner",),
        on_dead=True,
    ),
    "remove_character": OpSpec(
        {"char": Arg(ID)},
        G,
        lambda ctx, a: roster.remove_character(ctx, _c(ctx, a)),
        chars=("char",),
        on_dead=True,
    ),
    "combat_start": OpSpec(
        {"order": Arg(ORDER)},
        G,
        lambda ctx, a: clock.combat_start(ctx, a["order"]),
        chars=("order",),
    ),
    "combat_end": OpSpec({}, G, lambda ctx, a: clock.combat_end(ctx)),
    "end_turn": OpSpec(
        {"char": Arg(ID), "round": optional(ROUND)},
        OWNER_OR_GM,
        lambda ctx, a: clock.end_turn(ctx, a["char"], a["round"]),
        chars=("char",),
        on_dead=True,
    ),
    "set_order": OpSpec(
        {"order": Arg(ORDER), "turn": optional(TURN)},
        G,
        lambda ctx, a: tracker.set_order(ctx, a["order"], a["turn"]),
        chars=("order",),
        check=tracker.check_turn_arg,
        on_dead=True,  # the dead may stay in the order; only newcomers are checked (D6)
    ),
    "roll_initiative": OpSpec(
        {"chars": optional(CHAR_IDS), "bonus": optional(BONUSES), "rolls": optional(D20S)},
        G,
        initiative.roll_initiative,
        chars=("chars", "bonus", "rolls"),
    ),
    "advance_clock": OpSpec(
        {"seconds": Arg(SECONDS), "from": optional(CLOCK)},
        G,
        lambda ctx, a: tracker.advance_from(ctx, a["seconds"], a["from"]),
    ),
    "damage": OpSpec(
        {
            "char": Arg(ID),
            "amount": Arg(AMOUNT),
            "nonlethal": optional(BOOL, False),
            "pv_only": optional(BOOL, False),
        },
        G,
        lambda ctx, a: damage(ctx, _c(ctx, a), a["amount"], a["nonlethal"], a["pv_only"]),
        chars=("char",),
    ),
    "heal": OpSpec(
        {"char": Arg(ID), "amount": Arg(AMOUNT), "stabilize": optional(BOOL, False)},
        G,
        lambda ctx, a: stabilizing.heal(ctx, _c(ctx, a), a["amount"], a["stabilize"]),
        chars=("char",),
    ),
    "first_aid": OpSpec(
        {"char": Arg(ID), "patient": Arg(ID), "roll": optional(D20)},
        OWNER_OR_GM,
        lambda ctx, a: stabilizing.first_aid(ctx, _c(ctx, a), _c(ctx, a, "patient"), a["roll"]),
        chars=("char", "patient"),
    ),
    "stabilize": OpSpec(
        {"char": Arg(ID)},
        OWNER_OR_GM,
        lambda ctx, a: stabilizing.stabilize(ctx, _c(ctx, a)),
        chars=("char",),
    ),
    "stay_in_fight": OpSpec(
        {"char": Arg(ID)},
        OWNER_OR_GM,
        lambda ctx, a: stabilizing.stay_in_fight(ctx, _c(ctx, a)),
        chars=("char",),
    ),
    "tend": OpSpec(
        {"char": Arg(ID), "patient": Arg(ID)},
        OWNER_OR_GM,
        lambda ctx, a: stability.tend(ctx, _c(ctx, a), _c(ctx, a, "patient")),
        chars=("char", "patient"),
    ),
    "untend": OpSpec(
        {"patient": Arg(ID)},
        UNTEND,
        lambda ctx, a: stability.untend(ctx, _c(ctx, a, "patient")),
        chars=("patient",),
    ),
    "rest": OpSpec(
        {"char": Arg(ID), "kind": Arg(REST)},
        OWNER_OR_GM,
        lambda ctx, a: start_rest(ctx, _c(ctx, a), a["kind"]),
        chars=("char",),
    ),
    "stop_rest": OpSpec(
        {"char": Arg(ID)}, OWNER_OR_GM, lambda ctx, a: _stop_rest(ctx, a), chars=("char",)
    ),
    "ability_damage": OpSpec(
        {"char": Arg(ID), "ability": Arg(ABILITY), "amount": Arg(AMOUNT)},
        G,
        lambda ctx, a: abilities.ability_damage(ctx, _c(ctx, a), a["ability"], a["amount"]),
        chars=("char",),
    ),
    "ability_restore": OpSpec(
        {"char": Arg(ID), "ability": Arg(ABILITY), "amount": Arg(AMOUNT)},
        G,
        lambda ctx, a: abilities.ability_restore(ctx, _c(ctx, a), a["ability"], a["amount"]),
        chars=("char",),
    ),
    "queue_rolls": OpSpec(
        {"rolls": Arg(ROLLS)}, G, lambda ctx, a: roster.queue_rolls(ctx, a["rolls"])
    ),
}


def _stop_rest(ctx: Ctx, a: dict[str, Any]) -> None:
    c = _c(ctx, a)
    check_stop_rest(c)
    end_rest(ctx, c, "stopped")


USER_OPS = frozenset(op for op, spec in OPS.items() if not spec.undoable)  # users and tokens
LOG_OPS = frozenset({"undo"})  # the room core walks the log; `revert` decides what it restores
ADMIN_OPS = frozenset(
    {"create_room", "delete_room", "import_room", "reissue_gm_link"}
)  # server-wide


def authorize(room: Room, spec: OpSpec, a: dict[str, Any], actor: Actor, op: str) -> None:
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


def authorize_role(spec: OpSpec, actor: Actor, op: str) -> None:
    """The part of `authorize` that the role alone decides, whatever the
    arguments (observers send nothing; G ops are the GM's)."""
    if actor.is_gm:
        return
    if actor.role == "observer":
        raise Forbidden("observers may only watch", "observer")
    if spec.role == G:
        raise Forbidden(f"only the GM may {op}", "gm_only", op=op)


def check_alive(spec: OpSpec, c: Character) -> None:
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
    ctx = Ctx(room.copy(), dice, actor)
    spec.handler(ctx, a)  # Ctx.emit refuses past MAX_EVENTS: the room is a copy
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
