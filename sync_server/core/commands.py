"""One command's evaluation in the room core: from a `CommandIn` to its
`Decision`, the room moved to its next version if the rules accept it.

The order of the checks is the protocol's (docs/protocol.md, "Retries"):
a known id first (its first ack, even within the batch), then the
session's epoch, then the rules (`rules.apply`; `expect` checked after
them), and for an undo the log's target (`rules.revert`). An accepted
command becomes a version (`_accept`): its diff and inverse, its patch
and how each viewer sees it, the affordances it changes, its record;
everything that can fail happens before the first change to the room.

`CommandEvaluation` is the part of `RoomCore` (core/room.py) that does
this; the state it reads and moves is the core's, listed below.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import rules
from rules.model import TOUCHED_CUTOVER
from sync_server.core.afford import AffordanceCache
from sync_server.core.auth import RecentTokens, hash_token
from sync_server.core.batch import Batch
from sync_server.core.inputs import NO_EXPECT, CommandIn, LogReader, undo_entry
from sync_server.core.limits import PATCH_SIZE_CHECK_ITEMS, Limits
from sync_server.core.outputs import KEY_REUSED, Decision, internal, refusal
from sync_server.core.patch_view import PatchView
from sync_server.core.records import VersionRecord
from sync_server.core.views import version_views
from sync_server.wire import protocol
from sync_server.wire.codec import CODECS

log = logging.getLogger(__name__)

JSON_CODEC = CODECS[protocol.JSON]  # the larger encoding: what the size bound measures

# No player left without a render of a version (the common case).
NONE_UNRENDERED: frozenset[Any] = frozenset()

# A remembered command id's (version, result, stored at, command if kept).
DedupValue = tuple[int, dict[str, Any], float | None, tuple[Any, Any, Any] | None]


class CommandEvaluation:
    """Evaluates one command into the open batch (see the module docstring)."""

    # The room core's state (core/room.py sets it up).
    room_id: str
    room: rules.Room
    state: dict[str, Any]
    v: int
    epochs: dict[str, int]
    undo: rules.UndoEntry | None
    dedup: OrderedDict[tuple[str, str], DedupValue]
    afford: AffordanceCache | None
    limits: Limits
    dice: rules.Dice
    wall_clock: Callable[[], float]
    new_token: Callable[[], str]
    recent_tokens: RecentTokens
    check_invariants: bool

    def _prelude(self, c: CommandIn, batch: Batch) -> Decision | None:
        """Checks before the rules: a known id answers with its first ack
        (docs/protocol.md, "Retries": dedup comes first, `expect` is checked after it), and
        a session whose token was rotated or whose user was removed is done."""
        key = (c.actor.user, c.cmd_id)
        entry = self.dedup.get(key)
        if entry is None and key in batch.known:
            old = batch.known[key]
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

    def _evaluate(self, c: CommandIn, batch: Batch) -> Decision:
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

    def _evaluate_undo(self, c: CommandIn, batch: Batch, reader: LogReader | None) -> Decision:
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
        batch: Batch,
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
        cache = self.afford
        kept: dict[Any, dict[str, Any]] | None
        afford_ops: dict[Any, list[Any]]
        if cache is None:
            kept, afford_ops = None, {}
        else:
            resync = views.get("resync") if views is not None else None
            unrendered = frozenset(("player", u) for u in resync) if resync else NONE_UNRENDERED
            kept, afford_ops = cache.after(self.room, new_room, undo_after, unrendered, touched)
        view = PatchView(patch, views, afford_ops)
        # From here on, nothing can fail.
        self.room, self.state, self.v = new_room, new_state, v
        self.undo = undo_after
        if cache is not None and kept is not None:
            cache.kept = kept
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
