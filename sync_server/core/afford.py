"""What each viewer may do, kept current with every command: the room
core's affordance cache.

Viewers with equal affordance classes (`afford_class`: every GM; each
player) may do the same things. The cache keeps, for each class of which
a session is open, its affordances at the room's current version (`kept`),
and works out after each command the ops that bring each class's to the
next (`after`: a patch carries them to that class's viewers, see
core/patch_view.py). The rules' answers are kept between commands in a
`rules.RuleTable`, so a command costs the characters it changed, not the
room's size. A class is known from its first view (`of`: a welcome, a
snapshot) until its last session leaves (`forget`), so the room's
registered players who are not connected cost no command anything.

The room core (core/room.py) owns when: it calls `after` with each
command, sets `kept` once the command can no longer fail (and back on a
rollback), and learns or forgets classes only between batches.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import rules

AFFORDANCES = "affordances"  # the key of a viewer's affordances in their view


def afford_class(viewer: rules.Viewer | None) -> Any:
    """Viewers with equal keys may do the same things (rules/affordances.py):
    every GM; each player (what they may do follows what they own);
    observers and admins send nothing, so their affordances never change
    (None: no patch ever carries ops for them)."""
    if viewer is None:
        return None
    if viewer.role == "gm":
        return "gm"
    if viewer.role == "player":
        return ("player", viewer.user)
    return None


def afford_diff(
    old: dict[str, Any] | None, new: dict[str, Any], redone: Collection[str] | None = None
) -> list[Any]:
    """The patch ops from one viewer's affordances to the next: the parts
    the rules kept (rules.RuleTable: the same objects) are skipped at once,
    and with `redone` (the characters the rules worked out again, the
    others kept: RuleTable.redone) no other character is looked at, so a
    command costs the characters it changed, not the room's size."""
    if old is None:
        return [["set", [AFFORDANCES], new]]
    if old is new:
        return []
    ops: list[Any] = []
    if old["room"] is not new["room"]:
        ops += rules.diff(old["room"], new["room"], (AFFORDANCES, "room"))
    if old["undo"] is not new["undo"] and old["undo"] != new["undo"]:
        # What an undo would revert (the GM's moves at nearly every
        # command): one op, whole, rather than a diff of its few keys.
        ops.append(["set", [AFFORDANCES, "undo"], new["undo"]])
    before, after = old["chars"], new["chars"]
    if before is not after:
        if len(after) * 2 < len(before):
            return [*ops, ["set", [AFFORDANCES, "chars"], after]]
        if redone is None:
            redone = after.keys() | before.keys()
        for cid in redone:
            was, entry = before.get(cid), after.get(cid)
            if was is entry:
                continue
            if entry is None:
                ops.append(["del", [AFFORDANCES, "chars", cid]])
            elif was is None:
                ops.append(["set", [AFFORDANCES, "chars", cid], entry])
            else:
                ops += rules.diff(was, entry, (AFFORDANCES, "chars", cid))
    return ops


class AffordanceCache:
    """Each known affordance class's affordances at the room's current
    version (`kept`), the version since which each has been kept current,
    and the rules' answers kept between commands."""

    def __init__(self, room_id: str, check_invariants: bool = False) -> None:
        self.room_id = room_id
        self.check_invariants = check_invariants
        # Only the classes of viewers who were shown the room (a welcome, a
        # snapshot) are kept current (`after`), until the last of their
        # sessions leaves (`forget`).
        self.kept: dict[Any, dict[str, Any]] = {}
        # The version since which each known class has been kept current: a
        # resume from before it gets what the class may do now, whole.
        self._known_at: dict[Any, int] = {}
        # The rules' answers kept between commands (a cache: rules.RuleTable).
        self._table = rules.RuleTable()
        self._classes_of: tuple[Any, dict[Any, rules.Viewer], dict[str, Any]] | None = None
        # Whether the table's last answer of every known class is its kept
        # one (not so after a rollback): only then may `after` skip a class.
        self._synced = False

    def _classes(self, room: rules.Room) -> tuple[dict[Any, rules.Viewer], dict[str, Any]]:
        """One viewer per affordance class of the room's users (the first
        GM for the GMs'), and each GM's or player's class by user, worked
        out again only when the users change (the same `room.users` object
        while they do not)."""
        cached = self._classes_of
        if cached is not None and cached[0] is room.users:
            return cached[1], cached[2]
        found: dict[Any, rules.Viewer] = {}
        of_user: dict[str, Any] = {}
        for uid, user in room.users.items():
            if user.role not in ("gm", "player"):  # observers (and a stored role
                continue  # outside a room's: such a user can never join)
            viewer = rules.Viewer(uid, user.role)
            cls = afford_class(viewer)
            of_user[uid] = cls
            if cls is not None and cls not in found:
                found[cls] = viewer
        self._classes_of = (room.users, found, of_user)
        return found, of_user

    def _check(
        self,
        room: rules.Room,
        viewer: rules.Viewer,
        undo: rules.UndoEntry | None,
        got: dict[str, Any],
    ) -> None:
        """With `check_invariants` (every server test): the rule table's
        kept answer equals a fresh one, whatever path reached it."""
        if self.check_invariants and got != rules.affordances(room, viewer, undo):
            raise RuntimeError(f"room {self.room_id}: {viewer.user}'s kept affordances differ")

    def after(
        self,
        old_room: rules.Room,
        room: rules.Room,
        undo: rules.UndoEntry | None,
        unrendered: frozenset[Any] = frozenset(),
        touched: frozenset[str] | None = None,
    ) -> tuple[dict[Any, dict[str, Any]], dict[Any, list[Any]]]:
        """The affordances after a command (from `old_room`, the room now,
        to `room`), and the ops that bring each class's from the kept ones
        to them (only classes that change). Nothing is kept yet: the core
        sets `kept` to them once the command can no longer fail.

        Only the classes known now are worked out, less `unrendered` (the
        players whose view of this version was not rendered): a class is
        left unknown while every session of it waits for a snapshot (or
        none is open), and `of` works it out again when one is
        sent (a snapshot, a welcome). So a century advance that concerns
        98 players works out the affordances of the few it renders, not of
        99 classes in one go. Observers' never change: not kept.

        Of the known classes, only those the rules say may change are asked
        (`rules.affordances_begin`: the GMs', and the players owning a
        character whose entries may change): a heal, a minute of clock or
        an end of turn costs the classes it concerns, not every connected
        one. Every class is asked when the rules cannot tell, or after a
        rollback (`restore`: the table saw versions the kept answers did
        not)."""
        table = self._table
        classes, class_of = self._classes(room)
        since = None if touched is None else (old_room, touched)
        try:
            concerned = rules.affordances_begin(room, table, since)
            if concerned is None or not self._synced:
                return self._ask_all(room, undo, unrendered, classes)
            current = self.kept
            after = dict(current)
            for cls in unrendered:
                if after.pop(cls, None) is not None:
                    table.forget(classes[cls].user)
            asked = {"gm"} if "gm" in after else set()
            for user in concerned:
                cls = class_of.get(user) if user is not None else None
                if cls is not None and cls in after:
                    asked.add(cls)
            ops: dict[Any, list[Any]] = {}
            for cls in asked:
                self._ask(room, undo, cls, classes[cls], current.get(cls), after, ops)
            if self.check_invariants:  # the classes not asked too: the shortcut's guard
                for cls, now in after.items():
                    self._check(room, classes[cls], undo, now)
            return after, ops
        except BaseException:
            # The table may have moved for some classes and not others: it
            # starts again (the next command works every class out).
            self._table = rules.RuleTable()
            self._synced = False
            raise

    def _ask_all(
        self,
        room: rules.Room,
        undo: rules.UndoEntry | None,
        unrendered: frozenset[Any],
        classes: dict[Any, rules.Viewer],
    ) -> tuple[dict[Any, dict[str, Any]], dict[Any, list[Any]]]:
        """Every known class asked (see `after`); the table forgets the
        others (its kept entries of them would go stale)."""
        current = self.kept
        table = self._table
        after: dict[Any, dict[str, Any]] = {}
        ops: dict[Any, list[Any]] = {}
        for cls, viewer in classes.items():
            if cls in current and cls not in unrendered:
                self._ask(room, undo, cls, viewer, current[cls], after, ops)
            else:
                table.forget(viewer.user)
        self._synced = True
        return after, ops

    def _ask(
        self,
        room: rules.Room,
        undo: rules.UndoEntry | None,
        cls: Any,
        viewer: rules.Viewer,
        old: dict[str, Any] | None,
        after: dict[Any, dict[str, Any]],
        ops: dict[Any, list[Any]],
    ) -> None:
        """Class `cls`'s affordances now into `after`, and the ops from its
        kept ones (`old`) into `ops` when they changed."""
        table = self._table
        # What the table gave the viewer last: when that is what the room
        # holds now (not so after a rollback), its `redone` says which
        # characters a diff need look at.
        was = table.last.get(viewer.user)
        now = rules.affordances_of(room, viewer, undo, table)
        after[cls] = now
        self._check(room, viewer, undo, now)
        if old is now:
            return  # the rules kept it whole: nothing to send
        redone = table.redone.get(viewer.user) if was is old else None
        changed = afford_diff(old, now, redone)
        if changed:
            ops[cls] = changed

    def restore(self, kept: dict[Any, dict[str, Any]]) -> None:
        """A rollback: the affordances kept before the batch. The rule
        table saw the batch's versions: the next command asks every class
        (`after`)."""
        self.kept = kept
        self._synced = False

    def of(
        self,
        room: rules.Room,
        undo: rules.UndoEntry | None,
        v: int,
        viewer: rules.Viewer,
        keep: bool,
    ) -> dict[str, Any]:
        """What `viewer` may do in `room` (at version `v`): the kept
        answer of their class, else worked out, and with `keep` (no batch
        open) kept current from now on."""
        cls = afford_class(viewer)
        kept = self.kept
        if cls in kept:
            return kept[cls]
        table = self._table
        # A class not kept current: what the table holds of it (and of the
        # viewer standing for it in `after`) is older than its changes.
        table.forget(viewer.user)
        stands = self._classes(room)[0].get(cls)
        if stands is not None:
            table.forget(stands.user)
        if table.room is room:
            # The table's last call saw this room: nothing changed since for
            # the viewers it keeps, so it may answer this one (its shared
            # entries: a snapshot after a century advance, for each of 98
            # players, reuses what the others' worked out).
            found = rules.affordances_for(room, [viewer], undo, table)[0]
            self._check(room, viewer, undo, found)
        else:  # after a rollback: the table saw a room since undone
            found = rules.affordances(room, viewer, undo)
        if cls is not None and keep:
            # Known again from now on (see `after`): its sessions get it
            # whole with this view, and diffs of it after.
            self.kept = {**kept, cls: found}
            self._known_at[cls] = v
        return found

    def forget(self, cls: Any) -> None:
        """No session of affordance class `cls` is open any more: its
        affordances are no longer kept current with every command (worked
        out again, whole, with its next view: `of`). Only between batches."""
        if cls in self.kept:
            self.kept = {k: a for k, a in self.kept.items() if k != cls}
            self._known_at.pop(cls, None)
            cached = self._classes_of
            if cached is not None and cls in cached[1]:
                self._table.forget(cached[1][cls].user)

    def kept_since(self, viewer: rules.Viewer, since: int, v: int) -> bool:
        """Whether `viewer`'s class has been kept current since version
        `since` (the room at `v`): every patch after it carries the ops on
        what they may do."""
        cls = afford_class(viewer)
        if cls is None:
            return True  # observers and admins: nothing they may do changes
        return cls in self.kept and self._known_at.get(cls, v + 1) <= since
