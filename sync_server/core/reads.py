"""What a room shows its viewers, read between batches: the welcome of a
join, the answer to `sync` (the patches a client missed, or a snapshot),
the history, each viewer's view of the state with what they may do, and
what is stored (`committed`, for readers outside the room's queue).

A viewer who does not see everything gets each patch as they may see it
(core/patch_view.py), from memory (core/recent.py: the last patches, with
the views stored with each version, so that patches loaded from the log
after a restart look as they did live). What each connected viewer may do
is kept current with every command (core/afford.py); a class is learnt
with a viewer's first view and forgotten when the last of its sessions
leaves (`left`).

`RoomReads` is the part of `RoomCore` (core/room.py) that answers these;
the state it reads is the core's, listed below.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import rules
from rules.model import ROLES as ROOM_ROLES
from sync_server.core.afford import AFFORDANCES, AffordanceCache, afford_class
from sync_server.core.batch import Batch
from sync_server.core.limits import Limits
from sync_server.core.outputs import Committed
from sync_server.core.patch_view import PatchView, RecentPatch
from sync_server.core.recent import RecentPatches
from sync_server.wire import protocol


class JoinRefused(Exception):
    """A hello that cannot join: `code` is the error code, `close` the close code."""

    def __init__(self, code: str, message: str, close: int) -> None:
        super().__init__(message)
        self.code, self.message, self.close = code, message, close


def history_entry(parts: RecentPatch, viewer: rules.Viewer | None) -> dict[str, Any] | None:
    """One kept patch as the history lists it for `viewer` (its version,
    sender and the events they may see), None when it has no event for them."""
    patch = parts[0]
    if viewer is not None and not viewer.sees_all:
        patch = PatchView(*parts).render(viewer)
    if not patch["events"]:
        return None
    return {"v": patch["v"], "by": patch["by"], "events": patch["events"]}


class RoomReads:
    """Answers the reads of a room (see the module docstring)."""

    # The room core's state (core/room.py sets it up).
    room_id: str
    room: rules.Room
    state: dict[str, Any]
    v: int
    undo: rules.UndoEntry | None
    epochs: dict[str, int]
    token_changes: dict[str, bytes | None]
    recent: RecentPatches[RecentPatch]
    afford: AffordanceCache | None
    limits: Limits
    loaded_v: int
    _batch: Batch | None
    _committed: tuple[dict[str, Any], int, dict[str, int]]

    def committed(self) -> Committed:
        """What is stored (state, version, epochs): what readers outside
        the room's queue see, never a version a failed commit could still
        take back."""
        return Committed(*self._committed)

    # --- what viewers may do --------------------------------------------------

    def affordances_of(self, viewer: rules.Viewer) -> dict[str, Any]:
        """What `viewer` may do now (rules/affordances.py); their class is
        kept current from now on, unless a batch is open."""
        cache = self.afford
        if cache is None:
            return rules.affordances(self.room, viewer, self.undo)
        return cache.of(self.room, self.undo, self.v, viewer, keep=self._batch is None)

    def forget_class(self, cls: Any) -> None:
        """No session of affordance class `cls` is open any more: its
        affordances are no longer kept current with every command (worked
        out again, whole, with its next view: `affordances_of`)."""
        if self.afford is not None and self._batch is None:
            self.afford.forget(cls)

    def left(self, user: str, connected: Iterable[str]) -> None:
        """A session of `user` left; `connected` are the users whose
        sessions are still open. The user's affordance class is forgotten
        only while none of its sessions is open (a player's own; the GMs'
        one class, while any GM is connected)."""
        cls = afford_class(self.viewer(user))
        if cls is None:
            return
        for other in connected:
            if afford_class(self.viewer(other)) == cls:
                return
        self.forget_class(cls)

    # --- views ------------------------------------------------------------

    def view(self, viewer: rules.Viewer | None, memo: Any = None) -> dict[str, Any]:
        """The state as `viewer` may see it, with what they may do now
        (`affordances`, unless Config.affordances is off); the state itself
        for None (the server's own reads). `memo` (rules.view.new_memo)
        shares status views between calls."""
        if viewer is None:
            return self.state
        seen = rules.view_state(self.state, viewer, memo)
        if self.afford is None:
            return seen
        return {**seen, AFFORDANCES: self.affordances_of(viewer)}

    def viewer(self, user: str) -> rules.Viewer | None:
        """Who `user` is, for views (None if no longer in the room)."""
        found = self.state["users"].get(user)
        return None if found is None else rules.Viewer(user, found["role"])

    def snapshot_key(self, viewer: rules.Viewer | None) -> Any:
        """Viewers with equal keys get equal snapshots of the room now: they
        see the same room (view class) and may do the same things
        (affordance class: players sharing the public view each have
        affordances of their own)."""
        cls = rules.view_class(self.state, viewer) if viewer is not None else None
        return (cls, afford_class(viewer) if self.afford is not None else None)

    # --- joins and sync ---------------------------------------------------

    def token_current(self, user: str, token_hash: bytes) -> bool:
        """Whether `token_hash`, found as `user`'s token by a lookup, is still
        theirs: no rotation or removal of it stored since this room loaded
        (the host looks it up again for a room loaded after the lookup)."""
        return self.token_changes.get(user, token_hash) == token_hash

    def join(
        self, user: str, since: int | None, token_hash: bytes | None = None
    ) -> tuple[dict[str, Any], str, int]:
        """A hello for this room: (the welcome frame, the user's role, its
        epoch), or JoinRefused when the user is not (any more) in the room,
        or when `token_hash` (the token the hello authenticated) is no
        longer the user's: a rotation stored between the hello's token
        lookup and its join ends that token, and its hello must not get the
        new epoch. The welcome carries the user's view of the room."""
        found = self.state["users"].get(user)
        stale = token_hash is not None and not self.token_current(user, token_hash)
        # A room's users are gm, player or observer (rules.model.ROLES):
        # a stored role outside them (`admin` above all, which would make the
        # session the server's admin) opens nothing, whatever put it there.
        role = found.get("role") if isinstance(found, dict) else None
        if role not in ROOM_ROLES or stale:
            raise JoinRefused(
                protocol.UNAUTHENTICATED, "bad token or room", protocol.CLOSE_UNAUTHENTICATED
            )
        viewer = rules.Viewer(user, role)
        items = None if since is None else self.patches_after(since, viewer)
        frame = protocol.welcome(
            self.room_id,
            user,
            viewer.role,
            self.v,
            state=self.view(viewer) if items is None else None,
            patches=items,
        )
        return frame, viewer.role, self.epochs.get(user, 0)

    def sync_reply(
        self, since: int, request_id: str | None = None, viewer: rules.Viewer | None = None
    ) -> dict[str, Any]:
        """The answer to `sync`: the patches after `since`, else a snapshot,
        as `viewer` may see them."""
        items = self.patches_after(since, viewer)
        if items is None:
            return protocol.snapshot(self.v, self.view(viewer), request_id)
        return protocol.patches(items, request_id)

    def patches_after(
        self, since: int, viewer: rules.Viewer | None = None
    ) -> list[dict[str, Any]] | None:
        """Every patch after `since`, from memory, or None when the client
        needs the state instead (ahead of the room, too far behind, or older
        than what memory holds: one snapshot costs less than a replay). A
        viewer who does not see everything gets each patch as they may see
        it (its own commands' ids only; patches loaded from the log too:
        their views are stored)."""
        if since == self.v:
            if viewer is not None and self.afford is not None:
                # Kept current from now on, if it was not: the client holds
                # what it may do at this version (every view carries it).
                self.affordances_of(viewer)
            return []
        if since < 0 or since > self.v or self.v - since > self.limits.max_resume_patches:
            return None
        kept = self.recent.after(since)
        if kept is None:
            return None
        if viewer is None or (viewer.sees_all and self.afford is None):
            return [patch for patch, _, _ in kept]
        views = [PatchView(*parts) for parts in kept]
        if any(view.needs_snapshot(viewer) for view in views):
            return None  # a version whose view of theirs was not rendered
        out = [view.render(viewer) for view in views]
        if self.afford is not None and out and not self._kept_since(viewer, since):
            # Patches from the log carry no affordance ops, nor patches
            # made while the viewer's class was not kept current (no
            # session of it open): the last one sets what the viewer
            # may do now, whole.
            last = out[-1]
            op = ["set", [AFFORDANCES], self.affordances_of(viewer)]
            out[-1] = {**last, "ops": [*last["ops"], op]}
        return out

    def _kept_since(self, viewer: rules.Viewer, since: int) -> bool:
        """Whether every patch after `since` carries the ops on `viewer`'s
        affordances: none from the log, and its class kept current since."""
        if since < self.loaded_v:
            return False
        assert self.afford is not None
        return self.afford.kept_since(viewer, since, self.v)

    # --- history ----------------------------------------------------------

    def history(self, limit: int, viewer: rules.Viewer | None = None) -> list[dict[str, Any]]:
        """The events of the last `limit` patches in memory that have some
        for `viewer`, oldest first, each with its version and sender: what
        a client's log shows. A viewer who does not see everything gets
        each patch's events as they may see them (as `patches_after` does)."""
        load = self.recent.load
        entries = (history_entry(load(blob), viewer) for blob in self.history_picks(limit, viewer))
        return [e for e in entries if e is not None]

    def history_picks(self, limit: int, viewer: rules.Viewer | None = None) -> list[bytes]:
        """The versions `history` lists, oldest first, as the blobs the room
        keeps of them (core/recent.py): what a reader of a long history
        holds while its answer is written, slice by slice, each entry made
        again then (`history_entry`): a blob is shared with the room and far
        smaller than its entry (500 entries of a big room's century advances
        were 26 MB of JSON, more as Python objects, per unread answer)."""
        picked: list[bytes] = []
        v: int | None = self.v
        while v is not None and len(picked) < limit:
            found, v = self.history_scan(v, limit - len(picked), viewer)
            picked += found
        picked.reverse()
        return picked

    def history_scan(
        self, v: int, want: int, viewer: rules.Viewer | None, budget: int | None = None
    ) -> tuple[list[bytes], int | None]:
        """`history_picks` in steps: from version `v` down, the blobs of up
        to `want` versions with events for `viewer` (newest first), looking
        at blobs of `budget` bytes in all at most (an unpickling's cost
        follows its size; None: no bound), and the version to go on from
        (None: no older one held). A step is one item of the room's queue:
        a history of 500 big versions, looked at whole, was one item of
        ~250 ms that every other room waited behind."""
        picked: list[bytes] = []
        seen = 0
        while len(picked) < want and (budget is None or seen < budget):
            blob = self.recent.blob(v)
            if blob is None:
                return picked, None
            seen += len(blob)
            if history_entry(self.recent.load(blob), viewer) is not None:
                picked.append(blob)
            v -= 1
        return picked, v
