"""Room hosts: the asyncio glue around each loaded room's `RoomCore`.

A `RoomHost` owns a room's work queue and one worker task. Why one worker
per room: commands of a room apply one at a time, in arrival order, while
rooms stay independent of each other. Joins, `sync` requests and deletion
go through the same queue, so a client's welcome and every later patch are
consistent with each other without locks.

The host only queues, awaits storage and carries out what the core
(core/room.py) decided. A batch's path:
  core.batch_size (which queued commands go together) -> core.begin ->
  [the log's undo target, if the batch reads_log] -> core.evaluate_batch
  (pure) -> storage.commit(batch.records, batch.snapshot, batch.expected)
  -> core.stored(batch), or core.failed(batch, error) -> the outputs, in
  order: tokens to remember, then per command its patch to publish, its
  answer, the sessions it ends; last, whether the room is lost.
Nothing is sent before the commit returns, so no client ever holds a
version that a crash could take back. Whatever fails (the rules, the
diff, storage, a publish), every item taken from the queue is answered,
and the core is rolled back to what storage holds.

`Rooms` is the directory: which rooms exist, which are loaded, lazy loading
and idle unloading.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs

import rules
from rules.view import new_memo
from sync_server.cluster.leases import Claim, Leases, Owner, SingleNodeLeases
from sync_server.core.auth import RecentTokens, new_token
from sync_server.core.limits import Limits
from sync_server.core.ratelimit import reply_cost
from sync_server.core.room import (
    Answer,
    CloseUsers,
    CommandIn,
    JoinRefused,
    Lost,
    Output,
    Publish,
    RememberToken,
    RoomCore,
    StaticLog,
)
from sync_server.hosting.bus import Message, RoomBus, Sink
from sync_server.hosting.clock import Clock, SystemClock
from sync_server.hosting.registry import Closable, Registry
from sync_server.ops.activity import Activity
from sync_server.ops.metrics import Metrics
from sync_server.storage import AdminRecord, Storage, replay
from sync_server.wire import protocol

log = logging.getLogger(__name__)


class RoomClosed(Exception):
    """The room was deleted or unloaded while a caller held its host."""


# --- work items ---------------------------------------------------------


@attrs.define
class Command:
    """One `cmd` frame, authenticated. `reply` reaches the sender only;
    `done` frees the sender's in-flight slot once it is answered."""

    command: CommandIn
    reply: Callable[[dict[str, Any]], None]
    done: Callable[[], None] | None = None
    received: float = 0.0
    # Told the stored patch and its view before the reply, for a sender that
    # does not read the room's patches (the HTTP door answers with it).
    patch_to: Callable[[dict[str, Any], Any], None] | None = None

    @property
    def op(self) -> Any:
        return self.command.op

    @property
    def cmd_id(self) -> str:
        return self.command.cmd_id


class Subscriber(Sink, Closable, Protocol):
    """What a joining session hands the room: a sink for the bus and a
    closable for the registry (one object, two narrow interfaces), able to
    take a frame of its own (the welcome, a sync reply)."""

    # Waiting for a snapshot of its view (past a patch's cap of views).
    stale: bool

    def send(self, frame: dict[str, Any]) -> int:
        """Send a frame to this subscriber only; returns the bytes it took."""
        ...

    def resync(self, message: Message) -> None:
        """Its snapshot: no longer stale, the room's messages reach it again."""
        ...


@attrs.define
class Join:
    """A hello for this room: answered with a welcome on `sink`, which then
    receives every later patch. `future` gets (role, epoch)."""

    sink: Subscriber
    user: str
    since: int | None
    future: asyncio.Future[tuple[str, int]]
    # Told what the welcome cost (ratelimit.reply_cost), for the user's bucket.
    charge: Callable[[float], None] | None = None
    # The hash of the token the hello authenticated: still the user's? (RoomCore.join)
    token_hash: bytes | None = None


@attrs.define
class Sync:
    """A `sync` frame: patches after `since`, or a snapshot."""

    sink: Subscriber
    since: int
    request_id: str | None = None
    done: Callable[[], None] | None = None
    # Told what the reply cost (ratelimit.reply_cost), for the user's bucket.
    charge: Callable[[float], None] | None = None


@attrs.define
class Delete:
    admin: AdminRecord
    future: asyncio.Future[None]


@attrs.define
class Query:
    """A read of the room as stored (between batches, never halfway through
    one): `read(core)`'s value, or its exception, goes to `future`."""

    read: Callable[[RoomCore], Any]
    future: asyncio.Future[Any]


@attrs.define
class Barrier:
    """Resolved once every item queued before it is done (shutdown, tests)."""

    future: asyncio.Future[None]


@attrs.define
class Resync:
    """A subscriber past a patch's cap of views (bus.Message.admit): it gets
    a snapshot of its view, one per turn of the loop."""

    sink: Subscriber


Item = Command | Join | Sync | Query | Delete | Barrier | Resync


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


class RoomHost:
    """A loaded room: its core, its queue and its worker."""

    def __init__(self, core: RoomCore, services: RoomServices) -> None:
        self.core = core
        self.room_id = core.room_id
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
        # Resync snapshots by view class, at a version: shared by the sinks
        # of one class until the queue is empty again.
        self._resyncs: dict[Any, tuple[int, Message]] = {}
        self._resync_memo: Any = new_memo()  # their status views, likewise
        self._task = asyncio.get_running_loop().create_task(self._run())

    # What is stored, for callers outside the queue (sessions, demo, admin,
    # tests): never a version a failed commit could still take back.
    @property
    def state(self) -> dict[str, Any]:
        return self.core.committed[0]

    @property
    def v(self) -> int:
        return self.core.committed[1]

    @property
    def epochs(self) -> dict[str, int]:
        return self.core.committed[2]

    # --- queue ------------------------------------------------------------

    def submit(self, item: Item) -> None:
        if self.closed:
            raise RoomClosed(self.room_id)
        self._items.append(item)
        self._wake.set()

    def refuse_work(self) -> None:
        """Take no new work; what is queued gets `internal` (retry): the
        room is served elsewhere now, or about to be."""
        self.closed = True
        self._closed_answer = ("internal", "this server stopped serving the room; retry")

    def touch(self) -> None:
        """Something happened in the room (a client left): its idle time
        counts from now."""
        self.last_active = self.services.clock.monotonic()

    async def barrier(self) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.submit(Barrier(fut))
        await fut

    @property
    def idle(self) -> bool:
        return (
            not self._items
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

    async def _run(self) -> None:
        while True:
            while not self._items:
                self._resyncs.clear()
                self._resync_memo = new_memo()
                self._wake.clear()
                await self._wake.wait()
            item = self._items.popleft()
            self._busy = True
            try:
                if isinstance(item, Command):
                    queued = [item.op]
                    for nxt in self._items:  # the commands queued right behind it
                        if not isinstance(nxt, Command):
                            break
                        queued.append(nxt.op)
                    n = self.core.batch_size(queued, self.services.limits.max_command_batch)
                    batch = [item] + [self._items.popleft() for _ in range(n - 1)]
                    await self._run_batch(batch)  # type: ignore[arg-type]
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
                    self._resync(item)
                    await asyncio.sleep(0)  # one per turn: other rooms in between
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

    def _fail_queued(self) -> None:
        """After deletion or unloading: answer whatever is still queued."""
        code, message = self._closed_answer
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

    async def _run_batch(self, items: list[Command]) -> None:
        """Store what the core evaluated, then carry out its outputs: every
        item is answered exactly once, whatever fails on the way."""
        core, services = self.core, self.services
        batch = core.begin([item.command for item in items])
        try:
            reader = None
            if batch.reads_log:
                storage = services.storage
                target = await storage.undo_target(self.room_id)
                after = None
                if target is not None:  # what the next undo reverts (the GM's affordances)
                    after = await storage.undo_target(self.room_id, target.v)
                reader = StaticLog(target, after)
            core.evaluate_batch(batch, reader)
            if batch.records:
                await services.storage.commit(
                    self.room_id, batch.records, batch.snapshot, expected=batch.expected
                )
            outputs = core.stored(batch)
        except BaseException as exc:
            self._carry_out(items, core.failed(batch, exc))
            if not isinstance(exc, Exception):  # cancelled (shutdown): answered; go on
                raise
            return
        self._carry_out(items, outputs)

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
        """`sink` was past a patch's cap of views: queue its snapshot. Until
        it is sent the sink takes no patch (`Outbox.stale`): the snapshot,
        of the state when it is sent, covers them."""
        if not self.closed:
            self._items.append(Resync(sink))
            self._wake.set()

    def _resync(self, r: Resync) -> None:
        """A stale subscriber's snapshot: its view of the stored state (no
        batch is open between items), shared by its view class's sinks."""
        sink = r.sink
        if sink.closing or not sink.stale:
            return
        viewer = sink.viewer
        cls = rules.view_class(self.core.state, viewer) if viewer is not None else None
        cached = self._resyncs.get(cls)
        if cached is None or cached[0] != self.core.v:
            frame = protocol.snapshot(self.core.v, self.core.view(viewer, self._resync_memo))
            cached = self._resyncs[cls] = (self.core.v, Message(frame))
        sink.resync(cached[1])

    def _sync(self, s: Sync) -> None:
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


class Rooms:
    """Every room: the ids that exist (cheap, loaded at start) and the hosts
    of the rooms in use (loaded lazily on first use, unloaded when idle), so
    a server with 10,000 rooms starts fast and holds only the busy ones.

    In cluster mode (`services.leases` is a database's), a room is loaded
    only once claimed (ownership.py): a room another node serves is answered
    with that node (`locate` gives its `Owner`), a room lost (its lease
    taken, expired or released, or the room deleted elsewhere) is dropped
    at once, and idle rooms give their lease up. Alone on its storage, every
    claim succeeds and the same code serves one node."""

    def __init__(self, services: RoomServices) -> None:
        self.services = services
        self.known: set[str] = set()
        self.hosts: dict[str, RoomHost] = {}
        self._loading: dict[str, asyncio.Future[RoomHost | Owner | None]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # Room loads begun so far (RoomHost.load_seq).
        self.loads = 0

    @property
    def cluster(self) -> bool:
        """Do other nodes serve rooms of the same storage?"""
        return not isinstance(self.services.leases, SingleNodeLeases)

    async def start(self) -> None:
        self.known = await self.services.storage.room_ids()
        self.services.metrics.rooms.set(len(self.known))
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def exists(self, room: str) -> bool:
        """Known to exist here (in cluster mode, rooms created by other
        nodes since the start are found by `has`)."""
        return room in self.known

    async def has(self, room: str) -> bool:
        """Does the room exist (asking the shared storage in cluster mode)?"""
        if room in self.known:
            return True
        if self.cluster and await self.services.leases.owner(room) is not None:
            self.created(room)
            return True
        return False

    def new_core(self, loaded: Any) -> RoomCore:
        s = self.services
        return RoomCore(
            loaded,
            dice=s.dice,
            wall_clock=s.clock.time,
            new_token=s.new_token,
            recent_tokens=s.tokens,
            limits=s.limits,
            check_invariants=s.check_invariants,
            affordances=s.affordances,
        )

    async def get(self, room: str) -> RoomHost | None:
        """The room's host, loading it on first use; None if no such room
        (or, in cluster mode, if another node serves it)."""
        found = await self.locate(room)
        return found if isinstance(found, RoomHost) else None

    async def locate(self, room: str) -> RoomHost | Owner | None:
        """Where the room is served: its host here (claimed and loaded on
        first use), the `Owner` node serving it (cluster mode), or None if
        there is no such room."""
        host = self.hosts.get(room)
        if host is not None and not host.closed:
            return host
        if room not in self.known and not self.cluster:
            return None
        pending = self._loading.get(room)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[RoomHost | Owner | None] = asyncio.get_running_loop().create_future()
        self._loading[room] = fut
        try:
            found = await self._claim_and_load(room)
            fut.set_result(found)
            return found
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._loading[room]

    async def _claim_and_load(self, room: str) -> RoomHost | Owner | None:
        claim = await self.services.leases.claim(room)
        if claim is None:  # no such room (deleted elsewhere, or never was)
            self.known.discard(room)
            return None
        if isinstance(claim, Owner):
            return claim
        assert isinstance(claim, Claim)
        limits = self.services.limits
        self.loads += 1
        load_seq = self.loads
        try:
            stored = await self.services.storage.load_room(
                room,
                limits.recent_patches_in_memory,
                limits.dedup_window_versions,
                self.services.clock.time() - limits.dedup_window_seconds,
            )
        except BaseException:
            await self._release(room)
            raise
        if stored is None or (room not in self.known and not self.cluster):
            await self._release(room)
            return None
        try:
            undo = await self.services.storage.undo_target(room)
        except BaseException:
            await self._release(room)
            raise
        loaded = attrs.evolve(replay(stored, limits.recent_patches_in_memory), undo=undo)
        host = RoomHost(self.new_core(loaded), self.services)
        host.on_drop = self._dropped
        host.load_seq = load_seq
        self.hosts[room] = host
        self.created(room)
        self.services.metrics.rooms_loaded.set(len(self.hosts))
        return host

    async def _release(self, *rooms: str) -> None:
        """Give rooms' leases up (cluster mode); a failure only delays the
        takeover until the lease expires."""
        try:
            await self.services.leases.release(rooms)
        except Exception as exc:
            log.warning("releasing %s failed (the lease will expire): %s", rooms, exc)

    def _dropped(self, host: RoomHost) -> None:
        """A host closed itself (lost): forget it and stop its worker."""
        if self.hosts.get(host.room_id) is host:
            del self.hosts[host.room_id]
            self.services.metrics.rooms_loaded.set(len(self.hosts))
        self._spawn(host.stop())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def lost(self, rooms: set[str]) -> None:
        """The lease keeper says these rooms are no longer this node's
        (taken over, expired while the database was unreachable, or
        deleted): drop their hosts at once (no new work gets in). Whether a
        room was deleted is then asked of the database, to close its
        sessions with 4404 rather than 1012."""
        for room in rooms:
            host = self.hosts.get(room)
            if host is None or host.lost_reason is not None:
                continue
            host.refuse_work()  # at once, while we find out why
            self._spawn(self._lose(host))

    async def _lose(self, host: RoomHost) -> None:
        code = protocol.CLOSE_SERVICE_RESTART
        with contextlib.suppress(Exception):
            if await self.services.leases.owner(host.room_id) is None:
                code = protocol.CLOSE_ROOM_DELETED
                self.known.discard(host.room_id)
        host.lost("its lease is lost", code)

    async def release_all(self) -> None:
        """Draining (cluster mode): stop every room and give its lease up,
        so that its clients, closed with 1012, are served by another node
        at once. Queued commands finish first (`drain`)."""
        hosts = list(self.hosts.items())
        self.hosts.clear()
        for _, host in hosts:
            await host.stop()
        if hosts:
            await self._release(*(room for room, _ in hosts))

    def created(self, room: str) -> None:
        self.known.add(room)
        self.services.metrics.rooms.set(len(self.known))

    async def delete(self, room: str, admin: AdminRecord) -> None:
        """Delete a room: queued commands finish first, then the room's
        storage goes and its clients are closed with 4404."""
        host = await self.get(room)
        self.known.discard(room)  # no new hello gets in from now on
        try:
            if host is not None:
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                host.submit(Delete(admin, fut))
                await fut
                self.hosts.pop(room, None)
            else:
                await self.services.storage.delete_room(room, admin)
        except BaseException:
            self.known.add(room)
            raise
        self.services.metrics.rooms.set(len(self.known))
        self.services.metrics.rooms_loaded.set(len(self.hosts))

    async def replace(self, room: str, store: Callable[[], Awaitable[None]]) -> None:
        """Replace an existing room's stored content (an import with
        `replace`), while it may be in use. Hellos for the room wait (as
        during a lazy load) until the new room is loaded; the old host
        finishes its queued work and stops; its sessions are closed with
        1012 and reconnect to the new room. `store` writes the new room
        (all or nothing); if it fails, the old room is loaded again."""
        fut: asyncio.Future[RoomHost | Owner | None] = asyncio.get_running_loop().create_future()
        while room in self._loading:  # a load in progress: let it finish first
            await asyncio.shield(self._loading[room])
        self._loading[room] = fut
        try:
            old = self.hosts.pop(room, None)
            if old is not None and not old.closed:
                await old.barrier()
                await old.stop()
            self.services.registry.close_room(
                room, protocol.CLOSE_SERVICE_RESTART, "room replaced; reconnect", now=False
            )
            failed: BaseException | None = None
            try:
                await store()
            except BaseException as exc:
                failed = exc
            # The new room is claimed afresh (cluster mode: a replaced room
            # fences whoever served it) and loaded.
            fut.set_result(await self._claim_and_load(room))
            if failed is not None:
                raise failed
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._loading[room]

    async def drain(self) -> None:
        """Wait until every queued command is applied, committed and sent."""
        hosts = [h for h in self.hosts.values() if not h.closed]
        if hosts:
            await asyncio.gather(*(h.barrier() for h in hosts), return_exceptions=True)

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for host in list(self.hosts.values()):
            await host.stop()
        self.hosts.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def unload_idle(self) -> list[str]:
        """Drop idle rooms from memory (they reload lazily); returns their ids.

        Each `await host.stop()` lets other tasks run, so a later room of the
        snapshot may meanwhile have been deleted (its host popped), and even
        re-created and loaded again (a new host under the same id). Only the
        very host found idle is dropped: deleting `hosts[room]` blindly would
        raise KeyError (ending the sweeper for good) or drop the new host
        without stopping it (a live orphan, then a second host for the room).
        A host that closed itself (it lost the room to another writer) goes
        too."""
        dropped = []
        for room, host in list(self.hosts.items()):
            if (host.idle or host.closed) and self.hosts.get(room) is host:
                del self.hosts[room]
                await host.stop()
                if host.lost_reason is None:
                    await self._release(room)  # ownership must not pile up on one node
                dropped.append(room)
        self.services.metrics.rooms_loaded.set(len(self.hosts))
        return dropped

    async def _sweep(self) -> None:
        limits = self.services.limits
        while True:
            await self.services.clock.sleep(max(1.0, limits.room_idle_unload_seconds / 5))
            await self.unload_idle()


__all__ = [
    "Barrier",
    "Command",
    "Delete",
    "Join",
    "JoinRefused",
    "Query",
    "RoomClosed",
    "RoomHost",
    "RoomServices",
    "Rooms",
    "Sync",
]
