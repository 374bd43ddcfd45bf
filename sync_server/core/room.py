"""This module owns a room's state machine: state, version, dedup window,
session epochs, and the batch of commands not yet stored.

Sans-I/O, as python-websockets' `Protocol` is: commands go in, decisions
come out (the reply for the sender, the version record to store, the patch
to publish once stored, the sessions to close), and the caller does all
the I/O. No asyncio, no sockets, no storage calls; the dice, the wall
clock and the token source are injected. So a unit test drives a room
with plain data and chooses every roll, in microseconds.

The face the host drives, a batch at a time (h11's connection: events in,
small values out; core/outputs.py):

    step = core.take(commands)      # those queued in a row; the core takes
                                    # the ones that go together
    Evaluate -> core.evaluate_batch(log)   # an undo: the log read first;
                                    # a big room: where the host chooses
    Store    -> storage.commit(step.records, step.snapshot, step.expected),
                then core.stored(), or core.failed(error[, known])
    Done     -> carry out step.outputs, in order

Two calls for most batches (`take`, `stored`), three for an undo or a big
room's batch; a batch the log refused for ids it holds from before the
dedup window (`known`, looked up by the host) is taken again by `failed`
itself, those answered as duplicates. The phases of a batch and the calls
each allows are one table (core/batch.py); a call it does not allow raises
`BatchMisuse`.

Each accepted command moves the in-memory room to its next version at
once (the next one of the batch builds on it); a failed batch puts the
room back exactly as it was before it (state, version, dedup window,
epochs) and answers every command that depended on it `internal`. Memory
never runs ahead of storage, whatever fails, and readers outside the
room's queue see only what is stored (`committed()`).

`evaluate`, `commit` and `rollback` are the steps the face is built of
(the core's unit tests and the bench drive them one by one). The core is
assembled from parts, one module each: one command's evaluation
(core/commands.py), the reads (core/reads.py: joins, sync, history,
views), the affordance cache (core/afford.py).

The core decides no game rule: the rules engine does (`rules.apply`,
`rules.revert`); the core turns its outcome into versions, patches and
effects.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import rules
from sync_server.core.afford import AffordanceCache
from sync_server.core.auth import RecentTokens
from sync_server.core.batch import Batch, Phase, batch_of, move
from sync_server.core.commands import CommandEvaluation, DedupValue
from sync_server.core.inputs import CommandIn, LogReader, undo_entry
from sync_server.core.limits import Limits
from sync_server.core.outputs import (
    Decision,
    Done,
    Evaluate,
    Lost,
    Output,
    RememberToken,
    Step,
    Store,
    internal,
    outputs_of,
)
from sync_server.core.patch_view import RecentPatch
from sync_server.core.reads import RoomReads
from sync_server.core.recent import RecentPatches
from sync_server.core.records import (
    DedupEntry,
    LoadedRoom,
    RoomDeleted,
    VersionConflict,
    VersionRecord,
)
from sync_server.wire import protocol

log = logging.getLogger(__name__)


class RoomCore(CommandEvaluation, RoomReads):
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
        # The open batch (None: the phase is IDLE).
        self._batch: Batch | None = None
        # Patches up to this version came from the log: they carry no
        # affordance ops (those are not stored; see `patches_after`).
        self.loaded_v = loaded.v
        # What `undo` would revert now.
        self.undo: rules.UndoEntry | None = undo_entry(loaded.undo)
        # What each connected viewer may do, kept current (None when
        # affordances are off: Config.affordances).
        self.afford = AffordanceCache(self.room_id, check_invariants) if affordances else None
        # What is stored: what readers outside the room's queue see
        # (`committed()`; a plain tuple here: it is set at every commit).
        self._committed = (self.state, self.v, dict(self.epochs))

    # --- the batch, as the host drives it -------------------------------------

    def take(self, commands: Iterable[CommandIn]) -> Step:
        """The commands queued in a row, in queue order: take those that go
        together (`batch_of`: up to `max_command_batch`, an undo alone) and
        evaluate them at once, unless the batch reads the log or the room
        is big (`Evaluate`: the host's turn). Never raises for a command:
        whatever fails in the batch is its commands' `internal`."""
        self._move("take")
        taken = batch_of(commands, self.limits.max_command_batch)
        if not taken:
            raise ValueError("take: no command offered")
        if self.afford is not None:
            for c in taken:
                if c.sessionless:  # kept current from its first command on
                    viewer = self.viewer(c.actor.user)
                    if viewer is not None:
                        self.affordances_of(viewer)
        self._open().commands = taken
        return self._evaluate_or_ask(reads_log=taken[0].op == "undo")

    def evaluate_batch(self, log: LogReader | None = None) -> Step:
        """Evaluate the batch taken (with `log`, what an undo reads of the
        stored log): `Store` its records, or `Done` if it stores nothing.
        Never raises for a command (each failure is its `internal`)."""
        self._move("evaluate")
        batch = self._batch
        assert batch is not None
        if log is not None:
            batch.log = log
        try:
            for c in batch.commands:
                batch.decisions.append(self.evaluate(c, batch.log))
            records = self.pending
            snapshot = self.snapshot_due() if records else None
        except Exception as error:  # not a command's: answered `internal`, room restored
            return self.failed(error)
        taken = len(batch.commands)
        if not records:
            self._move("nothing_to_store")
            return Done(taken, self._finish(batch))
        self._move("evaluated")
        return Store(taken, records, snapshot, batch.v, again=batch.phase is Phase.RESTORING)

    def stored(self) -> Step:
        """The batch is durable: keep it, and say what to send, in order:
        the tokens it minted, then per command its patch, its answer, the
        sessions it ends."""
        self._move("stored")
        batch = self._batch
        assert batch is not None
        return Done(len(batch.commands), self._finish(batch))

    def failed(
        self, error: BaseException, known: Mapping[tuple[str, str], DedupEntry] | None = None
    ) -> Step:
        """The batch could not be stored (or something failed before):
        restore the room, answer each command `internal` unless its answer
        did not depend on the batch, and say whether the room is lost.

        With `known`, the entries the log holds of some of the batch's ids
        (`Store.keys()`: older than the dedup window, so its unique index
        refused them): the same commands are taken again, those answered as
        duplicates (their first version and result), so that the others of
        the batch are not failed for them (docs/protocol.md, Retries)."""
        batch = self._batch
        if known:
            self._move("retry")
            assert batch is not None
            self.rollback([])
            again = self._open()
            again.commands, again.log, again.phase = batch.commands, batch.log, batch.phase
            again.known = {**batch.known, **known}
            return self._evaluate_or_ask(reads_log=False)  # the log read is kept
        self._move("failed")
        assert batch is not None
        decisions = self.rollback(batch.decisions)
        decisions += [internal(c.cmd_id) for c in batch.commands[len(decisions) :]]
        if isinstance(error, Exception):
            log.error(
                "room %s: batch of %d not stored, answered internal: %r",
                self.room_id,
                len(batch.commands),
                error,
            )
        outputs = outputs_of(decisions)
        if isinstance(error, RoomDeleted):
            outputs.append(
                Lost("the room was deleted (by another node)", protocol.CLOSE_ROOM_DELETED)
            )
        elif isinstance(error, VersionConflict):
            outputs.append(
                Lost(f"another node serves it now ({error})", protocol.CLOSE_SERVICE_RESTART)
            )
        return Done(len(batch.commands), outputs)

    def _evaluate_or_ask(self, reads_log: bool) -> Step:
        """Evaluate the batch taken at once, unless the host's turn comes
        first: an undo's log to read, or a big room's batch, which the host
        evaluates where what its ops cost says (hosting/share.py)."""
        big = len(self.room.characters) >= self.limits.off_loop_min_characters
        if reads_log or big:
            assert self._batch is not None
            return Evaluate(len(self._batch.commands), reads_log, big)
        return self.evaluate_batch()

    def _move(self, event: str) -> None:
        """The batch's next phase (core/batch.py's table), or BatchMisuse."""
        batch = self._batch
        after = move(Phase.IDLE if batch is None else batch.phase, event)
        if batch is not None:
            batch.phase = after

    def _finish(self, batch: Batch) -> list[Output]:
        return [*self.commit(), *outputs_of(batch.decisions)]

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

    def _open(self) -> Batch:
        if self._batch is None:
            self._batch = Batch(
                self.room,
                self.state,
                self.v,
                dict(self.epochs),
                undo=self.undo,
                afford=None if self.afford is None else self.afford.kept,
            )
        return self._batch

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

    def commit(self) -> list[RememberToken]:
        """The batch is stored: keep it, make its patches resumable, and
        trim the dedup window. Returns the tokens it minted, for the host to
        remember server-wide (the core never writes there)."""
        batch = self._batch
        self._committed = (self.state, self.v, dict(self.epochs))
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
            self.undo = batch.undo
            if self.afford is not None and batch.afford is not None:
                self.afford.restore(batch.afford)
            for key in batch.dedup_keys:
                self.dedup.pop(key, None)
        return [internal(d.reply.get("id")) if d.pending else d for d in decisions]
