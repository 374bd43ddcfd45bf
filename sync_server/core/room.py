"""This module owns a room's state machine: state, version, dedup window,
session epochs, and the batch of commands not yet stored.

Sans-I/O, as python-websockets' `Protocol` is: commands go in
(`evaluate`), decisions come out (the reply for the sender, the version
record to store, the patch to publish once stored, the sessions to close),
and the caller does all the I/O. No asyncio, no sockets, no storage calls;
the dice, the wall clock and the token source are injected. So a unit test
drives a room with plain data and chooses every roll, in microseconds.

Transactions. The host takes the commands the core says go together
(`batch_size`), opens a `Batch` (`begin`), lets the core evaluate it
(`evaluate_batch`; a batch that `reads_log` gets the log's undo target
first), stores `batch.records` (and `batch.snapshot`) on `batch.expected`,
and then calls `stored(batch)` or, if anything failed on the way,
`failed(batch, error)`. Both return the ordered list of outputs to carry
out (`Publish`, `Answer`, `CloseUsers`, `RememberToken`, `Lost`), and the
host performs them one by one, deciding nothing: as websockets' host writes
what `data_to_send()` returns. Each accepted command moves the in-memory
room to its next version at once (the next one of the batch builds on it);
`failed` puts the room back exactly as it was before the batch (state,
version, dedup window, epochs) and answers every command that depended on
it `internal`. Memory never runs ahead of storage, whatever fails, and
readers outside the room's queue see only what is stored (`committed`).

(`evaluate`, `commit` and `rollback` are the steps these are built of; the
core's unit tests drive them one by one.)

The core decides no game rule: the rules engine does (`rules.apply`,
`rules.revert`); the core turns its outcome into versions, patches and
effects.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Any, NamedTuple, Protocol

import attrs

import rules
from rules.model import ROLES as ROOM_ROLES
from rules.model import TOUCHED_CUTOVER
from rules.view import CLASS_PUBLIC
from sync_server.core.auth import RecentTokens, hash_token
from sync_server.core.limits import PATCH_SIZE_CHECK_ITEMS, Limits
from sync_server.core.recent import RecentPatches
from sync_server.core.records import (
    DedupEntry,
    LoadedRoom,
    RoomDeleted,
    UndoTarget,
    VersionConflict,
    VersionRecord,
)
from sync_server.core.views import (
    Views,
    needs_snapshot,
    version_views,
    view_key,
    view_ops_events,
)
from sync_server.wire import protocol
from sync_server.wire.codec import CODECS

log = logging.getLogger(__name__)

NO_EXPECT = protocol.NO_EXPECT
JSON_CODEC = CODECS[protocol.JSON]  # the larger encoding: what the size bound measures


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
    # Its id must name this very command (an HTTP Idempotency-Key): a retry
    # that sends another command under an id already applied is refused
    # (KEY_REUSED), not answered as the first. WebSocket commands keep the
    # protocol's rule: a known id gets its first ack, whatever it carries.
    same_command: bool = False


# The outcome of a command whose id (an HTTP Idempotency-Key) was applied
# to another command: a `conflict` error, 422 at the HTTP door.
KEY_REUSED = "key_reused"

# A remembered command id's (version, result, stored at, command if kept).
DedupValue = tuple[int, dict[str, Any], float | None, tuple[Any, Any, Any] | None]


class ViewKey(NamedTuple):
    """The group of viewers who get one frame of a patch (`PatchView.key`):
    `seen`, the class of what they may see of it (None: all of it, the GM
    and admin); `own`, whether it is their own command's (their frame keeps
    its id); `afford`, their affordance class when the patch changes what
    they may do (else None). Viewers with equal keys get equal frames."""

    seen: Any
    own: bool = False
    afford: Any = None


# The key of the viewers who get the public view of someone else's patch
# that changes nothing they may do.
PUBLIC_KEY = ViewKey(CLASS_PUBLIC)


@attrs.define(eq=False)
class PatchView:
    """How one patch looks to each viewer (per-role views, rules/view.py,
    command ids and affordances): viewers are grouped by `key`, each
    group's frame built once; None for those who get the plain patch.

    `views` is what the version stores for its viewers (core/views.py's
    `Views`: the public view and the players whose own differs from it),
    None when the rules say every viewer may see it whole; so a patch loaded
    from the log after a restart or an import gives each viewer the same
    view as it did live.

    A command's `id` is its sender's (docs/protocol.md, "cmd -> patch": the sender's patch
    carries it, and the ack too); every other viewer but the GM and admin
    gets `"id": null`, since a client's ids may say what its command was
    about (the Foundry module's name the actor). So a patch that is the
    same for all costs one more encoding (the one without the id), and a
    restricted one one more per view class the sender's own patch adds:
    never one per viewer.

    `afford`: the ops of each affordance class whose affordances the patch
    changes (see `afford_class`); affordance ops are not stored (see
    `patches_after`)."""

    patch: dict[str, Any]
    views: Views | None
    afford: dict[Any, list[Any]] = attrs.Factory(dict)

    def _own(self, viewer: rules.Viewer) -> bool:
        return viewer.user is not None and viewer.user == self.patch["by"]

    def key(self, viewer: rules.Viewer) -> ViewKey | None:
        """None: the plain patch (a viewer who sees everything, with no
        affordance of theirs changed). Asked for every viewer of every
        patch: no call it can do without."""
        afford = None
        if self.afford:
            cls = afford_class(viewer)
            if cls in self.afford:
                afford = cls
        if viewer.sees_all:
            return None if afford is None else ViewKey(None, False, afford)
        seen = CLASS_PUBLIC if self.views is None else view_key(self.views, viewer)
        own = self._own(viewer)
        if seen is CLASS_PUBLIC and not own and afford is None:
            return PUBLIC_KEY  # most viewers of most patches: one object, no tuple to build
        return ViewKey(seen, own, afford)

    def needs_snapshot(self, viewer: rules.Viewer) -> bool:
        """`viewer`'s view of this version was not rendered (past the cap of
        views per version): it gets a snapshot, never this patch."""
        return needs_snapshot(self.views, viewer)

    def exempt(self, key: Any) -> bool:
        """Viewers who see everything (the GM) get their own frame when the
        patch changes what they may do; the cap of views never holds them
        back to a snapshot."""
        return isinstance(key, ViewKey) and key.seen is None and key.afford is not None

    def render(self, viewer: rules.Viewer) -> dict[str, Any]:
        p = self.patch
        if not viewer.sees_all:
            if self.views is None:
                ops, events = p["ops"], p["events"]
            else:
                ops, events = view_ops_events(self.views, viewer)
            p = {**p, "ops": ops, "events": events, "id": p["id"] if self._own(viewer) else None}
        extra = self.afford.get(afford_class(viewer))
        if extra:
            p = {**p, "ops": [*p["ops"], *extra]}
        return p


# What the room keeps of a committed patch (core/recent.py): PatchView's
# fields, rebuilt into one when a resume or the history needs it.
RecentPatch = tuple[dict[str, Any], Views | None, dict[Any, list[Any]]]

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
    for part in ("room", "undo"):
        if old[part] is not new[part]:
            ops += rules.diff(old[part], new[part], (AFFORDANCES, part))
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


def history_entry(parts: RecentPatch, viewer: rules.Viewer | None) -> dict[str, Any] | None:
    """One kept patch as the history lists it for `viewer` (its version,
    sender and the events they may see), None when it has no event for them."""
    patch = parts[0]
    if viewer is not None and not viewer.sees_all:
        patch = PatchView(*parts).render(viewer)
    if not patch["events"]:
        return None
    return {"v": patch["v"], "by": patch["by"], "events": patch["events"]}


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
    # How each viewer sees the patch (views, command ids: PatchView).
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

    def next_undo_target(self) -> UndoTarget | None:
        """The one an undo reverts after `undo_target` is undone, or None."""
        ...


@attrs.frozen
class StaticLog:
    """A `LogReader` over values fetched beforehand."""

    target: UndoTarget | None = None
    after: UndoTarget | None = None

    def undo_target(self) -> UndoTarget | None:
        return self.target

    def next_undo_target(self) -> UndoTarget | None:
        return self.after


def undo_entry(target: UndoTarget | None) -> rules.UndoEntry | None:
    return None if target is None else rules.UndoEntry(target.v, target.op, target.user)


# --- what the host carries out, in order ---------------------------------------


@attrs.frozen
class Publish:
    """Send a stored version's patch to every subscriber of the room (as
    each viewer may see it: `view`)."""

    patch: dict[str, Any]
    view: PatchView | None


@attrs.frozen
class Answer:
    """Reply to the batch's `index`-th command (ack or error) and count it."""

    index: int
    frame: dict[str, Any]
    outcome: str


@attrs.frozen
class CloseUsers:
    """End these users' sessions (4403): removed, or their token rotated."""

    users: tuple[str, ...]


@attrs.frozen
class RememberToken:
    """A token the batch minted, kept server-wide for a while so that a
    retry of its command gets it again (tokens are never stored)."""

    key: tuple[str, str, str]
    token: str


@attrs.frozen
class Lost:
    """This node no longer serves the room (fenced, or deleted elsewhere):
    stop at once, close its sessions with `code`."""

    why: str
    code: int


Output = Publish | Answer | CloseUsers | RememberToken | Lost


@attrs.define
class Batch:
    """Commands taken from the queue together, and what storing them takes.
    `reads_log`: an undo, which needs the log's undo target before it is
    evaluated. After `evaluate_batch`: `records` to store (with `snapshot`)
    on the head `expected`."""

    commands: list[CommandIn]
    reads_log: bool
    # Commands the log holds but the dedup window no longer does (looked up
    # by the host after the log's unique index refused them: `retry_known`),
    # by (user, id): answered as the duplicates they are.
    known: dict[tuple[str, str], DedupEntry] = attrs.Factory(dict)
    decisions: list[Decision] = attrs.Factory(list)
    records: list[VersionRecord] = attrs.Factory(list)
    snapshot: tuple[int, dict[str, Any]] | None = None
    expected: int = 0


@attrs.define
class _Batch:
    """What `rollback` restores, and what `commit` finalizes."""

    room: rules.Room
    state: dict[str, Any]
    v: int
    epochs: dict[str, int]
    records: list[VersionRecord] = attrs.Factory(list)
    patches: list[tuple[dict[str, Any], PatchView]] = attrs.Factory(list)
    dedup_keys: list[tuple[str, str]] = attrs.Factory(list)
    tokens: list[tuple[tuple[str, str, str], str]] = attrs.Factory(list)
    undo: rules.UndoEntry | None = None
    afford: dict[Any, dict[str, Any]] | None = None


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
        affordances: bool = True,
    ) -> None:
        self.limits = limits or Limits()
        self.room_id = loaded.room
        self.state: dict[str, Any] = loaded.state
        self.room = rules.Room.from_dict(loaded.state)
        self.v = loaded.v
        # The committed patches a resume or the history may ask for, each
        # with how viewers see it (PatchView's fields; the views stored with
        # the version, for the patches loaded from the log), pickled
        # (core/recent.py: the collector's pauses).
        self.recent: RecentPatches[RecentPatch] = RecentPatches(
            self.limits.recent_patches_in_memory,
            ((p.v, (p.frame(), p.views, {})) for p in loaded.recent),
        )
        # (user, id) -> (version, result, stored at, the command): in version
        # order, so `commit` trims the window (count and age) off the front.
        # The command (op, args, expect) is kept only for those sent with
        # `same_command` (HTTP), while this core lives: None otherwise.
        self.dedup: OrderedDict[tuple[str, str], DedupValue] = OrderedDict(
            ((d.user, d.cmd_id), (d.v, d.result, d.ts, None)) for d in loaded.dedup
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
        # The open Batch's `known` while `evaluate_batch` runs.
        self._known: dict[tuple[str, str], DedupEntry] = {}
        # Patches up to this version came from the log: they carry no
        # affordance ops (those are not stored; see `patches_after`).
        self.loaded_v = loaded.v
        # What `undo` would revert now, and each affordance class's
        # affordances at the current version (None when affordances are
        # off: Config.affordances).
        self.undo: rules.UndoEntry | None = undo_entry(loaded.undo)
        # The rules' answers kept between commands (a cache: rules.RuleTable).
        self._rule_table = rules.RuleTable()
        self._classes_of: tuple[Any, dict[Any, rules.Viewer]] | None = None
        # Only the classes of viewers who were shown the room (a welcome, a
        # snapshot) are kept current (`_afford_after`), until the last of
        # their sessions leaves (`forget_class`): a room's registered players
        # who are not connected cost no command anything.
        self.afford: dict[Any, dict[str, Any]] | None = {} if affordances else None
        # The version since which each known class has been kept current: a
        # resume from before it gets what the class may do now, whole.
        self._known_at: dict[Any, int] = {}
        # What is stored: what readers outside the room's queue see.
        self.committed: tuple[dict[str, Any], int, dict[str, int]] = (
            self.state,
            self.v,
            dict(self.epochs),
        )

    # --- the batch, as the host drives it -------------------------------------

    def batch_size(self, ops: list[Any], limit: int) -> int:
        """How many of the queued commands (their ops, in queue order) go in
        the next batch: up to `limit`, and an undo alone (it reads the log,
        which the batch before it must have reached)."""
        if not ops:
            return 0
        if ops[0] == "undo":
            return 1
        n = 1
        while n < len(ops) and n < limit and ops[n] != "undo":
            n += 1
        return n

    def begin(self, commands: list[CommandIn]) -> Batch:
        return Batch(list(commands), reads_log=bool(commands) and commands[0].op == "undo")

    def evaluate_batch(self, batch: Batch, reader: LogReader | None = None) -> None:
        """Evaluate every command of `batch` into the open batch; say what to
        store. Never raises for a command (each failure is its `internal`)."""
        self._known = batch.known
        try:
            for c in batch.commands:
                batch.decisions.append(self.evaluate(c, reader))
        finally:
            self._known = {}
        batch.records = self.pending
        batch.snapshot = self.snapshot_due() if batch.records else None
        batch.expected = self.base_v

    def stored(self, batch: Batch) -> list[Output]:
        """The batch is durable: keep it, and say what to send, in order: the
        tokens it minted, then per command its patch, its answer, the
        sessions it ends."""
        return [*self.commit(), *self._outputs(batch.decisions)]

    def stored_keys(self, batch: Batch) -> list[tuple[str, str]]:
        """The (user, id) of each command the batch would store: when the
        log refuses the batch, the host looks these up (`retry_known`)."""
        return [(r.user, r.cmd_id) for r in batch.records if r.cmd_id is not None]

    def retry_known(self, batch: Batch, known: dict[tuple[str, str], DedupEntry]) -> Batch:
        """The log refused `batch` and holds some of its ids, older than the
        dedup window (`known`): restore the room and begin the same
        commands again, those answered as duplicates (their first version
        and result), so that the others of the batch are not failed for
        them (docs/protocol.md, Retries)."""
        self.rollback(batch.decisions)
        again = self.begin(batch.commands)
        again.known = {**batch.known, **known}
        return again

    def failed(self, batch: Batch, error: BaseException) -> list[Output]:
        """The batch could not be stored (or something failed before):
        restore the room, answer each command `internal` unless its answer
        did not depend on the batch, and say whether the room is lost."""
        decisions = self.rollback(batch.decisions)
        decisions += [internal(c.cmd_id) for c in batch.commands[len(decisions) :]]
        batch.decisions = decisions
        if isinstance(error, Exception):
            log.error(
                "room %s: batch of %d not stored, answered internal: %r",
                self.room_id,
                len(batch.commands),
                error,
            )
        outputs = self._outputs(decisions)
        if isinstance(error, RoomDeleted):
            outputs.append(
                Lost("the room was deleted (by another node)", protocol.CLOSE_ROOM_DELETED)
            )
        elif isinstance(error, VersionConflict):
            outputs.append(
                Lost(f"another node serves it now ({error})", protocol.CLOSE_SERVICE_RESTART)
            )
        return outputs

    def _outputs(self, decisions: list[Decision]) -> list[Output]:
        out: list[Output] = []
        for i, d in enumerate(decisions):
            if d.patch is not None:
                out.append(Publish(d.patch, d.view))
            out.append(Answer(i, d.reply, d.outcome))
            if d.closes:
                out.append(CloseUsers(d.closes))
        return out

    # --- the batch, step by step -----------------------------------------------

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
            self._batch = _Batch(
                self.room,
                self.state,
                self.v,
                dict(self.epochs),
                undo=self.undo,
                afford=self.afford,
            )
        return self._batch

    def commit(self) -> list[RememberToken]:
        """The batch is stored: keep it, make its patches resumable, and
        trim the dedup window. Returns the tokens it minted, for the host to
        remember server-wide (the core never writes there)."""
        batch = self._batch
        self.committed = (self.state, self.v, dict(self.epochs))
        if batch is None:
            return []
        self._batch = None
        for patch, view in batch.patches:
            self.recent.append(patch["v"], (patch, view.views, view.afford))
        minted = [RememberToken(key, token) for key, token in batch.tokens]
        for record in batch.records:
            for user, token_hash in record.token_set:
                self.token_changes[user] = token_hash
            for user in record.token_del:
                self.token_changes[user] = None
        self.trim_dedup()
        return minted

    def trim_dedup(self) -> None:
        """Forget the command ids past the dedup window: older than its last
        `dedup_window_versions` versions or `dedup_window_seconds` (limits.py)."""
        first_v = self.v - self.limits.dedup_window_versions
        oldest = self.wall_clock() - self.limits.dedup_window_seconds
        dedup = self.dedup
        while dedup:
            v, _, ts, _ = next(iter(dedup.values()))
            if v > first_v and (ts is None or ts >= oldest):
                break
            dedup.popitem(last=False)

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
            self.undo, self.afford = batch.undo, batch.afford
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
        (docs/protocol.md, "Retries": dedup comes first, `expect` is checked after it), and
        a session whose token was rotated or whose user was removed is done."""
        key = (c.actor.user, c.cmd_id)
        entry = self.dedup.get(key)
        if entry is None and key in self._known:
            old = self._known[key]
            entry = (old.v, old.result, old.ts, None)
        if entry is not None:
            v, result, _, sent = entry
            if c.same_command and sent is not None and sent != (c.op, c.args, c.expect):
                return Decision(
                    protocol.error(
                        "conflict",
                        f"the id {c.cmd_id!r} was used for another command ({sent[0]}, version "
                        f"{v}): a new command needs a new id",
                        c.cmd_id,
                    ),
                    KEY_REUSED,
                )
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
        # Above a few characters, only the ones the command touched are redone.
        new_state = out.room.to_dict(since=(self.room, self.state), touched=out.touched)
        if self.check_invariants:
            broken = rules.violations(out.room)
            # (against the walk over every character, which the touched
            # characters must reproduce: both reuse the old dicts as they are)
            if new_state != out.room.to_dict(since=(self.room, self.state)):
                broken = [*broken, "the dict form of the touched characters is not the walk's"]
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
            touched=out.touched,
            undo_after=rules.UndoEntry(self.v + 1, c.op, c.actor.user)
            if out.undoable
            else self.undo,
            token_set=tuple(token_set),
            token_del=tuple(token_del),
            closes=tuple(closes),
        )
        if decision.record is not None:  # accepted (not refused for its size)
            self.epochs = epochs
            batch.tokens += tokens
        return decision

    def _evaluate_undo(self, c: CommandIn, batch: _Batch, reader: LogReader | None) -> Decision:
        """Undo (docs/protocol.md, "undo"): revert the latest undoable command not yet
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
            nothing = rules.nothing_to_undo()
            return refusal(c.cmd_id, nothing.code, nothing.message)
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
            undo_after=undo_entry(reader.next_undo_target()),
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
        undo_after: rules.UndoEntry | None,
        undoes: int | None = None,
        touched: frozenset[str] | None = None,
        token_set: tuple[tuple[str, bytes], ...] = (),
        token_del: tuple[str, ...] = (),
        closes: tuple[str, ...] = (),
    ) -> Decision:
        """The command is accepted: build its version, then move the room
        to it. Everything that can fail happens before the first change to
        `self`, so a failure leaves the room at the previous version."""
        v = self.v + 1
        # `touched`: every other character's dict is the old one (to_dict);
        # worth it only past the cutover (below, walking them all is cheaper).
        if touched is not None and len(new_room.characters) >= TOUCHED_CUTOVER:
            ops = rules.diff(self.state, new_state, touched={"characters": touched})
        else:
            ops = rules.diff(self.state, new_state)
        if self.check_invariants and ops != rules.diff(self.state, new_state):
            full = rules.diff(self.state, new_state)
            if sorted(map(repr, ops)) != sorted(map(repr, full)):
                log.error("room %s: %s: the incremental diff differs", self.room_id, c.op)
                return refusal(c.cmd_id, "internal", "the command would break an invariant")
        inverse = rules.invert(ops, self.state)
        patch = protocol.patch(v, ops, events, c.actor.user, c.cmd_id)
        if len(ops) + len(events) > PATCH_SIZE_CHECK_ITEMS:
            encoded = JSON_CODEC.encode(patch)
            size = len(encoded if isinstance(encoded, bytes) else encoded.encode())
            if size > self.limits.max_patch_bytes:
                return refusal(
                    c.cmd_id,
                    "rule",
                    f"this command would change too much at once (a patch of {size} bytes, over "
                    f"{self.limits.max_patch_bytes}); split it, e.g. advance the clock in steps",
                )
        key = (c.actor.user, c.cmd_id)
        views = version_views(
            self.state, new_state, ops, events, self.limits.max_stored_views_per_version
        )
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
            views=views,
        )
        # The players whose view was not rendered get a snapshot, which
        # works out their affordances then: not worked out here.
        unrendered = frozenset(("player", u) for u in (views or {}).get("resync", ()))
        afford, afford_ops = self._afford_after(new_room, undo_after, unrendered, touched)
        view = PatchView(patch, views, afford_ops)
        # From here on, nothing can fail.
        self.room, self.state, self.v = new_room, new_state, v
        self.undo, self.afford = undo_after, afford
        sent = (c.op, c.args, c.expect) if c.same_command else None
        self.dedup[key] = (v, result, record.ts, sent)
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

    # --- affordances ----------------------------------------------------------

    def _classes(self, room: rules.Room) -> dict[Any, rules.Viewer]:
        """One viewer per affordance class of the room's users (the first
        GM for the GMs'), worked out again only when the users change (the
        same `room.users` object while they do not)."""
        cached = self._classes_of
        if cached is not None and cached[0] is room.users:
            return cached[1]
        found: dict[Any, rules.Viewer] = {}
        for uid, user in room.users.items():
            if user.role not in ("gm", "player"):  # observers (and a stored role
                continue  # outside a room's: such a user can never join)
            viewer = rules.Viewer(uid, user.role)
            cls = afford_class(viewer)
            if cls is not None and cls not in found:
                found[cls] = viewer
        self._classes_of = (room.users, found)
        return found

    def _check_kept(
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

    def _afford_after(
        self,
        room: rules.Room,
        undo: rules.UndoEntry | None,
        unrendered: frozenset[Any] = frozenset(),
        touched: frozenset[str] | None = None,
    ) -> tuple[dict[Any, dict[str, Any]] | None, dict[Any, list[Any]]]:
        """The affordances after a command, and the ops that bring each
        class's from the current ones to them (only classes that change).

        Only the classes known now are worked out, less `unrendered` (the
        players whose view of this version was not rendered): a class is
        left unknown while every session of it waits for a snapshot (or
        none is open), and `affordances_of` works it out again when one is
        sent (a snapshot, a welcome). So a century advance that concerns
        98 players works out the affordances of the few it renders, not of
        99 classes in one go. The rule table forgets the classes left out
        (its kept entries of them would go stale: their next call redoes
        them whole). Observers' never change: not kept.

        One pass per class and no more: this runs at every command, for
        every connected GM and player class."""
        current = self.afford
        if current is None:
            return None, {}
        table = self._rule_table
        classes: list[Any] = []
        viewers: list[rules.Viewer] = []
        for cls, viewer in self._classes(room).items():
            if cls in current and cls not in unrendered:
                classes.append(cls)
                viewers.append(viewer)
            else:
                table.forget(viewer.user)
        # What the table gave each viewer last: when that is what the room
        # holds now (not so after a rollback), its `redone` says which
        # characters a diff need look at.
        before = [table.last.get(viewer.user) for viewer in viewers]
        since = None if touched is None else (self.room, touched)
        found = rules.affordances_for(room, viewers, undo, table, since)
        after: dict[Any, dict[str, Any]] = {}
        ops: dict[Any, list[Any]] = {}
        for cls, viewer, was, now in zip(classes, viewers, before, found, strict=True):
            after[cls] = now
            self._check_kept(room, viewer, undo, now)
            old = current.get(cls)
            if old is now:
                continue  # the rules kept it whole: nothing to send
            redone = table.redone.get(viewer.user) if was is old else None
            changed = afford_diff(old, now, redone)
            if changed:
                ops[cls] = changed
        return after, ops

    def forget_class(self, cls: Any) -> None:
        """No session of affordance class `cls` is open any more: its
        affordances are no longer kept current with every command (worked
        out again, whole, with its next view: `affordances_of`)."""
        if self.afford is not None and cls in self.afford and self._batch is None:
            self.afford = {k: a for k, a in self.afford.items() if k != cls}
            self._known_at.pop(cls, None)

    def affordances_of(self, viewer: rules.Viewer) -> dict[str, Any]:
        """What `viewer` may do now (rules/affordances.py)."""
        cls = afford_class(viewer)
        if self.afford is not None and cls in self.afford:
            return self.afford[cls]
        table = self._rule_table
        if table.room is self.room:
            # The table's last call saw this room: nothing changed since for
            # the viewers it keeps, so it may answer this one (its shared
            # entries: a snapshot after a century advance, for each of 98
            # players, reuses what the others' worked out).
            found = rules.affordances_for(self.room, [viewer], self.undo, table)[0]
            self._check_kept(self.room, viewer, self.undo, found)
        else:  # after a rollback: the table saw a room since undone
            found = rules.affordances(self.room, viewer, self.undo)
        if self.afford is not None and cls is not None and self._batch is None:
            # Known again from now on (see `_afford_after`): its sessions
            # get it whole with this view, and diffs of it after.
            self.afford = {**self.afford, cls: found}
            self._known_at[cls] = self.v
        return found

    # --- joins and sync -------------------------------------------------------

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
        cls = afford_class(viewer)
        if cls is None:
            return True  # observers and admins: nothing they may do changes
        assert self.afford is not None
        return cls in self.afford and self._known_at.get(cls, self.v + 1) <= since

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
