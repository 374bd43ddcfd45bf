"""This module owns a room's state machine: state, version, dedup window,
session epochs, and the batch of commands not yet stored.

Sans-I/O, as python-websockets' `Protocol` is: commands go in
(`evaluate`), decisions come out (the reply for the sender, the version
record to store, the patch to publish once stored, the sessions to close),
and the caller does all the I/O. No asyncio, no sockets, no storage calls;
the dice, the wall clock and the token source are injected. So a unit test
drives a room with plain data and chooses every roll, in microseconds.

Transactions. Commands are evaluated into an open batch: each accepted one
moves the in-memory room to its next version at once (the next command of
the batch builds on it), and its record joins `pending`. The caller stores
the whole batch, then calls `commit()`; if storing failed (or anything
else went wrong before the commit), `rollback()` puts the room back exactly
as it was before the batch (state, version, dedup window, epochs) and turns
every decision that depended on the batch into an `internal` error. Memory
never runs ahead of storage, whatever fails.

The core decides no game rule: the rules engine does (`rules.apply`,
`rules.revert`); the core turns its outcome into versions, patches and
effects.
"""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Protocol

import attrs

import rules
from rules.model import ROLES as ROOM_ROLES
from sync_server.core.auth import RecentTokens, hash_token
from sync_server.core.limits import PATCH_SIZE_CHECK_ITEMS, Limits
from sync_server.storage import LoadedRoom, UndoTarget, VersionRecord
from sync_server.wire import protocol
from sync_server.wire.codec import CODECS

log = logging.getLogger(__name__)

NO_EXPECT = protocol.NO_EXPECT
JSON_CODEC = CODECS[protocol.JSON]  # the larger encoding: what the size bound measures
UNKNOWN = object()  # how viewers see a patch loaded from the log: not known


class JoinRefused(Exception):
    """A hello that cannot join: `code` is the error code, `close` the close code."""

    def __init__(self, code: str, message: str, close: int) -> None:
        super().__init__(message)
        self.code, self.message, self.close = code, message, close


@attrs.frozen
class CommandIn:
    """One authenticated `cmd`, as the core sees it: who sent it (and under
    which epoch of their token), its id, op, args and `expect`."""

    actor: rules.Actor
    epoch: int
    cmd_id: str
    op: Any
    args: Any
    expect: Any = NO_EXPECT


@attrs.frozen(eq=False)
class PatchView:
    """How one patch looks to each viewer (per-role views, rules/view.py):
    viewers are grouped by `key` (their view class for this patch; None for
    those who see everything), each group's patch built once. Only made for
    a patch the rules call `restricted`: any other one is the same for all."""

    before: dict[str, Any]
    after: dict[str, Any]
    patch: dict[str, Any]

    def key(self, viewer: rules.Viewer) -> Any:
        if viewer.sees_all:
            return None
        return rules.patch_class(self.before, self.after, viewer)

    def render(self, viewer: rules.Viewer) -> dict[str, Any]:
        p = self.patch
        ops, events = rules.view_patch(self.before, self.after, p["ops"], p["events"], viewer)
        return {**p, "ops": ops, "events": events}


@attrs.frozen
class Decision:
    """What one evaluated command produces. `reply` goes to the sender only
    (after `patch` reaches everyone); `record` is stored before either is
    sent; `closes` are users whose sessions end (4403) once it is stored.
    `pending`: the decision depends on the open batch's commit (an accepted
    command, or a retry of one accepted earlier in the same batch)."""

    reply: dict[str, Any]
    outcome: str  # "ok", "dup", or the error code
    record: VersionRecord | None = None
    patch: dict[str, Any] | None = None
    closes: tuple[str, ...] = ()
    pending: bool = False
    # Set when not every viewer may see the patch whole (see PatchView).
    view: PatchView | None = None


def refusal(cmd_id: str | None, code: str, message: str) -> Decision:
    return Decision(protocol.error(code, message, cmd_id), code)


def internal(
    cmd_id: str | None, message: str = "the server could not store this command; retry"
) -> Decision:
    return refusal(cmd_id, "internal", message)


class LogReader(Protocol):
    """What undo needs of the stored log, read synchronously: the host
    fetches it before the undo is evaluated (`RoomHost`), tests give it as
    data (`StaticLog`)."""

    def undo_target(self) -> UndoTarget | None:
        """The latest undoable version not yet undone, or None."""
        ...


@attrs.frozen
class StaticLog:
    """A `LogReader` over a value fetched beforehand."""

    target: UndoTarget | None = None

    def undo_target(self) -> UndoTarget | None:
        return self.target


@attrs.define
class _Batch:
    """What `rollback` restores, and what `commit` finalizes."""

    room: rules.Room
    state: dict[str, Any]
    v: int
    epochs: dict[str, int]
    records: list[VersionRecord] = attrs.Factory(list)
    patches: list[tuple[dict[str, Any], PatchView | None]] = attrs.Factory(list)
    dedup_keys: list[tuple[str, str]] = attrs.Factory(list)
    tokens: list[tuple[tuple[str, str, str], str]] = attrs.Factory(list)


class RoomCore:
    """A loaded room's state machine (see the module docstring)."""

    def __init__(
        self,
        loaded: LoadedRoom,
        *,
        dice: rules.Dice,
        wall_clock: Callable[[], float],
        new_token: Callable[[], str],
        recent_tokens: RecentTokens,
        limits: Limits | None = None,
        check_invariants: bool = False,
    ) -> None:
        self.limits = limits or Limits()
        self.room_id = loaded.room
        self.state: dict[str, Any] = loaded.state
        self.room = rules.Room.from_dict(loaded.state)
        self.v = loaded.v
        self.recent: deque[dict[str, Any]] = deque(
            (p.frame() for p in loaded.recent), maxlen=self.limits.recent_patches_in_memory
        )
        # Beside each recent patch, how viewers see it: None when everyone
        # sees it whole, its PatchView when not, UNKNOWN for patches loaded
        # from the log (their states before and after are not at hand): a
        # player or observer resuming over one of those gets a snapshot of
        # their view instead.
        self.recent_views: deque[PatchView | object | None] = deque(
            (UNKNOWN for _ in loaded.recent), maxlen=self.limits.recent_patches_in_memory
        )
        self.dedup: OrderedDict[tuple[str, str], tuple[int, dict[str, Any]]] = OrderedDict(
            ((d.user, d.cmd_id), (d.v, d.result)) for d in loaded.dedup
        )
        # Bumped when a user's sessions must end (token rotated, user
        # removed): sessions opened under an older epoch may not send
        # commands any more, even before their socket is closed.
        self.epochs: dict[str, int] = {}
        # Token hashes changed since the room was loaded (rotate_token,
        # add_user: the new hash; remove_user: None), once committed: a
        # hello that authenticated a token before its rotation was stored
        # must not join after it with the new epoch (`join`).
        self.token_changes: dict[str, bytes | None] = {}
        self.dice = dice
        self.wall_clock = wall_clock
        self.new_token = new_token
        self.recent_tokens = recent_tokens
        self.check_invariants = check_invariants
        self._batch: _Batch | None = None

    # --- the batch ------------------------------------------------------------

    @property
    def base_v(self) -> int:
        """The stored head: the version the open batch builds on."""
        return self._batch.v if self._batch is not None else self.v

    @property
    def pending(self) -> list[VersionRecord]:
        """The open batch's records, to store before anything is sent."""
        return list(self._batch.records) if self._batch is not None else []

    def snapshot_due(self) -> tuple[int, dict[str, Any]] | None:
        """A full snapshot to store with the batch, every
        `snapshot_every_versions` versions (bounds a restart's replay)."""
        every = self.limits.snapshot_every_versions
        if self._batch is not None and self.v // every > self._batch.v // every:
            return (self.v, self.state)
        return None

    def _open(self) -> _Batch:
        if self._batch is None:
            self._batch = _Batch(self.room, self.state, self.v, dict(self.epochs))
        return self._batch

    def commit(self) -> None:
        """The batch is stored: keep it, make its patches resumable, and
        trim the dedup window."""
        batch = self._batch
        if batch is None:
            return
        self._batch = None
        for patch, view in batch.patches:
            self.recent.append(patch)
            self.recent_views.append(view)
        for key, token in batch.tokens:
            self.recent_tokens.remember(key, "token", token)
        for record in batch.records:
            for user, token_hash in record.token_set:
                self.token_changes[user] = token_hash
            for user in record.token_del:
                self.token_changes[user] = None
        window = self.limits.dedup_window_versions
        while self.dedup:
            first = next(iter(self.dedup.values()))
            if first[0] > self.v - window:
                break
            self.dedup.popitem(last=False)

    def rollback(self, decisions: list[Decision]) -> list[Decision]:
        """The batch could not be stored: restore the room as it was before
        it, and return `decisions` with every pending one turned into an
        `internal` error (its command is not stored; a retry runs again)."""
        batch = self._batch
        if batch is not None:
            self._batch = None
            self.room, self.state, self.v, self.epochs = (
                batch.room,
                batch.state,
                batch.v,
                batch.epochs,
            )
            for key in batch.dedup_keys:
                self.dedup.pop(key, None)
        return [internal(d.reply.get("id")) if d.pending else d for d in decisions]

    # --- commands -------------------------------------------------------------

    def evaluate(self, c: CommandIn, reader: LogReader | None = None) -> Decision:
        """Evaluate one command into the open batch (opening one if needed).
        Never raises: an unexpected failure is an `internal` refusal that
        leaves the room as it was before this command."""
        batch = self._open()
        try:
            if c.op == "undo":
                return self._evaluate_undo(c, batch, reader)
            return self._evaluate(c, batch)
        except Exception:
            log.exception("room %s: failed to evaluate %r", self.room_id, c.op)
            return internal(c.cmd_id, "the server failed on this command; retry")

    def _prelude(self, c: CommandIn, batch: _Batch) -> Decision | None:
        """Checks before the rules: a known id answers with its first ack
        (PROTOCOL.md: dedup comes first, `expect` is checked after it), and
        a session whose token was rotated or whose user was removed is done."""
        key = (c.actor.user, c.cmd_id)
        entry = self.dedup.get(key)
        if entry is not None:
            v, result = entry
            result = dict(result)
            remembered = self.recent_tokens.recall((self.room_id, c.actor.user, c.cmd_id))
            if remembered is None:  # a retry within the batch that issued it
                remembered = next((("token", t) for k, t in batch.tokens if k[1:] == key), None)
            if remembered is not None:
                result[remembered[0]] = remembered[1]
            return Decision(
                protocol.ack(c.cmd_id, result, v=v, dup=True),
                "dup",
                pending=key in batch.dedup_keys,
            )
        if c.actor.user not in self.room.users or self.epochs.get(c.actor.user, 0) != c.epoch:
            return refusal(
                c.cmd_id, "forbidden", "this session's user was removed or its token rotated"
            )
        return None

    def _expect_error(self, c: CommandIn) -> tuple[str, str] | None:
        if c.expect is NO_EXPECT:
            return None
        e = c.expect
        if type(e) is not int or e < 0:
            return ("invalid_args", "expect must be a version number (an integer >= 0)")
        if e != self.v:
            return ("conflict", f"the room is at version {self.v}, not {e}")
        return None

    def _evaluate(self, c: CommandIn, batch: _Batch) -> Decision:
        early = self._prelude(c, batch)
        if early is not None:
            return early
        expect_err = self._expect_error(c)
        if isinstance(c.op, str) and c.op in rules.ADMIN_OPS:
            return refusal(c.cmd_id, "forbidden", f"{c.op} needs an admin session")
        try:
            out = rules.apply(self.room, c.op, c.args, c.actor, self.dice)
        except rules.Refused as refused:
            err = protocol.earliest((refused.code, refused.message), expect_err)
            assert err is not None
            return refusal(c.cmd_id, *err)
        if expect_err is not None:
            return refusal(c.cmd_id, *expect_err)
        # Incremental: unchanged characters keep their old dict objects, so
        # `diff` skips them by identity (the state dicts are never mutated).
        new_state = out.room.to_dict(since=(self.room, self.state))
        if self.check_invariants:
            broken = rules.violations(out.room)
            if broken:
                log.error("room %s: %s broke invariants: %s", self.room_id, c.op, broken)
                return refusal(c.cmd_id, "internal", "the command would break an invariant")
        result = dict(out.result)
        ack_result = dict(result)
        token_set: list[tuple[str, bytes]] = []
        token_del: list[str] = []
        closes: list[str] = []
        epochs = dict(self.epochs)
        tokens: list[tuple[tuple[str, str, str], str]] = []
        for effect in out.effects:
            if isinstance(effect, rules.IssueToken):
                token = self.new_token()
                token_set.append((effect.user, hash_token(token)))
                ack_result["token"] = token
                tokens.append(((self.room_id, c.actor.user, c.cmd_id), token))
            elif isinstance(effect, rules.RevokeToken):
                token_del.append(effect.user)
            elif isinstance(effect, rules.EndSessions):
                epochs[effect.user] = epochs.get(effect.user, 0) + 1
                closes.append(effect.user)
        decision = self._accept(
            c,
            batch,
            new_room=out.room,
            new_state=new_state,
            events=out.events,
            result=result,
            ack_result=ack_result,
            undoable=out.undoable,
            token_set=tuple(token_set),
            token_del=tuple(token_del),
            closes=tuple(closes),
        )
        if decision.record is not None:  # accepted (not refused for its size)
            self.epochs = epochs
            batch.tokens += tokens
        return decision

    def _evaluate_undo(self, c: CommandIn, batch: _Batch, reader: LogReader | None) -> Decision:
        """Undo (PROTOCOL.md): revert the latest undoable command not yet
        undone, as a new version. What the revert restores (and what it
        keeps: users, live owners) is the rules' business: `rules.revert`.
        Undo reads the stored log, so it must start its own batch (the
        log does not hold this batch's commands yet)."""
        early = self._prelude(c, batch)
        if early is not None:
            return early
        args_err = None
        if c.args not in (None, {}):
            args_err = ("invalid_args", "undo takes no arguments")
        role_err = None
        try:
            rules.authorize_undo(c.actor)
        except rules.Refused as refused:
            role_err = (refused.code, refused.message)
        err = protocol.earliest(args_err, role_err, self._expect_error(c))
        if err is not None:
            return refusal(c.cmd_id, *err)
        if batch.records or reader is None:
            return internal(c.cmd_id, "undo must be evaluated alone, with the log; retry")
        target = reader.undo_target()
        if target is None:
            return refusal(c.cmd_id, "conflict", "nothing to undo")
        try:
            room = rules.revert(self.room, self.state, target.inverse, target.v)
        except rules.Refused as refused:
            return refusal(c.cmd_id, refused.code, refused.message)
        events = [{"kind": "undo", "undone": target.v, "op": target.op, "by": target.user}]
        result = {"undone": target.v, "op": target.op}
        return self._accept(
            c,
            batch,
            new_room=room,
            new_state=room.to_dict(since=(self.room, self.state)),
            events=events,
            result=result,
            ack_result=dict(result),
            undoable=False,
            undoes=target.v,
        )

    def _accept(
        self,
        c: CommandIn,
        batch: _Batch,
        *,
        new_room: rules.Room,
        new_state: dict[str, Any],
        events: list[dict[str, Any]],
        result: dict[str, Any],
        ack_result: dict[str, Any],
        undoable: bool,
        undoes: int | None = None,
        token_set: tuple[tuple[str, bytes], ...] = (),
        token_del: tuple[str, ...] = (),
        closes: tuple[str, ...] = (),
    ) -> Decision:
        """The command is accepted: build its version, then move the room
        to it. Everything that can fail happens before the first change to
        `self`, so a failure leaves the room at the previous version."""
        v = self.v + 1
        ops = rules.diff(self.state, new_state)
        inverse = rules.invert(ops, self.state)
        record = VersionRecord(
            room=self.room_id,
            v=v,
            cmd_id=c.cmd_id,
            user=c.actor.user,
            op=c.op,
            args=c.args,
            ops=ops,
            inverse=inverse,
            events=events,
            result=result,
            undoable=undoable,
            undoes=undoes,
            ts=self.wall_clock(),
            token_set=token_set,
            token_del=token_del,
        )
        patch = protocol.patch(v, ops, events, c.actor.user, c.cmd_id)
        if len(ops) + len(events) > PATCH_SIZE_CHECK_ITEMS:
            size = len(JSON_CODEC.encode(patch).encode())
            if size > self.limits.max_patch_bytes:
                return refusal(
                    c.cmd_id,
                    "rule",
                    f"this command would change too much at once (a patch of {size} bytes, over "
                    f"{self.limits.max_patch_bytes}); split it, e.g. advance the clock in steps",
                )
        key = (c.actor.user, c.cmd_id)
        restricted = rules.restricted(ops, events, self.state, new_state)
        view = PatchView(self.state, new_state, patch) if restricted else None
        # From here on, nothing can fail.
        self.room, self.state, self.v = new_room, new_state, v
        self.dedup[key] = (v, result)
        batch.records.append(record)
        batch.patches.append((patch, view))
        batch.dedup_keys.append(key)
        return Decision(
            protocol.ack(c.cmd_id, ack_result, v=v),
            "ok",
            record=record,
            patch=patch,
            closes=closes,
            pending=True,
            view=view,
        )

    # --- joins and sync -------------------------------------------------------

    def patches_after(
        self, since: int, viewer: rules.Viewer | None = None
    ) -> list[dict[str, Any]] | None:
        """Every patch after `since`, from memory, or None when the client
        needs the state instead (ahead of the room, too far behind, or older
        than what memory holds: one snapshot costs less than a replay). A
        viewer who does not see everything gets each patch as they may see
        it, or the state if one of them was loaded from the log."""
        if since == self.v:
            return []
        if since < 0 or since > self.v or self.v - since > self.limits.max_resume_patches:
            return None
        if self.recent and self.recent[0]["v"] <= since + 1:
            start = since + 1 - self.recent[0]["v"]
            patches = list(itertools.islice(self.recent, start, None))
            if viewer is None or viewer.sees_all:
                return patches
            views = list(itertools.islice(self.recent_views, start, None))
            if any(view is UNKNOWN for view in views):
                return None
            return [
                patch if view is None else view.render(viewer)  # type: ignore[union-attr]
                for patch, view in zip(patches, views, strict=True)
            ]
        return None

    def view(self, viewer: rules.Viewer | None) -> dict[str, Any]:
        """The state as `viewer` may see it (the state itself for the GM)."""
        return self.state if viewer is None else rules.view_state(self.state, viewer)

    def viewer(self, user: str) -> rules.Viewer | None:
        """Who `user` is, for views (None if no longer in the room)."""
        found = self.state["users"].get(user)
        return None if found is None else rules.Viewer(user, found["role"])

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
        changed = self.token_changes.get(user, token_hash)
        # A room's users are gm, player or observer (rules.model.ROLES):
        # a stored role outside them (`admin` above all, which would make the
        # session the server's admin) opens nothing, whatever put it there.
        role = found.get("role") if isinstance(found, dict) else None
        if role not in ROOM_ROLES or changed != token_hash:
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
