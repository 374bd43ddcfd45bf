"""Affordances: what a viewer may do now, as the rules see it.

    affordances(room, viewer, undo) -> {"chars": ..., "room": ..., "undo": ...}

lists, for each character the viewer sees and for the room, the commands
this viewer can send now: the op, its fixed arguments, the choices it
offers (which patients, which rest), its cost (the PP a stabilise spends),
and for an action that exists but cannot be done now, why (a reason: a
sentence key and its values, `Refused.reason`). Clients render it instead of
working the rules out again, so a button is offered exactly when the server
would accept its command.

One source: every precondition asked here is one of the op's declared
checks, which `apply` runs before the op changes anything (or `apply`'s
own checks: `authorize`, `check_alive`), and what a viewer sees is rules/view.py's level (as in
`apply`'s `check_seen`), so an affordance cannot disagree with `apply`. The
property test (tests/rules/test_affordances.py) sends each offered action
and each refused one through `apply`. The checks run once per room version
for all viewers, and a `RuleTable` kept between versions redoes only what
changed (the server keeps one per room).

What a viewer's role can never send (a player's damage, anything an
observer would send) is left out rather than listed as refused: the page
has no button for it. Nothing here names what the viewer's view hides: only
characters the viewer sees appear (as subjects and as choices), and a
reason's character values that the viewer does not see read null.

Undo reads the log, which the rules do not hold: the server passes the
entry an undo would revert now (`UndoEntry`), or None when there is none.

Each op's offer is built from its declaration (`rules.op.Op.offer`, run by
rules/offers.py with the op's own checks); the entries are kept between
room versions by a `RuleTable` (rules/rule_table.py).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import attrs

from rules.context import Actor
from rules.engine import OPS, authorize_role, authorize_undo
from rules.errors import Conflict, Refused
from rules.model import Room
from rules.offers import OFFERS, RoomOffer, SubjectOffer, _Scan
from rules.op import OWNER_OR_GM, UNTEND
from rules.rule_table import RuleTable
from rules.view import HIDDEN, Viewer, level_for

__all__ = [
    "OFFERS",
    "RuleTable",
    "UndoEntry",
    "affordances",
    "affordances_begin",
    "affordances_for",
    "affordances_of",
    "nothing_to_undo",
]


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


def _ops_for(table: RuleTable, actor: Actor) -> Any:
    """The room ops the actor's role may send (authorize_role), the ops
    acting for one character, whether every one of those is an owner's
    (a player's: see `_affordances`), and those that read the combat; kept
    in the table by role."""
    found = table.role_ops.get(actor.role)
    if found is None:
        allowed = [op for op in OPS if _role_allows(table, actor, op)]
        per_char = [(op, offer) for op in allowed if isinstance(offer := OFFERS[op], SubjectOffer)]
        rooms = [(op, offer) for op in allowed if isinstance(offer := OFFERS[op], RoomOffer)]
        owners_only = not actor.is_gm and all(
            OPS[op].role in (OWNER_OR_GM, UNTEND) for op, _ in per_char
        )
        # ...and those whose checks read the combat (T1, R4: what a turn
        # changes, `RuleTable.partial`).
        combat = [(op, offer) for op, offer in per_char if offer.reads_combat]
        found = table.role_ops[actor.role] = (rooms, per_char, owners_only, combat)
    return found


def _players_own_only() -> bool:
    """Whether every op a player may send for a character is an owner's
    (OWNER_OR_GM or UNTEND): then a change to a character concerns only the
    players owning it or its healer (`affordances_begin`)."""
    return bool(_ops_for(RuleTable(), Actor("", "player"))[2])


def _role_allows(table: RuleTable, actor: Actor, op: str) -> bool:
    """authorize_role's answer: all it reads is the viewer's role and the op's."""
    spec = OPS[op]
    key = (actor.role, spec.role)
    ok = table.roles.get(key)
    if ok is None:
        try:
            authorize_role(spec, actor, op)
            ok = True
        except Refused:
            ok = False
        table.roles[key] = ok
    return ok


def _undo_of(table: RuleTable, actor: Actor, undo: UndoEntry | None) -> dict[str, Any]:
    """What `actor`'s undo would revert (`_undo`): the same object while
    it is the same."""
    if not actor.is_gm:
        undo = None  # refused whatever the log holds (authorize_undo)
    found = table.undos.get(actor.role)
    if found is not None and (found[0] is undo or (undo is not None and found[0] == undo)):
        return found[1]
    if found is not None and undo is not None and found[0] is not None and "why" not in found[1]:
        told = undo.to_dict()  # authorize_undo let this role undo before: it reads the role only
    else:
        told = _undo(actor, undo)
    table.undos[actor.role] = (undo, told)
    return told


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
    now, or {"args", "why": reason} for one that cannot (keys without
    content are left out). `undo` is {"v", "op", "by"} (what an undo would
    revert) or {"why": reason}. An admin, who sends no room command, gets
    nothing."""
    return affordances_for(room, [viewer], undo)[0]


def affordances_for(
    room: Room,
    viewers: list[Viewer],
    undo: UndoEntry | None = None,
    table: RuleTable | None = None,
    touched: tuple[Room, Collection[str]] | None = None,
) -> list[dict[str, Any]]:
    """`affordances` for several viewers of one room at once: the rule
    checks run once and serve them all (the server asks for every connected
    GM and player after each command). With the `table` of the previous
    call, only what changed since is worked out again (`RuleTable`);
    `touched=(before, ids)` says what changed when `before` was the room of
    that call (the characters a command changed: `Outcome.touched`)."""
    table = RuleTable() if table is None else table
    table.begin(room, touched)
    return [_affordances(room, viewer, undo, table) for viewer in viewers]


def affordances_begin(
    room: Room, table: RuleTable, touched: tuple[Room, Collection[str]] | None = None
) -> frozenset[str | None] | None:
    """`affordances_for` in steps, for a caller that keeps many viewers'
    answers current and asks only for those that may change: `table`
    begins a call on `room` (`touched` as there), then `affordances_of`
    gives each viewer asked for. Returns the players whose answers may
    differ from the table's last ones (`RuleTable.concerned`: those owning
    a character whose entries may change, or its healer), or None when any
    viewer's may. Every other player's answer is their last one, the very
    same object, and a GM's differs at most by its undo: such a viewer
    need not be asked."""
    table.begin(room, touched)
    return table.concerned if PLAYERS_OWN_ONLY else None


def affordances_of(
    room: Room, viewer: Viewer, undo: UndoEntry | None, table: RuleTable
) -> dict[str, Any]:
    """One viewer's affordances in the `room` the table began a call on
    (`affordances_begin`)."""
    return _affordances(room, viewer, undo, table)


def _affordances(
    room: Room, viewer: Viewer, undo: UndoEntry | None, table: RuleTable
) -> dict[str, Any]:
    if viewer.role not in ("gm", "player", "observer") or viewer.user is None:
        return {"chars": {}, "room": {}, "undo": {"why": {"key": "undo_gm_only"}}}
    actor = table.actor(viewer)
    last = table.last.get(viewer.user)
    seen_ids = table.seen.get(viewer.user)
    dirty = table.dirty if last is not None and seen_ids is not None else None
    if (
        dirty is not None
        and not dirty
        and not table.partial
        and table.room_reads.get(viewer.user) == (table.room_now, seen_ids)
    ):
        # Nothing they read changed but, maybe, what an undo would revert
        # (the GM's, at nearly every command).
        assert last is not None
        table.redone[viewer.user] = dirty
        told = _undo_of(table, actor, undo)
        if told is last["undo"]:
            return last
        out = {"chars": last["chars"], "room": last["room"], "undo": told}
        table.last[viewer.user] = out
        return out
    if dirty is not None:
        # Only the dirty characters' visibility can have changed (it reads
        # the character alone: rules/view.py).
        assert seen_ids is not None
        now_seen = {
            cid
            for cid in dirty
            if (c := room.characters.get(cid)) is not None
            and level_for(viewer.role, viewer.user, c.owner, c.shown) != HIDDEN
        }
        if now_seen != seen_ids & dirty:
            dirty = None  # what the viewer sees changed: choices among them too
    if dirty is None:
        seen = [
            c
            for c in room.ordered()
            if level_for(viewer.role, viewer.user, c.owner, c.shown) != HIDDEN
        ]
        ids = frozenset(c.id for c in seen)
        seen_ids = seen_ids if seen_ids == ids else ids  # the same object while equal
        redo = seen
    else:
        assert seen_ids is not None
        redo = [room.characters[cid] for cid in dirty if cid in seen_ids]
    table.seen[viewer.user] = seen_ids
    scan = _Scan(room, actor, seen_ids, table)
    rooms, per_char, owners_only, combat_ops = _ops_for(table, actor)
    if dirty is None and owners_only:
        # A player may send nothing for a character that neither they nor
        # its healer's owner own (see below): only those are worked out (98
        # players owning two patients each, each one's snapshot after a
        # century: two characters, not the room's 197).
        everyone = room.characters
        redo = [
            c
            for c in redo
            if c.owner == actor.user
            or (
                c.healer is not None
                and (healer := everyone.get(c.healer)) is not None
                and healer.owner == actor.user
            )
        ]
    before = last["chars"] if last is not None else {}
    chars = {} if dirty is None else before
    if dirty is None:
        table.redone[viewer.user] = None
    else:
        table.redone[viewer.user] = dirty | table.partial if table.partial else dirty
        for cid in table.partial:
            old = before.get(cid)
            if old is None or cid not in seen_ids:
                continue  # nothing this viewer may send for them
            c = room.characters[cid]
            turned = old
            for op, offer in combat_ops:
                was = old.get(op)
                if was is not None:
                    entry = offer.one(scan, c)
                    # (an entry is the same object while equal: RuleTable.entry)
                    if entry is not None and entry is not was:
                        if turned is old:
                            turned = dict(old)
                        turned[op] = entry
            if turned is not old:
                if chars is before:
                    chars = dict(before)
                chars[cid] = turned
    for c in redo:
        mine: dict[str, Any] = {}
        ops_of_c = per_char
        if not actor.is_gm:
            # The ops this player may send for `c` at all: authorize reads
            # the owners of `c` and of its healer (UNTEND), kept while they are.
            healer = room.characters.get(c.healer) if c.healer is not None else None
            owners = (c.owner, None if healer is None else healer.owner)
            found = table.acts.get((viewer.user, c.id))
            if found is not None and found[0] == owners:
                ops_of_c = found[1]
            elif owners_only and actor.user not in owners:
                # Every per-character op of a player is the owner's (O) or
                # the owners' of the patient or its healer (UNTEND):
                # `authorize` refuses them all for a character they own
                # neither of, so none is worked out (98 players owning a
                # patient each: 98 characters each, at every snapshot).
                ops_of_c = []
                table.acts[(viewer.user, c.id)] = (owners, ops_of_c)
            else:
                ops_of_c = [(op, offer) for op, offer in per_char if offer.one(scan, c) is not None]
                table.acts[(viewer.user, c.id)] = (owners, ops_of_c)
        for op, offer in ops_of_c:
            entry = offer.one(scan, c)
            if entry is not None:
                mine[op] = entry
        old = before.get(c.id)
        if not mine:
            if old is not None and chars is before:
                chars = dict(before)
            chars.pop(c.id, None)
            continue  # nothing this viewer may send for this character
        mine = _same(old, mine)
        if mine is not old and chars is before:
            chars = dict(before)
        chars[c.id] = mine
    if dirty is not None:
        for cid in dirty:
            if cid not in seen_ids and cid in chars:  # gone
                if chars is before:
                    chars = dict(before)
                del chars[cid]
    # The room's ops read only what `room_key` holds (and the viewer: their
    # role, and what they see when a choice lists characters).
    room_reads = (table.room_now, seen_ids)
    if last is not None and table.room_reads.get(viewer.user) == room_reads:
        ops = last["room"]
    else:
        ops = {}
        for op, room_offer in rooms:
            entry = room_offer.entry(scan)
            if entry is not None:
                ops[op] = entry
        table.room_reads[viewer.user] = room_reads
    told = _undo_of(table, actor, undo)
    if last is None:
        out = {"chars": chars, "room": ops, "undo": told}
    elif chars is last["chars"] and ops is last["room"] and told is last["undo"]:
        out = last  # nothing changed: the same object (the diff skips it at once)
    else:
        # Worked out again only where something changed (`dirty`), `chars`
        # is a new dict only when an entry of it did: no need to compare
        # every character's (200 of them, each viewer, each command).
        out = {
            "chars": chars if dirty is not None else _same(last["chars"], chars),
            "room": _same(last["room"], ops),
            "undo": told,
        }
    table.last[viewer.user] = out
    return out


# Checked once, from the ops' declarations: a new op a player may send for
# someone else's character turns the shortcut off, not the answers wrong.
PLAYERS_OWN_ONLY = _players_own_only()


def _same(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """`old` itself when `new` holds the same values (by identity, or equal
    for plain ones): what is unchanged stays the same object, so that the
    server's diff of two calls skips it at once."""
    if old is new:
        return old
    if old is None or len(old) != len(new):
        return new
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if before is not value and (isinstance(value, dict) or before != value):
            return new
    return old


_MISSING = object()
