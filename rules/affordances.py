"""Affordances: what a viewer may do now, as the rules see it.

    affordances(room, viewer, undo) -> {"chars": ..., "room": ..., "undo": ...}

lists, for each character the viewer sees and for the room, the commands
this viewer can send now: the op, its fixed arguments, the choices it
offers (which patients, which rest), its cost (the PP a stabilise spends),
and for an action that exists but cannot be done now, why (a reason: a
sentence key and its values, `Refused.reason`). Clients render it instead of
working the rules out again, so a button is offered exactly when the server
would accept its command.

One source: every precondition asked here is the very function the op's
handler (or `apply`'s own checks: `check_seen`, `authorize`, `check_alive`)
calls before it changes anything, so an affordance cannot disagree with
`apply`. The property test (tests/rules/test_affordances.py) sends each
offered action and each refused one through `apply`.

What a viewer's role can never send (a player's damage, anything an
observer would send) is left out rather than listed as refused: the page
has no button for it. Nothing here names what the viewer's view hides: only
characters the viewer sees appear (as subjects and as choices), and a
reason's character values that the viewer does not see read null.

Undo reads the log, which the rules do not hold: the server passes the
entry an undo would revert now (`UndoEntry`), or None when there is none.

A new op needs one entry in `OFFERS` (a test checks that every op of
`rules.OPS` has one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from rules import clock, roster, stability, stabilizing, tracker
from rules.context import Actor
from rules.engine import OPS, OpSpec, authorize, authorize_undo, check_alive
from rules.errors import Conflict, Refused
from rules.model import REST_KINDS, Character, Room
from rules.rest import check_rest, check_stop_rest
from rules.view import HIDDEN, Viewer, level_for

__all__ = ["OFFERS", "UndoEntry", "affordances", "nothing_to_undo"]

# Reason values that name a character: read null for a viewer who does not see it.
CHAR_VALUES = ("char", "patient", "healer", "current")

Reason = dict[str, Any]


@attrs.frozen
class UndoEntry:
    """What `undo` would revert now: the latest undoable version not yet
    undone (the server reads it from its log): its version, op, sender and
    wall-clock time."""

    v: int
    op: str
    by: str
    ts: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"v": self.v, "op": self.op, "by": self.by}
        if self.ts is not None:
            out["ts"] = self.ts
        return out


def nothing_to_undo() -> Conflict:
    """The refusal of an undo with nothing left to revert (the room core
    raises it; the affordance reports it)."""
    return Conflict("nothing to undo", "undo_nothing")


@attrs.frozen
class _Scan:
    """One call's inputs: the room, its acting user, and what they see."""

    room: Room
    actor: Actor
    seen: list[Character]  # characters the viewer sees, in character order

    def reason(self, refused: Refused) -> Reason:
        """The refusal as data, without naming a character the viewer does not see."""
        out = refused.reason()
        for key in CHAR_VALUES:
            cid = out.get(key)
            if cid is not None:
                c = self.room.characters.get(cid)
                if c is None or not self.actor.sees(c):
                    out[key] = None
        return out


def _why(scan: _Scan, *checks: Callable[[], None]) -> Reason | None:
    """The first refusal among `checks` (run in order), or None."""
    try:
        for check in checks:
            check()
    except Refused as refused:
        return scan.reason(refused)
    return None


def _clean(spec: OpSpec, fixed: dict[str, Any]) -> dict[str, Any]:
    """Args as `check_args` would clean them: defaults, then the fixed ones."""
    return {name: arg.default for name, arg in spec.args.items()} | fixed


def _free(spec: OpSpec, actor: Actor, taken: set[str]) -> list[str]:
    """The arguments the sender fills in (kinds: docs/operations.md); a die
    roll only for the GM (X1)."""
    return [n for n in spec.args if n not in taken and (actor.is_gm or n != "roll")]


def _entry(
    spec: OpSpec,
    actor: Actor,
    fixed: dict[str, Any],
    why: Reason | None = None,
    choices: dict[str, list[Any]] | None = None,
    refused: dict[str, dict[str, Reason]] | None = None,
    cost: dict[str, int] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"args": fixed}
    if why is not None:
        out["why"] = why
        return out
    free = _free(spec, actor, set(fixed) | set(choices or ()))
    if free:
        out["free"] = free
    if choices:
        out["choices"] = choices
    if refused:
        out["refused"] = refused
    if cost:
        out["cost"] = cost
    return out


# An offer computes one op's affordances: {subject char id or None: entry}.
Offer = Callable[[_Scan, str, OpSpec], dict[str | None, dict[str, Any]]]


def subject(
    check: Callable[[Room, Actor, Character], None] | None = None,
    *,
    arg: str = "char",
    cost: Callable[[Character], dict[str, int]] | None = None,
    options: tuple[str, tuple[str, ...], Callable[[Room, Character, str], None]] | None = None,
    pair: tuple[str, Callable[[Room, Actor, Character, Character], None], str] | None = None,
) -> Offer:
    """An op acting for one character (`arg`, the subject): offered under
    that character when the viewer may send it for them.

    `check(room, actor, c)`: the op's own preconditions on the subject.
    `options=(name, values, check)`: an argument of fixed values (a rest's
    kind), each checked; refused ones come with their reason.
    `pair=(name, check, nobody)`: an argument naming another character
    (first aid's patient), each candidate checked with `check(room, actor,
    c, other)`; `nobody` is the reason key when no candidate is accepted.
    """

    def one(scan: _Scan, op: str, spec: OpSpec, c: Character) -> dict[str, Any] | None:
        room, actor = scan.room, scan.actor
        fixed = {arg: c.id}
        if _why(scan, lambda: authorize(room, spec, _clean(spec, fixed), actor, op)):
            return None  # not this viewer's to send: no button at all
        checks = [lambda: check_alive(spec, c)]
        if check is not None:
            checks.append(lambda: check(room, actor, c))
        why = _why(scan, *checks)
        if why is not None:
            return _entry(spec, actor, fixed, why)
        choices: dict[str, list[Any]] = {}
        refused: dict[str, dict[str, Reason]] = {}
        if options is not None:
            name, values, check_option = options
            ok, no = [], {}
            for value in values:
                reason = _why(scan, lambda: check_option(room, c, value))  # noqa: B023
                if reason is None:
                    ok.append(value)
                else:
                    no[value] = reason
            if not ok:  # refused whatever the choice: the first one's reason
                return _entry(spec, actor, fixed, no[values[0]])
            choices[name] = ok
            if no:
                refused[name] = no
        if pair is not None:
            name, check_pair, nobody = pair
            ok = [
                o.id
                for o in scan.seen
                if _why(
                    scan,
                    lambda: check_alive(spec, o),  # noqa: B023
                    lambda: check_pair(room, actor, c, o),  # noqa: B023
                )
                is None
            ]
            if not ok:
                return _entry(spec, actor, fixed, {"key": nobody})
            choices[name] = ok
        return _entry(spec, actor, fixed, None, choices, refused, None if cost is None else cost(c))

    def offer(scan: _Scan, op: str, spec: OpSpec) -> dict[str | None, dict[str, Any]]:
        out: dict[str | None, dict[str, Any]] = {}
        for c in scan.seen:
            entry = one(scan, op, spec, c)
            if entry is not None:
                out[c.id] = entry
        return out

    return offer


def whole_room(
    check: Callable[[Room, Actor], None] | None = None,
    *,
    chars: tuple[str, Callable[[Room, Character], bool]] | None = None,
    users: tuple[str, Callable[[Room, str], None]] | None = None,
) -> Offer:
    """An op about the room as a whole (the GM's tools), offered in `room`.

    `chars=(name, keep)`: an argument listing characters (a combat order),
    offered as the seen characters `keep(room, c)` accepts; `users=(name,
    check)`: an argument naming a user, offered as the users `check` accepts.
    """

    def offer(scan: _Scan, op: str, spec: OpSpec) -> dict[str | None, dict[str, Any]]:
        room, actor = scan.room, scan.actor
        if _why(scan, lambda: authorize(room, spec, _clean(spec, {}), actor, op)):
            return {}
        why = None
        if check is not None:
            why = _why(scan, lambda: check(room, actor))
        if spec.bounds is not None and why is None:
            bounds = spec.bounds
            why = _why(scan, lambda: bounds(room, _clean(spec, {})))
        if why is not None:
            return {None: _entry(spec, actor, {}, why)}
        choices: dict[str, list[Any]] = {}
        if chars is not None:
            name, keep = chars
            choices[name] = [c.id for c in scan.seen if keep(room, c)]
        if users is not None:
            name, check_user = users
            choices[name] = [
                uid
                for uid in room.users
                if _why(scan, lambda: check_user(room, uid)) is None  # noqa: B023
            ]
        for values in choices.values():
            if not values:
                return {None: _entry(spec, actor, {}, {"key": f"{op}_nobody"})}
        return {None: _entry(spec, actor, {}, None, choices)}

    return offer


def _may_join(room: Room, c: Character) -> bool:
    return _ok(lambda: clock.check_may_join(c))


def _may_stay_or_join(room: Room, c: Character) -> bool:
    """set_order's combatants: those already in the order (the dead may
    stay), and anyone who may join."""
    return room.in_combat(c.id) or _may_join(room, c)


def _ok(check: Callable[[], None]) -> bool:
    try:
        check()
    except Refused:
        return False
    return True


def _no_check(room: Room, uid: str) -> None:
    return None


# Every op of rules.OPS, and how its affordance is computed (see `subject`
# and `whole_room`). Each check is the handler's own.
OFFERS: dict[str, Offer] = {
    "update_room": whole_room(),
    "add_user": whole_room(),
    "remove_user": whole_room(users=("user", roster.check_remove_user)),
    "rotate_token": whole_room(users=("user", _no_check)),
    "add_character": whole_room(),
    "update_character": subject(),
    "remove_character": subject(),
    "combat_start": whole_room(
        lambda room, actor: clock.check_no_combat(room), chars=("order", _may_join)
    ),
    "combat_end": whole_room(lambda room, actor: clock.check_combat(room)),
    "end_turn": subject(lambda room, actor, c: clock.check_end_turn(room, actor, c.id, None)),
    "set_order": whole_room(
        lambda room, actor: tracker.check_combat(
            room, "no combat is running: start one with combat_start"
        ),
        chars=("order", _may_stay_or_join),
    ),
    "advance_clock": whole_room(),
    "damage": subject(),
    "heal": subject(),
    "first_aid": subject(
        lambda room, actor, c: stabilizing.check_first_aid_medic(c),
        pair=(
            "patient",
            lambda room, actor, c, o: stabilizing.check_first_aid(c, o),
            "first_aid_nobody",
        ),
    ),
    "stabilize": subject(
        lambda room, actor, c: stabilizing.check_stabilize(c),
        cost=lambda c: {"pp": stabilizing.stabilize_cost(c)},
    ),
    "stay_in_fight": subject(
        lambda room, actor, c: stabilizing.check_stay_in_fight(c),
        cost=lambda c: {"pp": stabilizing.STAY_IN_FIGHT_COST},
    ),
    "tend": subject(
        lambda room, actor, c: stability.check_healer(c),
        pair=("patient", stability.check_tend, "tend_nobody"),
    ),
    "untend": subject(lambda room, actor, c: stability.check_untend(c), arg="patient"),
    "rest": subject(options=("kind", REST_KINDS, check_rest)),
    "stop_rest": subject(lambda room, actor, c: check_stop_rest(c)),
    "ability_damage": subject(),
    "ability_restore": subject(),
    "queue_rolls": whole_room(lambda room, actor: roster.check_queue_space(room)),
}


def _undo(actor: Actor, undo: UndoEntry | None) -> dict[str, Any]:
    try:
        authorize_undo(actor)
        if undo is None:
            raise nothing_to_undo()
    except Refused as refused:
        return {"why": refused.reason()}
    return undo.to_dict()


def affordances(room: Room, viewer: Viewer, undo: UndoEntry | None = None) -> dict[str, Any]:
    """What `viewer` may do now in `room` (see the module docstring):

        {"chars": {char id: {op: entry}}, "room": {op: entry}, "undo": ...}

    An entry is {"args": the fixed arguments, "free": the arguments the
    sender fills in, "choices": {arg: the values accepted now}, "refused":
    {arg: {value: reason}}, "cost": {"pp": n}} for an action that can be sent
    now, or {"args", "free", "why": reason} for one that cannot (keys without
    content are left out). `undo` is {"v", "op", "by", "ts"} (what an undo
    would revert) or {"why": reason}. An admin, who sends no room command,
    gets nothing."""
    empty: dict[str, Any] = {"chars": {}, "room": {}}
    if viewer.role not in ("gm", "player", "observer") or viewer.user is None:
        return {**empty, "undo": {"why": {"key": "undo_gm_only"}}}
    actor = Actor(viewer.user, viewer.role)
    seen = [
        c for c in room.ordered() if level_for(viewer.role, viewer.user, c.owner, c.shown) != HIDDEN
    ]
    scan = _Scan(room, actor, seen)
    chars: dict[str, dict[str, Any]] = {}
    ops: dict[str, Any] = {}
    if actor.role != "observer":  # an observer may send nothing at all
        for op, spec in OPS.items():
            for cid, entry in OFFERS[op](scan, op, spec).items():
                if cid is None:
                    ops[op] = entry
                else:
                    chars.setdefault(cid, {})[op] = entry
    ordered = {c.id: chars[c.id] for c in seen if c.id in chars}
    return {"chars": ordered, "room": ops, "undo": _undo(actor, undo)}
