"""The affordances' memory between room versions: `RuleTable`.

What the rules say of each (op, subject) is the same for every viewer of a
room version (the checks run as `JUDGE`; each viewer then gets their own
reading of it: rules/offers.py), and most of it is the same from one
version to the next: a command changes a few characters. The server keeps
one table per room and hands it each version; the table works out which
characters' entries may have changed (`RuleTable.begin`) and keeps every
other entry as the very same object, so that a command costs what it
changed, not what the room holds, and the server's diff of two viewers'
affordances skips what is unchanged at once.

Each op's offer says what its checks read beyond the subject (`reads`, in
`rules.op.Subject`); `READS` turns that into the key an entry is kept under.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection
from typing import Any

import attrs

from rules.context import Actor
from rules.model import Character, Room
from rules.op import Facts
from rules.view import Viewer

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

    # Each (op, subject)'s entry with what its checks read, and the ones
    # before (`entry`).
    entries: dict[Any, tuple[Any, dict[str, Any], Any, dict[str, Any]]] = attrs.Factory(dict)
    # Each viewer's version of an entry, by (user, op, subject): (the
    # entry, what the viewer saw, their version), and the one before
    # (`_Scan.adapt`, as `entry`).
    adapted: dict[Any, tuple[Any, ...]] = attrs.Factory(dict)
    # What the last call saw, to tell what changed since.
    room: Room | None = None
    # What the checks read of it, as `JUDGE` (with the healers kept here):
    # made when an entry is worked out (`facts`), not at every call.
    _facts: Facts | None = None
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
    undos: dict[str, tuple[Any, dict[str, Any]]] = attrs.Factory(dict)
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
    # The players whose affordances may differ from their last ones at this
    # call (`begin`), or None: any viewer's may. See `concerned`.
    concerned: frozenset[str | None] | None = None

    def forget(self, user: Any) -> None:
        """A viewer the caller left out of a call (the server skips players
        waiting for a snapshot): what was kept of them is older than the
        last call's changes, so their next call works everything out."""
        for kept in (self.last, self.seen, self.room_reads, self.redone):
            kept.pop(user, None)

    @property
    def facts(self) -> Facts:
        """What the checks read of the room the last call saw, as `JUDGE`."""
        found = self._facts
        if found is None or found.room is not self.room:
            assert self.room is not None
            found = self._facts = Facts(self.room, JUDGE, self.healers)
        return found

    @property
    def healers(self) -> Collection[str]:
        """The characters tending someone."""
        return self.tends.keys()

    def actor(self, viewer: Viewer) -> Actor:
        """`viewer` as the actor their commands would come from."""
        found = self.actors.get(viewer.user)
        if found is None or found.role != viewer.role:
            found = self.actors[viewer.user] = Actor(viewer.user, viewer.role)  # type: ignore[arg-type]
        return found

    def entry(self, key: Any, reads: Any, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The rule entry `key` (op, subject) for what its checks read
        (`reads`): kept while that is equal, and the one before it too, so
        that an input that comes back (whose turn it is: T1, every round)
        gives back the very same entry, not one worked out again."""
        found = self.entries.get(key)
        if found is None:
            out = make()
            self.entries[key] = (reads, out, _NOTHING, out)
            return out
        if found[0] is reads or found[0] == reads:
            return found[1]
        if found[2] is reads or found[2] == reads:
            self.entries[key] = (reads, found[3], found[0], found[1])
            return found[3]
        out = make()
        self.entries[key] = (reads, out, found[0], found[1])
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
        # What a viewer sees of a character reads its owner and `shown`
        # (rules/view.py's level): when one changes, any viewer's may.
        seen_moved = False
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
            if before is not None and after is not None and before.owner != after.owner:
                seen_moved = True
                if dirty is not None and cid in self.tends:
                    dirty |= self.tends[cid]  # untend: authorize reads the healer's owner
            elif before is not None and after is not None and before.shown != after.shown:
                seen_moved = True
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
        room_before, self.room_now = self.room_now, self.room_key(room)
        if dirty is None or seen_moved or self.room_now != room_before:
            self.concerned = None
        else:
            self.concerned = self._owners(room, dirty | partial)

    def _owners(self, room: Room, cids: Collection[str]) -> frozenset[str | None]:
        """The players whose affordances may change when only the entries of
        `cids` may (and nobody's view of them, nor the room's entries):
        a player may send nothing for a character that neither they nor its
        healer's owner own (authorize: every per-character op of a player is
        an owner's, OWNER_OR_GM or UNTEND, `PLAYERS_OWN_ONLY`), so no other
        player has an entry of theirs to change. The GMs have every
        character's: they are always concerned by a change."""
        chars = room.characters
        owners: set[str | None] = set()
        for cid in cids:
            c = chars.get(cid)
            if c is None:
                continue
            owners.add(c.owner)
            if c.healer is not None:
                healer = chars.get(c.healer)
                if healer is not None:
                    owners.add(healer.owner)
        return frozenset(owners)

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
        self.room_now = None
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

    def room_key(self, room: Room) -> Any:
        """What a room op's checks read: the characters (their number, who
        may join a combat: their conditions), the users, who is in the
        combat (not whose turn it is), the dice queue."""
        combat = None if self.combat is None else self.combat[0]
        return (self.generation, self.users_generation, combat, len(room.queued_rolls))


# What no entry's checks read (`RuleTable.entry` before its second one).
_NOTHING = object()


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
_read = operator.attrgetter(*_READ)  # one C call, not a getattr per field


def _inputs(c: Character | None) -> tuple[Any, ...] | None:
    """What the affordances read of a character (all but UNREAD)."""
    return None if c is None else _read(c)


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


# What an op's offer says its checks read (`rules.op.Subject.reads`), as the
# function giving the key its entries are kept under.
READS: dict[str, Callable[[RuleTable, Character], Any]] = {
    "subject": reads_subject,
    "combat": reads_combat,
    "rest": reads_rest,
    "everyone": reads_everyone,
}

# The keys that read the combat: the entries redone when only it changed.
COMBAT_READS = (reads_combat, reads_rest)
