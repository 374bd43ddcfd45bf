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
handler (or `apply`'s own checks: `authorize`, `check_alive`) calls before
it changes anything, and what a viewer sees is rules/view.py's level (as in
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

A new op needs one entry in `OFFERS` (a test checks that every op of
`rules.OPS` has one).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import attrs

from rules import clock, initiative, roster, stability, stabilizing
from rules.context import Actor
from rules.engine import (
    OPS,
    OWNER_OR_GM,
    UNTEND,
    OpSpec,
    authorize,
    authorize_role,
    authorize_undo,
    check_alive,
)
from rules.errors import Conflict, Refused
from rules.model import REST_KINDS, Character, Room
from rules.rest import check_rest, check_stop_rest
from rules.view import HIDDEN, Viewer, level_for

__all__ = [
    "OFFERS",
    "RuleTable",
    "UndoEntry",
    "affordances",
    "affordances_for",
    "nothing_to_undo",
]

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


# The actor the rule checks run as: they are the same for every viewer (a
# reason is data; only its server sentence names characters, and that is
# not kept here), so one table per room version serves every viewer.
JUDGE = Actor("", "gm")


@attrs.define
class RuleTable:
    """What the rules say of each (op, subject), shared by the viewers of a
    room, and kept from one version to the next by the caller (the server's
    room core) so that a command costs what it changed, not what the room
    holds.

    Each call first works out which characters' entries may have changed
    since the last one (`begin`): the characters the command changed (the
    engine never changes a character in place: a command copies the ones it
    changes, so an unchanged character is the very same object; the caller
    may name them, `touched`, else they are found by identity), and those
    whose entries read room-level inputs that changed: whose turn it is
    (T1), who is in the combat (R4), who tends someone (R4, L4); a change
    of every character's inputs (a patient to choose appears, the users,
    the start or end of a combat) redoes them all. Only those characters'
    entries are worked out again, for each viewer, and the others are kept
    as the same objects. Each rule entry is also kept with the key of what
    its checks read (the op's `reads`) and shared by the viewers while
    that key is equal.

    A cache only: a fresh table gives the same affordances (the property
    test checks it, with and without `touched`)."""

    entries: dict[Any, tuple[Any, dict[str, Any]]] = attrs.Factory(dict)
    # Each viewer's version of an entry, by (user, op, subject): (the
    # entry, what the viewer saw, their version).
    adapted: dict[Any, tuple[dict[str, Any], frozenset[str], dict[str, Any]]] = attrs.Factory(dict)
    # What the last call saw, to tell what changed since.
    room: Room | None = None
    chars: dict[str, Character] = attrs.Factory(dict)
    users: Any = None
    users_generation: int = 0
    # Bumped when what a choice of patient reads of the others changed (a
    # character came or went, or its condition or healer changed): what
    # first aid and tending offer, and the room's choices of characters.
    generation: int = 0
    combat: Any = None  # (order, turn, round) of the running combat, or None
    # Each healer's patients (who tends someone: R4, L4; whose owner
    # authorize reads for untend).
    tends: dict[str, set[str]] = attrs.Factory(dict)
    # The characters whose entries may differ from the last call's, or
    # None: every one (`begin`).
    dirty: set[str] | None = None
    # ...and those of which only the entries that read the combat may.
    partial: set[str] = attrs.Factory(set)
    # What each viewer saw last.
    seen: dict[Any, frozenset[str]] = attrs.Factory(dict)
    # Each character's `inputs`, with the version of it they were read from.
    read: dict[str, tuple[Character, tuple[Any, ...] | None]] = attrs.Factory(dict)
    # The ops each player may send for each character (authorize), by
    # (user, character), with the owners authorize read.
    acts: dict[Any, tuple[Any, list[Any]]] = attrs.Factory(dict)
    # What each viewer's room entries read (see `_affordances`), and
    # `room_key` at this call.
    room_reads: dict[Any, Any] = attrs.Factory(dict)
    room_now: Any = None
    # Each role's undo (authorize_undo reads the role only): (the entry, what it says).
    undos: dict[str, tuple[UndoEntry | None, dict[str, Any]]] = attrs.Factory(dict)
    # The characters passing an op's `candidate` test (a patient to choose),
    # with the generation they were found in.
    pools: dict[str, tuple[int, list[Character]]] = attrs.Factory(dict)
    # authorize's answers for a player, by (user, role of the op, argument,
    # subject), with the owners it read (the die roll is never offered to
    # a player, so `roll` is always None).
    allowed: dict[Any, tuple[Any, bool]] = attrs.Factory(dict)
    # authorize_role's answers: all it reads is the viewer's role and the op's.
    roles: dict[tuple[str, str], bool] = attrs.Factory(dict)

    # Each role's ops, and those of them acting for a character, and
    # whether all of those are an owner's (see ops_for).
    role_ops: dict[str, Any] = attrs.Factory(dict)
    # Each viewer's Actor, by user (a call per viewer and command need not
    # build one).
    actors: dict[Any, Actor] = attrs.Factory(dict)
    # Each viewer's last affordances: unchanged parts are kept as the same objects.
    last: dict[Any, dict[str, Any]] = attrs.Factory(dict)
    # The characters whose entries the last call worked out again for each
    # viewer (None: all): a caller diffing two calls need look at no other.
    redone: dict[Any, set[str] | None] = attrs.Factory(dict)

    def forget(self, user: Any) -> None:
        """A viewer the caller left out of a call (the server skips players
        waiting for a snapshot): what was kept of them is older than the
        last call's changes, so their next call works everything out."""
        for kept in (self.last, self.seen, self.room_reads, self.redone):
            kept.pop(user, None)

    @property
    def healers(self) -> Collection[str]:
        """The characters tending someone."""
        return self.tends.keys()

    def ops_for(self, actor: Actor) -> Any:
        """The ops the actor's role may send (authorize_role), those of
        them that act for one character, with how to work each out, and
        whether every one of those is an owner's (a player's: see
        `_affordances`)."""
        found = self.role_ops.get(actor.role)
        if found is None:
            allowed = [(op, spec) for op, spec in OPS.items() if self.role_allows(spec, actor, op)]
            per_char = [
                (op, spec, OFFERS[op].one, OFFERS[op].reads in COMBAT_READS)  # type: ignore[attr-defined]
                for op, spec in allowed
                if OFFERS[op].one  # type: ignore[attr-defined]
            ]
            owners_only = not actor.is_gm and all(
                spec.role in (OWNER_OR_GM, UNTEND) for _, spec, _, _ in per_char
            )
            found = self.role_ops[actor.role] = (allowed, per_char, owners_only)
        return found

    def actor(self, viewer: Viewer) -> Actor:
        """`viewer` as the actor their commands would come from."""
        found = self.actors.get(viewer.user)
        if found is None or found.role != viewer.role:
            found = self.actors[viewer.user] = Actor(viewer.user, viewer.role)  # type: ignore[arg-type]
        return found

    def role_allows(self, spec: OpSpec, actor: Actor, op: str) -> bool:
        key = (actor.role, spec.role)
        ok = self.roles.get(key)
        if ok is None:
            ok = self.roles[key] = not _why(lambda: authorize_role(spec, actor, op))
        return ok

    def entry(self, key: Any, reads: Any, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        found = self.entries.get(key)
        if found is not None and (found[0] is reads or found[0] == reads):
            return found[1]
        out = make()
        self.entries[key] = (reads, out)
        return out

    def pool(self, room: Room, op: str, test: Callable[[Character], bool]) -> list[Character]:
        """The room's characters passing `test`, in order: found once per
        generation (not once per subject and viewer)."""
        found = self.pools.get(op)
        if found is None or found[0] != self.generation:
            found = self.pools[op] = (self.generation, [o for o in room.ordered() if test(o)])
        return found[1]

    def begin(self, room: Room, touched: tuple[Room, Collection[str]] | None = None) -> None:
        """A new call: note what changed since the last one (`dirty`).
        `touched=(before, ids)`: `room` is `before` with only the characters
        `ids` changed (added or removed); used when `before` is the room of
        the last call, else the characters are compared one by one."""
        if self.room is None or room.users is not self.users:
            self.reset()  # the users changed: everything is worked out again
            self.users_generation += 1
            self.users = room.users
        chars, old = room.characters, self.chars
        first = self.room is None
        if touched is not None and touched[0] is self.room:
            changed = [cid for cid in touched[1] if old.get(cid) is not chars.get(cid)]
        elif first:
            changed = list(chars)
        else:
            changed = [cid for cid, c in chars.items() if old.get(cid) is not c]
            if len(chars) - len(changed) != len(old):  # some went too
                changed += [cid for cid in old if cid not in chars]
        moved = bool(changed)
        if not first:
            # A command may copy a character and change nothing the checks
            # read (a heal, a wound that leaves them standing, an end of turn
            # with nothing to reset): its affordances are as they were.
            changed = [cid for cid in changed if _inputs(old.get(cid)) != _inputs(chars.get(cid))]
        dirty: set[str] | None = None if first else set(changed)
        partial: set[str] = set()
        patients = first
        for cid in changed:
            before, after = old.get(cid), chars.get(cid)
            if (
                before is None
                or after is None
                or before.condition != after.condition
                or before.healer != after.healer
            ):
                patients = True
                self._retend(cid, before, after)
            if (
                dirty is not None
                and before is not None
                and after is not None
                and before.owner != after.owner
                and cid in self.tends
            ):
                dirty |= self.tends[cid]  # untend: authorize reads the healer's owner
        if moved:
            self.chars = dict(chars)
        if patients:
            # First aid and tending offer the others: every character's
            # entries may change (a character falls, is stabilized, is tended).
            self.generation += 1
            dirty = None
            if not first:
                for key in [k for k in self.entries if k[1] is not None and k[1] not in chars]:
                    del self.entries[key]
                for key in [k for k in self.adapted if k[2] is not None and k[2] not in chars]:
                    del self.adapted[key]
                for key in [k for k in self.allowed if k[3] not in chars]:
                    del self.allowed[key]
                for key in [k for k in self.acts if k[1] not in chars]:
                    del self.acts[key]
                for cid in [cid for cid in self.read if cid not in chars]:
                    del self.read[cid]
        combat = room.combat
        now = None if combat is None else (tuple(combat.order), combat.turn, combat.round)
        before_combat = self.combat
        if now != before_combat:
            if (now is None) != (before_combat is None):
                dirty = None  # T1: every character's end_turn
            elif dirty is not None and now is not None and before_combat is not None:
                # Only their entries that read the combat (`reads_combat`,
                # `reads_rest`) are redone.
                old_order, new_order = before_combat[0], now[0]
                if old_order:
                    partial.add(old_order[before_combat[1]])  # whose turn it was
                if new_order:
                    partial.add(new_order[now[1]])  # and is
                if old_order != new_order:
                    partial |= set(old_order) ^ set(new_order)  # R4: in the combat or not
        self.combat = now
        self.room = room
        self.dirty = dirty
        self.partial = set() if dirty is None else partial - dirty
        self.room_now = self.room_key(room)

    def _retend(self, cid: str, before: Character | None, after: Character | None) -> None:
        """Keep `tends` (each healer's patients) as `cid` changed; the
        healers who start or stop tending anyone are dirty (R4, L4)."""
        gone = before.healer if before is not None else None
        come = after.healer if after is not None else None
        if gone == come:
            return
        if gone is not None:
            patients = self.tends.get(gone)
            if patients is not None:
                patients.discard(cid)
                if not patients:
                    del self.tends[gone]
        if come is not None:
            self.tends.setdefault(come, set()).add(cid)

    def reset(self) -> None:
        """Forget what the last call saw (the next one works out everything)."""
        self.room = None
        self.chars = {}
        self.tends = {}
        self.combat = None
        self.seen = {}
        self.last = {}
        self.room_reads = {}
        self.actors = {}

    def inputs(self, c: Character) -> tuple[Any, ...]:
        """What the checks read of `c` (`_inputs`), worked out once per
        version of it: the key of its entries, equal while that is."""
        found = self.read.get(c.id)
        if found is None or found[0] is not c:
            found = self.read[c.id] = (c, _inputs(c))
        return found[1]  # type: ignore[return-value]

    def undo_of(self, actor: Actor, undo: UndoEntry | None) -> dict[str, Any]:
        """What `actor`'s undo would revert (`_undo`): the same object while
        it is the same."""
        if not actor.is_gm:
            undo = None  # refused whatever the log holds (authorize_undo)
        found = self.undos.get(actor.role)
        if found is None or (found[0] is not undo and found[0] != undo):
            found = self.undos[actor.role] = (undo, _undo(actor, undo))
        return found[1]

    def room_key(self, room: Room) -> Any:
        """What a room op's checks read: the characters (their number, who
        may join a combat: their conditions), the users, who is in the
        combat (not whose turn it is), the dice queue."""
        combat = None if self.combat is None else self.combat[0]
        return (self.generation, self.users_generation, combat, len(room.queued_rolls))


# The fields of a character that no affordance reads: not the checks (the
# hit points, the sheet: the rules read them when a command is applied, as
# its die roll), not authorize, not the views' level; the property tests
# (tests/rules/test_affordances.py) catch a check that starts reading one.
UNREAD = frozenset(
    {
        "pv",
        "pe",
        "pe_max_base",
        "level",
        "medicine",
        "abilities",
        "ability_damage",
        "stability_checks",
        "dying_next",
        "dying_fresh",
        "nonlethal",
        "regained_at",
    }
)
_READ = tuple(f.name for f in attrs.fields(Character) if f.name not in UNREAD)


def _inputs(c: Character | None) -> tuple[Any, ...] | None:
    """What the affordances read of a character (all but UNREAD)."""
    return None if c is None else tuple(getattr(c, name) for name in _READ)


# What an op's checks read, as a key (see RuleTable): the subject only...
def reads_subject(table: RuleTable, c: Character) -> Any:
    return table.inputs(c)


def reads_combat(table: RuleTable, c: Character) -> Any:
    """...the subject and the combat (T1: is there one, is it their turn)..."""
    combat = table.combat
    turn = None if combat is None else (bool(combat[0]) and combat[0][combat[1]] == c.id)
    return (table.inputs(c), turn)


def reads_rest(table: RuleTable, c: Character) -> Any:
    """...the subject, whether it is in the combat and whether it tends
    anyone (R4, L4)..."""
    combat = table.combat
    return (table.inputs(c), combat is not None and c.id in combat[0], c.id in table.tends)


def reads_everyone(table: RuleTable, c: Character) -> Any:
    """...or every character's condition and healer (a patient to choose)."""
    return (table.inputs(c), table.generation)


# The keys that read the combat: the entries redone when only it changed.
COMBAT_READS = (reads_combat, reads_rest)


@attrs.frozen
class _Scan:
    """One viewer's inputs: the room, the acting user, what they see, and
    the rule table shared by every viewer of this room version."""

    room: Room
    actor: Actor
    seen_ids: frozenset[str]  # the characters the viewer sees
    rules: RuleTable

    @property
    def all_seeing(self) -> bool:
        return self.actor.is_gm  # the GM sees every character (views)

    def scrub(self, reason: Reason) -> Reason:
        """A reason without naming a character the viewer does not see."""
        out = reason
        for key in CHAR_VALUES:
            cid = reason.get(key)
            if cid is not None and cid not in self.seen_ids:
                out = {**out, key: None}
        return out

    def adapt(self, entry: dict[str, Any], op: str, cid: str | None) -> dict[str, Any]:
        """The shared rule entry as this viewer gets it: choices among the
        characters they see, reasons that name nobody they do not, no die
        roll to supply unless GM (X1). The same object for the GM, and from
        one call to the next while nothing it depends on changed (the
        entry, and what the viewer sees: the same object while equal)."""
        if self.all_seeing:
            return entry
        key = (self.actor.user, op, cid)
        found = self.rules.adapted.get(key)
        if found is not None and found[0] is entry and found[1] is self.seen_ids:
            return found[2]
        out = self._adapt(entry, op)
        self.rules.adapted[key] = (entry, self.seen_ids, out)
        return out

    def _adapt(self, entry: dict[str, Any], op: str) -> dict[str, Any]:
        out = dict(entry)
        if "why" in out:
            out["why"] = self.scrub(out["why"])
        if "free" in out and "roll" in out["free"]:
            out["free"] = [n for n in out["free"] if n != "roll"]
            if not out["free"]:
                del out["free"]
        choices = out.get("choices")
        if choices:
            kept = {
                name: [v for v in values if v in self.seen_ids] if name in CHAR_CHOICES else values
                for name, values in choices.items()
            }
            for values in kept.values():
                if not values:  # nobody this viewer sees
                    return {"args": out["args"], "why": {"key": f"{op}_nobody"}}
            out["choices"] = kept
        if "refused" in out:
            out["refused"] = {
                name: {value: self.scrub(r) for value, r in no.items()}
                for name, no in out["refused"].items()
            }
        return out


# Choices that are character ids (filtered by what the viewer sees).
CHAR_CHOICES = ("patient", "order")


def _why(*checks: Callable[[], None]) -> Reason | None:
    """The first refusal among `checks` (run in order), as data, or None."""
    try:
        for check in checks:
            check()
    except Refused as refused:
        return refused.reason()
    return None


def _clean(spec: OpSpec, fixed: dict[str, Any]) -> dict[str, Any]:
    """Args as `check_args` would clean them: defaults, then the fixed ones."""
    return {name: arg.default for name, arg in spec.args.items()} | fixed


def _entry(
    spec: OpSpec,
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
    free = [n for n in spec.args if n not in fixed and n not in (choices or ())]
    if free:
        out["free"] = free
    if choices:
        out["choices"] = choices
    if refused:
        out["refused"] = refused
    if cost:
        out["cost"] = cost
    return out


# An offer computes one op's affordances for one viewer: {subject char id or None: entry}.
Offer = Callable[[_Scan, str, OpSpec], dict[str | None, dict[str, Any]]]


def subject(
    check: Callable[[Room, Actor, Character], None] | None = None,
    *,
    arg: str = "char",
    cost: Callable[[Character], dict[str, int]] | None = None,
    options: tuple[str, tuple[str, ...], Callable[[RuleTable, Room, Character, str], None]]
    | None = None,
    pair: tuple[str, Callable[[Room, Actor, Character, Character], None], str] | None = None,
    candidate: Callable[[Character], bool] | None = None,
    reads: Callable[[RuleTable, Character], Any] = reads_subject,
) -> Offer:
    """An op acting for one character (`arg`, the subject): offered under
    that character when the viewer may send it for them.

    `check(room, actor, c)`: the op's own preconditions on the subject.
    `options=(name, values, check)`: an argument of fixed values (a rest's
    kind), each checked with `check(table, room, c, value)`; refused ones
    come with their reason.
    `pair=(name, check, nobody)`: an argument naming another character
    (first aid's patient), each candidate checked with `check(room, actor,
    c, other)`; `nobody` is the reason key when no candidate is accepted.
    `candidate(other)`: a necessary condition of `check` on the other
    character alone (first aid's patient is dying): the characters passing
    it are found once per generation of the table (`RuleTable.pool`), so a
    200-character room checks each subject against the few candidates, not
    against all 200.
    `reads(table, c)`: the key of what the checks read (see `RuleTable`):
    the subject alone unless told.
    """

    def rule(table: RuleTable, room: Room, spec: OpSpec, c: Character) -> dict[str, Any]:
        """What the rules say of this op for `c`, whoever asks."""
        fixed = {arg: c.id}
        checks = [lambda: check_alive(spec, c)]
        if check is not None:
            checks.append(lambda: check(room, JUDGE, c))
        why = _why(*checks)
        if why is not None:
            return _entry(spec, fixed, why)
        choices: dict[str, list[Any]] = {}
        refused: dict[str, dict[str, Reason]] = {}
        if options is not None:
            name, values, check_option = options
            ok, no = [], {}
            for value in values:
                reason = _why(lambda: check_option(table, room, c, value))  # noqa: B023
                if reason is None:
                    ok.append(value)
                else:
                    no[value] = reason
            if not ok:  # refused whatever the choice: the first one's reason
                return _entry(spec, fixed, no[values[0]])
            choices[name] = ok
            if no:
                refused[name] = no
        if pair is not None:
            name, check_pair, nobody = pair
            ok = [
                o.id
                for o in (
                    room.ordered() if candidate is None else table.pool(room, nobody, candidate)
                )
                if _why(
                    lambda: check_alive(spec, o),  # noqa: B023
                    lambda: check_pair(room, JUDGE, c, o),  # noqa: B023
                )
                is None
            ]
            if not ok:
                return _entry(spec, fixed, {"key": nobody})
            choices[name] = ok
        return _entry(spec, fixed, None, choices, refused, None if cost is None else cost(c))

    def one(scan: _Scan, op: str, spec: OpSpec, c: Character) -> dict[str, Any] | None:
        """This viewer's entry for `c`, or None when it is not theirs to send."""
        room, actor = scan.room, scan.actor
        if not actor.is_gm:
            # authorize reads, of the op, its role; of the room, the owners
            # of the subject and of its healer (UNTEND): kept while they are.
            healer = room.characters.get(c.healer) if c.healer is not None else None
            owners = (c.owner, None if healer is None else healer.owner)
            who = (actor.user, spec.role, arg, c.id)
            found = scan.rules.allowed.get(who)
            if found is not None and found[0] == owners:
                ok = found[1]
            else:
                a = _clean(spec, {arg: c.id})
                ok = not _why(lambda: authorize(room, spec, a, actor, op))
                scan.rules.allowed[who] = (owners, ok)
            if not ok:
                return None  # not this viewer's to send: no button at all
        entry = scan.rules.entry(
            (op, c.id), reads(scan.rules, c), lambda: rule(scan.rules, room, spec, c)
        )
        return scan.adapt(entry, op, c.id)

    def offer(scan: _Scan, op: str, spec: OpSpec) -> dict[str | None, dict[str, Any]]:
        out: dict[str | None, dict[str, Any]] = {}
        for c in scan.room.ordered():
            if c.id not in scan.seen_ids:
                continue
            entry = one(scan, op, spec, c)
            if entry is not None:
                out[c.id] = entry
        return out

    offer.one = one  # type: ignore[attr-defined]
    offer.reads = reads  # type: ignore[attr-defined]
    return offer


def whole_room(
    check: Callable[[Room, Actor], None] | None = None,
    *,
    chars: tuple[str, Callable[[Room, Character], bool]] | None = None,
    users: tuple[str, Callable[[Room, str], None]] | None = None,
) -> Offer:
    """An op about the room as a whole (the GM's tools), offered in `room`.

    `chars=(name, keep)`: an argument listing characters (a combat order),
    offered as the characters `keep(room, c)` accepts; `users=(name,
    check)`: an argument naming a user, offered as the users `check` accepts.
    """

    def rule(room: Room, op: str, spec: OpSpec) -> dict[str, Any]:
        why = None
        if check is not None:
            why = _why(lambda: check(room, JUDGE))
        if spec.bounds is not None and why is None:
            bounds = spec.bounds
            why = _why(lambda: bounds(room, _clean(spec, {})))
        if why is not None:
            return _entry(spec, {}, why)
        choices: dict[str, list[Any]] = {}
        if chars is not None:
            name, keep = chars
            choices[name] = [c.id for c in room.ordered() if keep(room, c)]
        if users is not None:
            name, check_user = users
            choices[name] = [
                uid
                for uid in room.users
                if _why(lambda: check_user(room, uid)) is None  # noqa: B023
            ]
        for values in choices.values():
            if not values:
                return _entry(spec, {}, {"key": f"{op}_nobody"})
        return _entry(spec, {}, None, choices)

    def offer(scan: _Scan, op: str, spec: OpSpec) -> dict[str | None, dict[str, Any]]:
        room, actor = scan.room, scan.actor
        if _why(lambda: authorize(room, spec, _clean(spec, {}), actor, op)):
            return {}
        entry = scan.rules.entry(
            (op, None), scan.rules.room_key(room), lambda: rule(room, op, spec)
        )
        return {None: scan.adapt(entry, op, None)}

    offer.one = None  # type: ignore[attr-defined]
    offer.reads = None  # type: ignore[attr-defined]
    return offer


def _may_join(room: Room, c: Character) -> bool:
    return _ok(lambda: clock.check_may_join(c))


def _may_stay_or_join(room: Room, c: Character) -> bool:
    """set_order's combatants: those already in the order (the dead may
    stay), and anyone who may join."""
    return room.in_combat(c.id) or _may_join(room, c)


def _rolls_initiative(room: Room, c: Character) -> bool:
    if room.combat is None:
        return _may_join(room, c)
    return c.id in initiative.living_combatants(room)


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


def _check_rest(table: RuleTable, room: Room, c: Character, kind: str) -> None:
    """R1-R4 as `check_rest`, with the healers the table already keeps (not
    one scan of every character per character and kind)."""
    check_rest(room, c, kind, table.healers)


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
    "end_turn": subject(
        lambda room, actor, c: clock.check_end_turn(room, actor, c.id, None), reads=reads_combat
    ),
    "set_order": whole_room(
        lambda room, actor: clock.check_combat(
            room, "no combat is running: start one with combat_start"
        ),
        chars=("order", _may_stay_or_join),
    ),
    # T4: outside combat, the characters to start one with (those who may
    # join); in a combat, its living combatants (who roll by default).
    "roll_initiative": whole_room(
        lambda room, actor: initiative.check_someone_rolls(room),
        chars=("chars", _rolls_initiative),
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
        candidate=lambda o: o.condition == "dying",  # check_first_aid_patient's first test
        reads=reads_everyone,
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
        candidate=lambda o: o.condition == "stable",  # check_tend_patient's first test
        reads=reads_everyone,
    ),
    "untend": subject(lambda room, actor, c: stability.check_untend(c), arg="patient"),
    "rest": subject(options=("kind", REST_KINDS, _check_rest), reads=reads_rest),
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
        told = table.undo_of(actor, undo)
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
    allowed, per_char, owners_only = table.ops_for(actor)
    before = last["chars"] if last is not None else {}
    chars = {} if dirty is None else before
    if dirty is None:
        table.redone[viewer.user] = None
    else:
        table.redone[viewer.user] = dirty | table.partial
        for cid in table.partial:
            old = before.get(cid)
            if old is None or cid not in seen_ids:
                continue  # nothing this viewer may send for them
            c = room.characters[cid]
            turned = dict(old)
            for op, spec, one, combat in per_char:
                if combat and op in old:
                    entry = one(scan, op, spec, c)
                    if entry is not None:
                        turned[op] = entry
            turned = _same(old, turned)
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
                ops_of_c = [
                    (op, spec, one, combat)
                    for op, spec, one, combat in per_char
                    if one(scan, op, spec, c) is not None
                ]
                table.acts[(viewer.user, c.id)] = (owners, ops_of_c)
        for op, spec, one, _ in ops_of_c:
            entry = one(scan, op, spec, c)
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
        for op, spec in allowed:
            if not OFFERS[op].one:  # type: ignore[attr-defined]
                entry = OFFERS[op](scan, op, spec).get(None)
                if entry is not None:
                    ops[op] = entry
        table.room_reads[viewer.user] = room_reads
    told = table.undo_of(actor, undo)
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
