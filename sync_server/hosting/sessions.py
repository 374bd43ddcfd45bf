"""Sessions: the asyncio glue of one WebSocket connection, hello to close.

What each frame means is decided by the sans-I/O session core
(core/session.py); this module reads frames, authenticates the hello,
carries out the core's actions (a command for the room's queue or the admin
service, a `sync`, an error, a close) and owns the connection's in-flight
bound. Everything it sends goes through its `Outbox`, so a slow reader
never blocks a room.

A session sees the rest of the server only through `SessionDeps`, a narrow
set of collaborators, never the `Server` itself.

What it never does: decide a rule, or log a token (hello frames are never
logged; only user ids and rooms are).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

import rules
from rules.state import role_of
from sync_server.clock import Clock
from sync_server.cluster.leases import Owner
from sync_server.core.auth import hash_token, same_hash
from sync_server.core.inputs import CommandIn
from sync_server.core.limits import Limits
from sync_server.core.ratelimit import Buckets, TokenBucket
from sync_server.core.reads import JoinRefused
from sync_server.core.session import (
    Authenticate,
    CloseNow,
    HelloAction,
    HelloRefused,
    Ignore,
    JoinRoom,
    Locate,
    OpenAdmin,
    Opened,
    ReadHello,
    RedirectTo,
    Refuse,
    Reply,
    ReplyAndClose,
    RunCommand,
    RunSync,
    SessionCore,
    unauthenticated,
)
from sync_server.hosting.admin import ADMIN_USER
from sync_server.hosting.bus import RoomBus
from sync_server.hosting.outbox import Outbox, OutboxBudget
from sync_server.hosting.registry import Registry
from sync_server.hosting.room_host import RoomHost
from sync_server.hosting.rooms import Rooms
from sync_server.hosting.web import peer_of
from sync_server.hosting.work import Command, Join, RoomClosed, Sync
from sync_server.observe.activity import Activity
from sync_server.observe.metrics import Metrics
from sync_server.storage import StorageError
from sync_server.wire import protocol
from sync_server.wire.codec import BadFrame, Codec, codec_for

log = logging.getLogger(__name__)


class HelloGate:
    """The failed-hello allowance of each peer address, reserved at accept.

    A hello takes one failed hello from its address's bucket before it is
    read (`reserve`), and gives it back unless it fails (`release`): hellos
    arriving together cannot all pass a check that costs nothing and be
    charged only once they fail (300 at once all passed, then their debt
    locked the address, and everyone behind its NAT, for a minute). The
    bucket never goes below zero, so an address recovers within burst /
    rate. When the allowance is spent but hellos of that address are still
    in flight, the next one waits for them (an honest crowd behind one NAT,
    whose hellos succeed and give their reservation back, all pass); when
    none is in flight, it is turned away."""

    def __init__(self, buckets: Buckets | None, clock: Clock) -> None:
        self.buckets = buckets
        self.clock = clock
        self._inflight: dict[str, int] = {}
        self._released: dict[str, asyncio.Event] = {}

    async def reserve(self, peer: str, deadline: float) -> bool:
        """Reserve one failed hello for `peer`; False when its allowance is
        spent (and stays so, with hellos in flight, until the clock port
        reads `deadline`: the hello's own, which its read shares)."""
        if self.buckets is None:
            return True
        try:
            async with self.clock.timeout(deadline - self.clock.monotonic()):
                while True:
                    now = self.clock.monotonic()
                    if self.buckets.get(peer, now).allow(now, 1.0):
                        self._inflight[peer] = self._inflight.get(peer, 0) + 1
                        return True
                    if not self._inflight.get(peer):
                        return False
                    await self._released.setdefault(peer, asyncio.Event()).wait()
        except TimeoutError:
            return False

    def charge(self, peer: str) -> None:
        """A failed attempt of `peer` that reserved nothing (an HTTP request
        refused before its head was read, or by its body after its token was
        checked): one taken if the allowance has one (never below zero)."""
        if self.buckets is None:
            return
        now = self.clock.monotonic()
        self.buckets.get(peer, now).allow(now, 1.0)

    def release(self, peer: str, failed: bool) -> None:
        """The reserved hello is over: a failure keeps what it took."""
        if self.buckets is None:
            return
        left = self._inflight.get(peer, 1) - 1
        if left > 0:
            self._inflight[peer] = left
        else:
            self._inflight.pop(peer, None)
        if not failed:
            now = self.clock.monotonic()
            self.buckets.get(peer, now).refund(now, 1.0)
        waiting = self._released.pop(peer, None)
        if waiting is not None:
            waiting.set()


@attrs.frozen
class SessionDeps:
    """What a session needs of its server, and nothing more."""

    limits: Limits
    buckets: Buckets | None  # players and observers, per room and user
    gm_buckets: Buckets | None  # GM and admin sessions, per room and user
    hello_failures: Buckets | None  # refused hellos, per peer address
    admin_hash: bytes
    find_token: Callable[[bytes], Awaitable[tuple[str, str] | None]]
    rooms: Rooms
    admin: Callable[[str, Any, Any], Awaitable[dict[str, Any]]]
    registry: Registry
    bus: RoomBus
    metrics: Metrics
    clock: Clock
    shutting_down: Callable[[], bool]
    opened: Callable[[Session], None]
    closed: Callable[[Session], None]
    # Admin sessions holding a slot (reserved at the check, before the welcome).
    admin_slots: set[Any]
    fast_fanout: bool = True
    # Session lines and command summaries at INFO (activity.py); None: not logged.
    activity: Activity | None = None
    # Reverse proxies whose X-Forwarded-For names the client (web.client_address).
    trusted_proxies: frozenset[str] = frozenset()
    # What all clients may hold unsent, per room and server-wide (outbox.py).
    outbox_budget: OutboxBudget | None = None

    # Reserves each hello's failure in `hello_failures` at accept (HelloGate).
    hello_gate: HelloGate = attrs.field(
        default=attrs.Factory(
            lambda self: HelloGate(self.hello_failures, self.clock), takes_self=True
        )
    )


def request_bucket(deps: SessionDeps, role: str | None, room: str, user: str) -> TokenBucket | None:
    """The request allowance of `user` in `room`, shared by all of that
    user's sessions and HTTP requests (GM and admin: their own rate,
    unlimited by default)."""
    buckets = deps.gm_buckets if role in ("gm", "admin") else deps.buckets
    return None if buckets is None else buckets.get((room, user), deps.clock.monotonic())


class Session:
    """One client connection."""

    def __init__(self, deps: SessionDeps, ws: ServerConnection) -> None:
        self.deps = deps
        self.ws = ws
        self.codec: Codec = codec_for(ws.subprotocol)
        self.user: str | None = None
        self.role: str | None = None
        self.room_id: str | None = None
        self.host: RoomHost | None = None
        self.epoch = 0
        self.outbox: Outbox | None = None
        self.core: SessionCore | None = None
        self.bucket: TokenBucket | None = None
        self.inflight = asyncio.Semaphore(deps.limits.max_inflight_per_session)
        self._peer: str | None = None
        self._cleaned = False
        # Set only by the admin token's hello (`_open_admin`): what routes
        # commands to the admin service, never a role read from a room.
        self.is_admin = False
        # The failed-hello allowance this connection reserved at its accept
        # (HelloGate): kept if the hello fails, given back otherwise.
        self._hello_reserved = False

    # --- lifecycle --------------------------------------------------------

    @property
    def peer(self) -> str:
        """The client's address (behind a trusted proxy: the one it names)."""
        if self._peer is None:
            request = getattr(self.ws, "request", None)
            self._peer = peer_of(self.ws, request, self.deps.trusted_proxies)
        return self._peer

    async def run(self) -> None:
        try:
            opened = await self._hello()
            self._refund_hello()  # refused as a guess: _hello_failed kept it
            if not opened:
                return
            self.deps.opened(self)
            opened_at = self.deps.clock.monotonic()
            activity = self.deps.activity
            if activity is not None:
                activity.session_opened(self.room_id, self.user or "", self.role or "", self.peer)
            try:
                await self._loop()
            finally:
                self.deps.closed(self)
                await self._cleanup()
                if activity is not None:
                    code, reason, by = self._close_info()
                    activity.session_closed(
                        self.room_id,
                        self.user or "",
                        self.role or "",
                        self.peer,
                        self.deps.clock.monotonic() - opened_at,
                        code,
                        reason,
                        by,
                    )
        finally:
            self._refund_hello()  # a hello cut short (cancelled) gives it back too
            await self._cleanup()

    def _close_info(self) -> tuple[int | None, str, str]:
        """(close code, reason, who closed: server, client or network)."""
        proto = getattr(self.ws, "protocol", None)
        sent = getattr(proto, "close_sent", None)
        rcvd = getattr(proto, "close_rcvd", None)
        if sent is not None and (rcvd is None or not getattr(proto, "close_rcvd_then_sent", True)):
            return sent.code, sent.reason, "server"
        if rcvd is not None:
            return rcvd.code, rcvd.reason, "client"
        return protocol.WS_CLOSE_ABNORMAL, "connection lost", "network"

    def _hello_failed(self, reason: str) -> None:
        """A refused hello: logged with the peer and the reason (never the
        token). It counts against the peer address through the allowance
        it reserved at its accept, which is not given back."""
        log.info("hello refused from %s: %s", self.peer, reason)
        if self._hello_reserved:
            self._hello_reserved = False
            self.deps.hello_gate.release(self.peer, failed=True)

    def _refund_hello(self) -> None:
        """The hello did not fail (welcomed, redirected, timed out, the
        storage down): its reservation goes back to the address's allowance."""
        if self._hello_reserved:
            self._hello_reserved = False
            self.deps.hello_gate.release(self.peer, failed=False)

    async def _redirect(self, url: str) -> None:
        """Cluster mode: another node serves the room; the client goes there
        with the same hello (4302)."""
        with contextlib.suppress(ConnectionClosed, OSError):
            await self.ws.send(self.codec.encode(protocol.redirect(url)))
            await self.ws.close(protocol.CLOSE_REDIRECT, "served by another node")

    async def _refuse_now(self, refused: HelloRefused) -> None:
        with contextlib.suppress(ConnectionClosed, OSError):
            await self.ws.send(self.codec.encode(refused.frame()))
            await self.ws.close(refused.close, refused.message[:100])

    async def _cleanup(self) -> None:
        if self._cleaned:  # run() cleans before its closing line, and again in finally
            return
        self._cleaned = True
        if self.core is not None:
            self.core.closed()
        self.deps.admin_slots.discard(self)
        if self.outbox is not None:
            if self.room_id is not None and self.host is not None:
                self.deps.bus.unsubscribe(self.room_id, self.outbox)
                self.deps.registry.remove(self.room_id, self.outbox)
                if self.user is not None:
                    self.host.left(self.user)
            if self.outbox.closing:
                # A close was decided (4403, 4400, 1013...): let it finish,
                # bounded by the close timeout.
                with contextlib.suppress(TimeoutError):
                    async with self.deps.clock.timeout(2 * self.deps.limits.close_timeout):
                        await self.outbox.flushed()
            await self.outbox.stop()

    # --- hello ------------------------------------------------------------

    async def _hello(self) -> bool:
        """Carry out the core's hello actions until the session is open
        (True) or refused, redirected or gone (False). Every decision is the
        core's; this awaits what each action asks and feeds the answer back."""
        core = SessionCore.awaiting_hello()
        self.core = core
        limits = self.deps.limits
        # One failed hello reserved at the accept (HelloGate), before the
        # hello is read; given back unless it fails.
        # One deadline for the wait at the gate and the hello's read: a hello
        # takes at most `hello_timeout` from the accept (each had its own).
        clock = self.deps.clock
        deadline = clock.monotonic() + limits.hello_timeout
        allowed = await self.deps.hello_gate.reserve(self.peer, deadline)
        self._hello_reserved = allowed and self.deps.hello_failures is not None
        action: HelloAction = core.start(
            allowed, deadline - clock.monotonic(), limits.hello_penalty_seconds
        )
        host: RoomHost | None = None
        digest, found, looked_up = b"", None, 0  # the token, its owner, loads before its lookup
        try:
            while True:
                if isinstance(action, ReadHello):
                    action = await self._read_hello(core, action.timeout)
                elif isinstance(action, Authenticate):
                    digest = hash_token(action.hello.token)
                    if same_hash(digest, self.deps.admin_hash):
                        slot_free = len(self.deps.admin_slots) < limits.max_admin_connections
                        action = core.admin_token(slot_free)
                    else:
                        looked_up = self.deps.rooms.loads  # room loads begun before it
                        found = await self.deps.find_token(digest)
                        action = core.room_token(found)
                elif isinstance(action, Locate):
                    where = await self.deps.rooms.locate(action.room)
                    if isinstance(where, Owner):
                        action = core.located("elsewhere", where.url or "")
                    elif where is None:
                        action = core.located("nowhere")
                    else:
                        loads = self.deps.rooms.loads  # if it looks the token up again
                        relooked = where.load_seq > looked_up
                        still = await where.token_still_found(
                            looked_up, digest, found, self.deps.find_token
                        )
                        if relooked:
                            looked_up = loads
                        if still:
                            host = where
                            action = core.located("here")
                        else:
                            action = core.refused(unauthenticated())
                elif isinstance(action, JoinRoom):
                    assert host is not None
                    action = await self._join(core, host, action, digest)
                elif isinstance(action, OpenAdmin):
                    self._open_admin()
                    core.opened(self.bucket)
                    return True
                elif isinstance(action, Opened):
                    log.debug("room %s: %s (%s) connected", self.room_id, self.user, self.role)
                    return True
                elif isinstance(action, Refuse):
                    if action.failed:
                        self._hello_failed(action.refusal.message)
                    else:
                        log.info("hello from %s refused: %s", self.peer, action.refusal.message)
                    if action.wait:
                        await self.deps.clock.sleep(action.wait)
                    await self._refuse_now(action.refusal)
                    return False
                elif isinstance(action, RedirectTo):
                    await self._redirect(action.url)
                    return False
                else:
                    assert isinstance(action, CloseNow)
                    with contextlib.suppress(ConnectionClosed, OSError):
                        await self.ws.close(action.code, action.reason)
                    return False
        except ConnectionClosed:
            return False
        except StorageError as exc:
            log.warning("hello for a room failed: cannot reach the storage: %s", exc)
            await self._refuse_now(
                HelloRefused(
                    "internal",
                    "the server cannot reach its storage; retry",
                    protocol.CLOSE_INTERNAL,
                )
            )
            return False

    async def _read_hello(self, core: SessionCore, timeout: float) -> HelloAction:
        try:
            async with self.deps.clock.timeout(timeout):
                message = await self.ws.recv()
        except TimeoutError:
            return core.hello_timed_out()
        try:
            frame: dict[str, Any] | Exception = self.codec.decode(message)
        except BadFrame as exc:
            frame = exc
        return core.hello_received(frame)

    async def _join(
        self, core: SessionCore, host: RoomHost, join: JoinRoom, digest: bytes
    ) -> HelloAction:
        """Submit the join to the room's queue and feed its answer back."""
        room, user = join.room, join.user
        bucket = self._bucket(role_of(host.state, user), room, user)
        if bucket is not None and not bucket.allow(self.deps.clock.monotonic()):
            refusal = HelloRefused(
                "rate_limited",
                "too many requests for this user; slow down",
                protocol.CLOSE_TOO_MANY,
            )
            return core.refused(refusal)
        charge = None if bucket is None else self._charger(bucket)
        outbox = self._new_outbox(user, room)
        fut: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        try:
            host.submit(Join(outbox, user, join.since, fut, charge, digest))
            role, epoch = await fut
        except RoomClosed:
            return core.join_retry()  # deleted, unloaded or moved meanwhile: look again
        except JoinRefused as refused:
            return core.refused(HelloRefused(refused.code, refused.message, refused.close))
        except BaseException:
            fut.cancel()
            raise
        self.user, self.role, self.room_id, self.host, self.epoch = user, role, room, host, epoch
        self.outbox = outbox
        self.bucket = self._bucket(role, room, user)
        return core.joined(role, self.bucket)

    def _bucket(self, role: str | None, room: str, user: str) -> TokenBucket | None:
        return request_bucket(self.deps, role, room, user)

    def _charger(self, bucket: TokenBucket) -> Callable[[float], None]:
        def charge(cost: float) -> None:
            bucket.charge(self.deps.clock.monotonic(), cost)

        return charge

    def _open_admin(self) -> None:
        # The core checked for a free slot and this reserves it with no await
        # in between, so hellos arriving at the same instant cannot all pass
        # the check; the slot is freed in _cleanup, whatever happens next.
        self.deps.admin_slots.add(self)
        self.is_admin = True
        self.user, self.role = ADMIN_USER, "admin"
        self.outbox = self._new_outbox(ADMIN_USER)
        self.outbox.send(protocol.admin_welcome(ADMIN_USER))
        self.bucket = self._bucket("admin", "", ADMIN_USER)
        log.debug("admin session connected")

    def _new_outbox(self, user: str, room: str | None = None) -> Outbox:
        limits = self.deps.limits
        return Outbox(
            self.ws,
            self.codec,
            user,
            max_bytes=limits.outbox_max_bytes,
            close_timeout=limits.close_timeout,
            fast=self.deps.fast_fanout,
            on_sent=self.deps.metrics.frames,
            on_too_slow=self._too_slow,
            budget=self.deps.outbox_budget,
            room=room,
            clock=self.deps.clock,
        )

    def _too_slow(self) -> None:
        self.deps.metrics.slow_closes.inc()
        log.info("room %s: %s closed, too slow to read (1013)", self.room_id, self.user)
        if self.room_id is not None and self.outbox is not None and self.host is not None:
            self.deps.bus.unsubscribe(self.room_id, self.outbox)
            self.deps.registry.remove(self.room_id, self.outbox)

    # --- frames -----------------------------------------------------------

    async def _loop(self) -> None:
        assert self.outbox is not None and self.core is not None
        with contextlib.suppress(ConnectionClosed):
            async for message in self.ws:
                # Once a close is under way (4403, 1013, a second hello...),
                # frames are read and dropped: reading is what lets the
                # peer's close frame, queued behind them, complete the
                # closing handshake instead of waiting for the close timeout.
                if self.outbox.closing:
                    self.core.closing()
                    continue
                await self._frame(message)

    def _send(self, frame: dict[str, Any]) -> None:
        assert self.outbox is not None
        self.outbox.send(frame)

    async def _frame(self, message: bytes | str) -> None:
        assert self.core is not None and self.outbox is not None
        try:
            frame: dict[str, Any] | Exception = self.codec.decode(message)
        except BadFrame as exc:
            frame = exc
        limited = self.core.rate_limited
        action = self.core.receive(frame, self.deps.clock.monotonic(), self.deps.shutting_down())
        if self.core.rate_limited != limited:
            self.deps.metrics.rate_limited.inc()
        if isinstance(action, Reply):
            self._send(action.frame)
        elif isinstance(action, ReplyAndClose):
            self._send(action.frame)
            self.outbox.close_after(action.code, action.reason)
        elif isinstance(action, RunSync):
            await self._sync(action)
        elif isinstance(action, RunCommand):
            await self._command(action)
        else:
            assert isinstance(action, Ignore)

    async def _command(self, action: RunCommand) -> None:
        if self.is_admin:
            frame = await self.deps.admin(action.cmd_id, action.op, action.args)
            self._send(frame)
            if self.deps.activity is not None:  # room commands are counted by their room
                outcome = "dup" if frame.get("dup") else frame.get("code") or "ok"
                self.deps.activity.command(None, self.user or "", action.op, outcome)
            return
        await self.inflight.acquire()
        if self.deps.shutting_down():  # it began while we waited for a slot
            self.inflight.release()
            self._send(
                protocol.error(
                    "internal", "the server is shutting down; retry later", action.cmd_id
                )
            )
            return
        command = CommandIn(
            actor=rules.Actor(user=self.user or "", role=self.role or ""),
            epoch=self.epoch,
            cmd_id=action.cmd_id,
            op=action.op,
            args=action.args,
            expect=action.expect,
        )
        self._submit(
            Command(command, self._send, self.inflight.release, self.deps.clock.monotonic())
        )

    async def _sync(self, action: RunSync) -> None:
        assert self.outbox is not None
        await self.inflight.acquire()
        charge = None if self.bucket is None else self._charger(self.bucket)
        self._submit(
            Sync(self.outbox, action.since, action.request_id, self.inflight.release, charge)
        )

    def _submit(self, item: Command | Sync) -> None:
        assert self.host is not None and self.outbox is not None
        try:
            self.host.submit(item)
        except RoomClosed:
            if item.done is not None:
                item.done()
            cmd_id = item.cmd_id if isinstance(item, Command) else item.request_id
            if self.host.lost_reason is not None:  # cluster: served elsewhere now
                self._send(
                    protocol.error(
                        "internal", "this server stopped serving the room; retry", cmd_id
                    )
                )
                self.outbox.close_after(protocol.CLOSE_SERVICE_RESTART, "room moved; reconnect")
                return
            self._send(protocol.error("not_found", "the room was deleted", cmd_id))
            self.outbox.close_after(protocol.CLOSE_ROOM_DELETED, "room deleted")
