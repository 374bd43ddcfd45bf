"""Room hosts: the asyncio glue around each loaded room's `RoomCore`.

A `RoomHost` owns a room's work queue and one worker task. Why one worker
per room: commands of a room apply one at a time, in arrival order, while
rooms stay independent of each other. Joins, `sync` requests and deletion
go through the same queue, so a client's welcome and every later patch are
consistent with each other without locks.

The host only queues, awaits storage and carries out what the core
(core/room.py) decided, a step at a time (core/outputs.py). A batch's path:
  core.take(the commands queued in a row) -> [Evaluate: the log's undo
  target read first, or a big room's batch evaluated where its cost says:
  core.evaluate_batch(log)] -> Store: storage.commit(step.records,
  step.snapshot, step.expected) -> core.stored(), or core.failed(error)
  -> Done: its outputs, in order: tokens to remember, then per command its
  patch to publish, its answer, the sessions it ends; last, whether the
  room is lost. Two calls of the core for most batches, three at most.
Nothing is sent before the commit returns, so no client ever holds a
version that a crash could take back. Whatever fails (the rules, the
diff, storage, a publish), every item taken from the queue is answered,
and the core is rolled back to what storage holds.

The work items it takes are in work.py; `Rooms` (rooms.py) is the
directory that loads and unloads hosts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, cast

import attrs

import rules
from rules.state import StateDict
from rules.view import new_memo
from sync_server.clock import Clock, SystemClock
from sync_server.cluster.leases import Leases, SingleNodeLeases
from sync_server.core.auth import RecentTokens, new_token
from sync_server.core.batch import BatchMisuse
from sync_server.core.inputs import CommandIn, StaticLog
from sync_server.core.limits import (
    ROOM_MAX_PAUSE_SECONDS,
    ROOM_SHARE_WINDOW_SECONDS,
    Limits,
)
from sync_server.core.outputs import (
    Answer,
    CloseUsers,
    Done,
    Evaluate,
    Lost,
    Output,
    Publish,
    RememberToken,
    Step,
    Store,
)
from sync_server.core.ratelimit import reply_cost
from sync_server.core.reads import JoinRefused
from sync_server.core.room import RoomCore
from sync_server.hosting.bus import Message, RoomBus
from sync_server.hosting.registry import Registry
from sync_server.hosting.share import (
    OFF_LOOP_SWITCH,
    LoopShare,
    Metered,
    OpCosts,
    RoomMeter,
    metered_call,
)
from sync_server.hosting.work import (
    Barrier,
    Command,
    Delete,
    Item,
    Join,
    Left,
    Query,
    Resync,
    RoomClosed,
    Subscriber,
    Sync,
)
from sync_server.observe.activity import Activity
from sync_server.observe.metrics import Metrics
from sync_server.storage import DedupEntry, Storage, StorageError, VersionConflict
from sync_server.wire import protocol

log = logging.getLogger(__name__)


@attrs.frozen
class RoomServices:
    """What every room of a server shares, handed from `Rooms` to each host
    it loads, so that the two never list them twice."""

    storage: Storage
    bus: RoomBus
    registry: Registry
    metrics: Metrics
    dice: rules.Dice
    tokens: RecentTokens
    limits: Limits = attrs.Factory(Limits)
    clock: Clock = attrs.Factory(SystemClock)
    check_invariants: bool = False
    affordances: bool = True  # Config.affordances
    new_token: Callable[[], str] = new_token
    # Who serves which room (cluster mode); alone on its storage, every room.
    leases: Leases = attrs.Factory(SingleNodeLeases)
    # Counts commands for the log's per-room summaries (None: not logged).
    activity: Activity | None = None
    # Which rooms had work lately (share.py: each room's share of the CPU).
    share: LoopShare = attrs.Factory(lambda: LoopShare(ROOM_SHARE_WINDOW_SECONDS))


class RoomHost:
    """A loaded room: its core, its queue and its worker."""

    def __init__(self, room_id: str, core: RoomCore, services: RoomServices) -> None:
        self.core = core
        self.room_id = room_id
        self.services = services
        self._items: deque[Item] = deque()
        self._wake = asyncio.Event()
        self._busy = False
        self.closed = False
        # Told when the room closes itself (lost to another node, deleted
        # elsewhere): the directory drops it (`Rooms`).
        self.on_drop: Callable[[RoomHost], None] | None = None
        # Why this node stopped serving the room (None while it serves it).
        self.lost_reason: str | None = None
        # How queued work is answered once the room is closed.
        self._closed_answer = ("not_found", "the room was deleted")
        self.last_active = services.clock.monotonic()
        # Rooms.loads when this host began loading (a hello that looked its
        # token up before then re-checks it: the host knows only the token
        # changes committed since its load).
        self.load_seq = 0
        # Hellos that found this host and check their token again before
        # they join: the host is not idle meanwhile (not unloaded under them).
        self.hellos = 0
        # Resync snapshots by (view class, affordance class), at a version:
        # shared by the sinks of one such pair until the queue is empty again.
        self._resyncs: dict[Any, tuple[int, Message]] = {}
        self._resync_memo: Any = new_memo()  # their status views, likewise
        # Stale subscribers waiting for their snapshot, in the order they
        # were held (an ordered set): beside the queue, not in it, so that
        # the room's next command never waits behind them (see `_next`).
        self._stale: dict[Subscriber, None] = {}
        # Whether the next turn may be a snapshot (one between two items).
        self._snapshot_turn = False
        # The room's share of the CPU while other rooms have work (share.py).
        limits = services.limits
        self.meter = RoomMeter(
            self.room_id,
            services.share,
            limits.room_cpu_share,
            limits.room_cpu_burst,
            ROOM_MAX_PAUSE_SECONDS,
        )
        # What each op's evaluation has cost here: which batches go off the loop.
        self.costs = OpCosts(limits.off_loop_min_seconds)
        self._task = asyncio.get_running_loop().create_task(Metered(self._run(), self.meter.add))

    # What is stored, for callers outside the queue (sessions, demo, admin,
    # tests): never a version a failed commit could still take back.
    @property
    def state(self) -> StateDict:
        """The committed state's dict form, typed (rules/state.py): what
        the modules outside the room read of it."""
        return cast(StateDict, self.core.committed().state)

    @property
    def v(self) -> int:
        return self.core.committed().v

    @property
    def epochs(self) -> dict[str, int]:
        return self.core.committed().epochs

    # --- queue ------------------------------------------------------------

    def submit(self, item: Item) -> None:
        if self.closed:
            raise RoomClosed(self.room_id)
        self._items.append(item)
        self.meter.submitted()
        self._wake.set()

    def refuse_work(self) -> None:
        """Take no new work; what is queued gets `internal` (retry): the
        room is served elsewhere now, or about to be."""
        self.closed = True
        self._closed_answer = ("internal", "this server stopped serving the room; retry")

    async def token_still_found(
        self,
        looked_up: int,
        digest: bytes,
        found: tuple[str, str] | None,
        find_token: Callable[[bytes], Awaitable[tuple[str, str] | None]],
    ) -> bool:
        """Whether a token looked up when `looked_up` room loads had begun
        still names the same user here. A host loaded since knows only the
        token changes committed after its load, so the token is looked up
        again, the host held meanwhile (not unloaded as idle); one loaded
        before knows every change since (its core checks it at the join)."""
        if self.load_seq <= looked_up:
            return True
        self.hellos += 1
        try:
            again = await find_token(digest)
        finally:
            self.hellos -= 1
        return again == found

    def touch(self) -> None:
        """Something happened in the room: its idle time counts from now."""
        self.last_active = self.services.clock.monotonic()

    def left(self, user: str) -> None:
        """A session of `user` left (unsubscribed, out of the registry)."""
        self.touch()
        if not self.closed:
            self._items.append(Left(user))
            self._wake.set()

    async def barrier(self) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.submit(Barrier(fut))
        await fut

    @property
    def idle(self) -> bool:
        return (
            not self._items
            and not self._stale
            and not self._busy
            and not self.hellos
            and self.services.registry.count(self.room_id) == 0
            and self.services.clock.monotonic() - self.last_active
            > self.services.limits.room_idle_unload_seconds
        )

    async def stop(self) -> None:
        """Stop the worker (unload). Callers make sure the queue is empty."""
        self.closed = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._fail_queued()

    def _next(self) -> Item:
        """The next work: a queued item, or a held subscriber's snapshot.
        Snapshots wait beside the queue: one is sent between two items
        (and all of them once the queue is empty), so a command waits for
        one snapshot at most, not for every player held back by the patch
        before it (98 in a big room: about four times the command's own
        CPU, issue 36), and a snapshot is rendered once, at the version of
        its turn, however many patches it covers by then. One between two
        items: a GM sending command after command never starves them."""
        if self._stale and (self._snapshot_turn or not self._items):
            self._snapshot_turn = False
            sink = next(iter(self._stale))
            return Resync(sink)
        self._snapshot_turn = True
        return self._items.popleft()

    async def _run(self) -> None:
        while True:
            while not self._items and not self._stale:
                self._resyncs.clear()
                self._resync_memo = new_memo()
                self._wake.clear()
                await self._wake.wait()
            item = self._next()
            self._busy = True
            try:
                if isinstance(item, Command):
                    await self._run_batch(item)
                elif isinstance(item, Join):
                    try:
                        self._join(item)
                    except Exception:
                        if not item.future.done():  # the hello must not hang
                            item.future.set_exception(
                                JoinRefused(
                                    "internal", "the server failed; retry", protocol.CLOSE_INTERNAL
                                )
                            )
                        raise
                elif isinstance(item, Sync):
                    self._sync(item)
                elif isinstance(item, Query):
                    self._query(item)
                elif isinstance(item, Resync):
                    self._resync(item.sink)
                    await asyncio.sleep(0)  # one per turn: other rooms in between
                elif isinstance(item, Left):
                    self._left(item)
                elif isinstance(item, Delete):
                    await self._delete(item)
                elif isinstance(item, Barrier) and not item.future.done():
                    item.future.set_result(None)
            except Exception:  # a bug in the glue: log it, keep the room alive
                log.exception("room %s: worker error", self.room_id)
            finally:
                self._busy = False
                self.last_active = self.services.clock.monotonic()
            if self.closed:
                self._fail_queued()
                return
            pause = self.meter.turn()
            if pause:  # past its share while other rooms have work: theirs first
                self.services.metrics.room_paused(pause)
                await asyncio.sleep(pause)  # real time: the budget's unit (share.py)

    def _fail_queued(self) -> None:
        """After deletion or unloading: answer whatever is still queued."""
        code, message = self._closed_answer
        self._stale.clear()  # their sessions are closed with the room
        while self._items:
            item = self._items.popleft()
            if isinstance(item, Command):
                self._answer(item, protocol.error(code, message, item.cmd_id), code)
            elif isinstance(item, Join | Delete | Query):
                if not item.future.done():
                    item.future.set_exception(RoomClosed(self.room_id))
            elif isinstance(item, Barrier):
                if not item.future.done():
                    item.future.set_result(None)
            elif isinstance(item, Sync) and item.done:
                item.done()

    # --- commands ---------------------------------------------------------

    async def _run_batch(self, first: Command) -> None:
        """Offer the core the commands queued in a row, store what it
        evaluated, then carry out its outputs: every command it took is
        answered exactly once, whatever fails on the way."""
        core = self.core
        step = core.take(self._queued(first))
        items = [first] + [cast(Command, self._items.popleft()) for _ in range(step.taken - 1)]
        try:
            while not isinstance(step, Done):
                if isinstance(step, Evaluate):
                    step = await self._evaluate(items, step)
                else:
                    step = await self._store(step)
        except BaseException as exc:
            try:
                done = core.failed(exc)
            except BatchMisuse:
                # No batch is open: `stored()` itself failed once its batch
                # was kept (a bug). Its versions reached no client, so the
                # room is given up here: each command is answered `internal`
                # (a retry gets its first ack: its id is stored), then the
                # sessions reconnect to the room loaded again from storage.
                self._carry_out(items, [*map(_internal, range(len(items)), items)])
                self.lost("a batch's outputs failed after it was stored")
            else:
                assert isinstance(done, Done)
                self._carry_out(items, done.outputs)
            if not isinstance(exc, Exception):  # cancelled (shutdown): answered; go on
                raise
            return
        self._carry_out(items, step.outputs)

    def _queued(self, first: Command) -> Iterator[CommandIn]:
        """`first`'s command and those queued right behind it, in order
        (the core reads as far as its batch goes)."""
        yield first.command
        for item in self._items:
            if not isinstance(item, Command):
                return
            yield item.command

    async def _store(self, step: Store) -> Step:
        """Commit the batch's records; the core's next step."""
        storage = self.services.storage
        try:
            await storage.commit(self.room_id, step.records, step.snapshot, expected=step.expected)
        except VersionConflict:
            raise
        except StorageError as exc:
            # The log's unique index refuses an id older than the dedup
            # window: answer it as the duplicate it is and store the rest,
            # rather than fail the whole batch (the core takes it again).
            known = await self._stored_commands(step.keys(), step.expected)
            if not known:
                raise
            return self.core.failed(exc, known)
        return self.core.stored()

    async def _undo_log(self) -> StaticLog:
        """What an undo reads of the stored log: its target, and the one
        after it (what the next undo reverts: the GM's affordances)."""
        storage = self.services.storage
        target = await storage.undo_target(self.room_id)
        after = None
        if target is not None:
            after = await storage.undo_target(self.room_id, target.v)
        return StaticLog(target, after)

    async def _evaluate(self, items: list[Command], step: Evaluate) -> Step:
        """`core.evaluate_batch`, after the log's undo target if the batch
        reads it, and off the event loop when the batch is heavy in a big
        room (limits: OFF_LOOP_MIN_CHARACTERS, OFF_LOOP_MIN_SECONDS). Safe:
        while it runs this room's worker awaits it (its queue waits), and
        what readers outside the queue see is the core's `committed()`,
        changed only by `stored` on the loop."""
        core, costs = self.core, self.costs
        log = await self._undo_log() if step.reads_log else None
        if not step.big:
            return core.evaluate_batch(log)
        ops = [item.op for item in items]
        if not costs.heavy(ops):
            t = time.thread_time()  # CPU: not the machine's other work meanwhile
            found = core.evaluate_batch(log)
            costs.saw(ops, time.thread_time() - t)
            return found
        work = asyncio.ensure_future(asyncio.to_thread(self._evaluate_off_loop, log))
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            # Cancelled (shutdown): the thread still holds the core; let it
            # finish before the batch is rolled back.
            while not work.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait((work,))
            raise
        seconds, found = work.result()
        costs.saw(ops, seconds)
        return found

    def _evaluate_off_loop(self, log: StaticLog | None) -> tuple[float, Step]:
        """In the thread: the loop gets the interpreter back sooner
        meanwhile, and the CPU time is the room's (share.py). Returns that
        CPU time (the thread's: not its waits for the interpreter) and the
        core's next step."""
        took: list[float] = []

        def spent(seconds: float) -> None:
            took.append(seconds)
            self.meter.add(seconds)

        with OFF_LOOP_SWITCH:
            found = metered_call(self.core.evaluate_batch, spent, log)
        return took[0], found

    async def _stored_commands(
        self, keys: list[tuple[str, str]], head: int
    ) -> dict[tuple[str, str], DedupEntry]:
        """Which of these (user, id) the room's log held before the batch (at
        or below its head). None of them when one is stored past it: the
        batch itself landed though its commit failed (a lost reply), and
        answering it again as duplicates would hide that from the room."""
        found = {}
        for user, cmd_id in keys:
            entry = await self.services.storage.stored_command(self.room_id, user, cmd_id)
            if entry is not None:
                if entry.v > head:
                    return {}
                found[(user, cmd_id)] = entry
        return found

    def _carry_out(self, items: list[Command], outputs: list[Output]) -> None:
        """Perform the core's outputs in order; one failure (a sink, a
        callback) never skips the rest."""
        services = self.services
        published: Publish | None = None
        for out in outputs:
            try:
                if isinstance(out, Publish):  # then the Answer of the command that made it
                    published = out
                    services.bus.publish(
                        self.room_id,
                        out.patch,
                        out.view,
                        max_keys=services.limits.max_view_classes_per_patch,
                        on_overflow=self._overflow,
                    )
                    services.metrics.patch()
                elif isinstance(out, Answer):
                    item = items[out.index]
                    if published is not None and item.patch_to is not None:
                        self._hand_patch(item, published)
                    published = None
                    self._answer(item, out.frame, out.outcome)
                elif isinstance(out, CloseUsers):
                    for user in out.users:
                        services.registry.close_user(
                            self.room_id,
                            user,
                            protocol.CLOSE_REVOKED,
                            "user removed or token rotated",
                        )
                elif isinstance(out, RememberToken):
                    services.tokens.remember(out.key, "token", out.token)
                else:
                    assert isinstance(out, Lost)
                    self.lost(out.why, out.code)
            except Exception:
                log.exception("room %s: carrying out %s failed", self.room_id, type(out).__name__)

    def _hand_patch(self, item: Command, published: Publish) -> None:
        """The sender's own patch, for a sender that reads no patches (HTTP);
        a failure here never keeps its answer from going out."""
        assert item.patch_to is not None
        try:
            item.patch_to(published.patch, published.view)
        except Exception:
            log.exception("room %s: the patch of %s not handed over", self.room_id, item.cmd_id)

    def _answer(self, item: Command, frame: dict[str, Any], outcome: str) -> None:
        try:
            item.outcome = outcome
            item.reply(frame)
            services = self.services
            services.metrics.command(item.op, outcome, services.clock.monotonic() - item.received)
            if services.activity is not None:  # the log's per-room summary
                services.activity.command(self.room_id, item.command.actor.user, item.op, outcome)
        except Exception:
            log.exception("room %s: reply to %s failed", self.room_id, item.cmd_id)
        finally:
            if item.done is not None:
                item.done()

    def lost(self, why: str, code: int = protocol.CLOSE_SERVICE_RESTART) -> None:
        """This node no longer serves the room (another node took it over,
        the lease ran out, the room was deleted elsewhere): stop at once.
        Queued commands are answered `internal` (their retry goes to the
        room's new home), and the sessions close with `code` (1012: they
        reconnect, are redirected, resume with `since`)."""
        if self.lost_reason is not None:
            return
        log.warning("room %s: %s; no longer served here", self.room_id, why)
        self.lost_reason = why
        self.refuse_work()
        reason = "room deleted" if code == protocol.CLOSE_ROOM_DELETED else "room moved; reconnect"
        self.services.registry.close_room(self.room_id, code, reason, now=False)
        if self.on_drop is not None:
            self.on_drop(self)

    # --- joins, sync, deletion -------------------------------------------

    def _join(self, j: Join) -> None:
        if j.future.done():  # the session gave up (closed) meanwhile
            return
        services, limits = self.services, self.services.limits
        try:
            welcome, role, epoch = self.core.join(j.user, j.since, j.token_hash)
            if services.registry.count(self.room_id) >= limits.max_connections_per_room:
                raise JoinRefused(
                    "rate_limited", "too many connections to this room", protocol.CLOSE_TOO_MANY
                )
            if services.registry.count(self.room_id, j.user) >= limits.max_connections_per_user:
                raise JoinRefused(
                    "rate_limited", "too many connections for this user", protocol.CLOSE_TOO_MANY
                )
        except JoinRefused as refused:
            j.future.set_exception(refused)
            return
        # Welcome and subscription in one step: no patch can fall between.
        j.sink.viewer = self.core.viewer(j.user)
        sent = j.sink.send(welcome)
        if j.charge is not None:
            j.charge(reply_cost(sent))
        services.bus.subscribe(self.room_id, j.sink)
        services.registry.add(self.room_id, j.sink)
        j.future.set_result((role, epoch))

    def _overflow(self, sink: Subscriber) -> None:
        """`sink` was past a patch's cap of views: hold it for a snapshot
        (`_next` says when it goes). Until it is sent the sink takes no
        patch (`Outbox.stale`): the snapshot, of the state when it is sent,
        covers them."""
        if not self.closed:
            self._stale[sink] = None
            self._wake.set()

    def _resync(self, sink: Subscriber) -> None:
        """A stale subscriber's snapshot: its view of the stored state (no
        batch is open between items), shared by the sinks that see the same
        room (view class) and may do the same things (affordance class):
        players sharing the public view each have affordances of their own,
        and a snapshot shared by view class alone gave one player's to the
        others (issue 33)."""
        self._stale.pop(sink, None)
        if sink.closing or not sink.stale:
            return
        core, viewer = self.core, sink.viewer
        key = core.snapshot_key(viewer)
        v = core.committed().v
        cached = self._resyncs.get(key)
        if cached is None or cached[0] != v:
            frame = protocol.snapshot(v, core.view(viewer, self._resync_memo))
            cached = self._resyncs[key] = (v, Message(frame))
        sink.resync(cached[1])

    def _left(self, item: Left) -> None:
        """In the queue, after every join queued before: the core forgets
        what the user's class may do if none of its sessions is open."""
        self.core.left(item.user, self.services.registry.users(self.room_id))

    def _sync(self, s: Sync) -> None:
        if s.sink.stale:  # held for a snapshot: it goes first, as it was held first
            self._resync(s.sink)
        try:
            sent = s.sink.send(self.core.sync_reply(s.since, s.request_id, s.sink.viewer))
            if s.charge is not None:
                s.charge(reply_cost(sent))
        finally:
            if s.done is not None:
                s.done()

    def _query(self, q: Query) -> None:
        if q.future.done():
            return
        try:
            q.future.set_result(q.read(self.core))
        except Exception as exc:
            q.future.set_exception(exc)

    async def query(self, read: Callable[[RoomCore], Any]) -> Any:
        """`read(core)` in the room's queue: what it reads is stored."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.submit(Query(read, fut))
        return await fut

    async def _delete(self, d: Delete) -> None:
        try:
            await self.services.storage.delete_room(self.room_id, d.admin)
        except Exception as exc:
            if not d.future.done():
                d.future.set_exception(exc)
            return
        self.closed = True
        self.services.registry.close_room(self.room_id, protocol.CLOSE_ROOM_DELETED, "room deleted")
        if not d.future.done():
            d.future.set_result(None)


def _internal(index: int, item: Command) -> Answer:
    """The `index`-th command of a batch answered `internal` by the host."""
    frame = protocol.error(
        "internal", "the server failed on this command; retry", item.command.cmd_id
    )
    return Answer(index, frame, "internal")
