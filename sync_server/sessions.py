"""Sessions: one per WebSocket connection, from hello to close.

The session authenticates the hello, then turns each frame into work: a
`cmd` or `sync` for its room's queue (or the admin service), errors for
anything malformed. It owns the connection's rate limit and its in-flight
bound; everything it sends goes through its `Outbox`, so a slow reader
never blocks a room.

What it never does: decide a rule, or log a token (hello frames are never
logged; only user ids and rooms are).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

import rules
from sync_server import frames
from sync_server.admin import ADMIN_USER
from sync_server.auth import hash_token, plausible_token, same_hash
from sync_server.codec import BadFrame, Codec, codec_for
from sync_server.fanout import Outbox
from sync_server.limits import (
    CLOSE_TIMEOUT_SECONDS,
    CLOSE_TOO_MANY_CONNECTIONS,
    MAX_ADMIN_CONNECTIONS,
    MAX_CMD_ID_LENGTH,
    MAX_INFLIGHT_PER_SESSION,
)
from sync_server.ratelimit import RateSpec, TokenBucket
from sync_server.rooms import NO_EXPECT, Command, Join, JoinRefused, RoomClosed, RoomHost, Sync

if TYPE_CHECKING:
    from sync_server.server import Server

log = logging.getLogger(__name__)


class _Refuse(Exception):
    """End the handshake with an error frame and a close code."""

    def __init__(self, code: str, message: str, close: int) -> None:
        super().__init__(message)
        self.code, self.message, self.close = code, message, close


def _int_or_none(value: Any) -> bool:
    return value is None or (type(value) is int and value >= 0)


class Session:
    """One client connection."""

    def __init__(self, server: Server, ws: ServerConnection) -> None:
        self.server = server
        self.ws = ws
        self.codec: Codec = codec_for(ws.subprotocol)
        self.user: str | None = None
        self.role: str | None = None
        self.room_id: str | None = None
        self.host: RoomHost | None = None
        self.epoch = 0
        self.outbox: Outbox | None = None
        self.bucket: TokenBucket | None = None
        self.inflight = asyncio.Semaphore(MAX_INFLIGHT_PER_SESSION)

    # --- lifecycle --------------------------------------------------------

    async def run(self) -> None:
        try:
            try:
                await self._hello()
            except _Refuse as refuse:
                await self._refuse_now(refuse.code, refuse.message, refuse.close)
                return
            except (ConnectionClosed, TimeoutError):
                return
            self.server.connection_opened(self)
            try:
                await self._loop()
            finally:
                self.server.connection_closed(self)
        finally:
            await self._cleanup()

    async def _refuse_now(self, code: str, message: str, close: int) -> None:
        with contextlib.suppress(ConnectionClosed, OSError):
            await self.ws.send(self.codec.encode(frames.error(code, message)))
            await self.ws.close(close, message[:100])

    async def _cleanup(self) -> None:
        self.server.admin_slots.discard(self)
        if self.outbox is not None:
            if self.room_id is not None:
                self.server.fanout.unsubscribe(self.room_id, self.outbox)
            if self.outbox.closing:
                # A close was decided (4403, 4400, 1013...): let the writer
                # send what precedes it, bounded by the close timeout.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2 * CLOSE_TIMEOUT_SECONDS):
                        await self.outbox.flushed()
            await self.outbox.stop()

    # --- hello ------------------------------------------------------------

    async def _hello(self) -> None:
        try:
            async with asyncio.timeout(self.server.config.hello_timeout):
                message = await self.ws.recv()
        except TimeoutError:
            with contextlib.suppress(ConnectionClosed, OSError):
                await self.ws.close(frames.CLOSE_HELLO_TIMEOUT, "no hello in time")
            raise
        try:
            hello = self.codec.decode(message)
        except BadFrame as exc:
            raise _Refuse(
                "bad_frame", f"the first frame must be a hello: {exc}", frames.CLOSE_MISUSE
            )
        if hello.get("t") != "hello":
            raise _Refuse("bad_frame", "the first frame must be a hello", frames.CLOSE_MISUSE)
        proto = hello.get("proto")
        if type(proto) is not int or proto != frames.PROTO_VERSION:
            raise _Refuse(
                "bad_frame", f"unknown proto {proto!r}; this server speaks 1", frames.CLOSE_MISUSE
            )
        since = hello.get("since")
        if not _int_or_none(since):
            raise _Refuse("bad_frame", "since must be a version number", frames.CLOSE_MISUSE)
        token, room = hello.get("token"), hello.get("room")
        unauth = _Refuse("unauthenticated", "bad token or room", frames.CLOSE_UNAUTHENTICATED)
        if not plausible_token(token):
            raise unauth
        digest = hash_token(token)
        if same_hash(digest, self.server.admin_hash):
            if room is not None:
                raise unauth  # the admin token opens admin sessions only
            await self._open_admin()
            return
        found = await self.server.storage.find_token(digest)
        if found is None or not isinstance(room, str) or found[0] != room:
            raise unauth
        user = found[1]
        for _attempt in range(3):  # the room may be unloaded between get and submit
            host = await self.server.rooms.get(room)
            if host is None:
                raise unauth
            outbox = self._new_outbox(user)
            fut: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
            try:
                host.submit(Join(outbox, user, since, fut))
            except RoomClosed:
                continue
            try:
                role, epoch = await fut
            except JoinRefused as refused:
                raise _Refuse(refused.code, refused.message, refused.close)
            except RoomClosed:
                raise unauth
            except BaseException:
                fut.cancel()
                raise
            break
        else:
            raise unauth
        self.user, self.role, self.room_id, self.host, self.epoch = user, role, room, host, epoch
        self.outbox = outbox
        outbox.start()
        spec = self.server.config.gm_rate if role == "gm" else self.server.config.rate
        self.bucket = None if spec is None else TokenBucket(spec)
        log.debug("room %s: %s (%s) connected", room, user, role)

    async def _open_admin(self) -> None:
        # Check and reserve in one step (no await between them), so hellos
        # arriving at the same instant cannot all pass the check; the slot
        # is freed in _cleanup, whatever happens after this point.
        slots = self.server.admin_slots
        if len(slots) >= MAX_ADMIN_CONNECTIONS:
            raise _Refuse("rate_limited", "too many admin sessions", CLOSE_TOO_MANY_CONNECTIONS)
        slots.add(self)
        self.user, self.role = ADMIN_USER, "admin"
        self.outbox = self._new_outbox(ADMIN_USER)
        self.outbox.start()
        self.outbox.send({"t": "welcome", "user": ADMIN_USER, "role": "admin"})
        spec: RateSpec | None = self.server.config.gm_rate
        self.bucket = None if spec is None else TokenBucket(spec)
        log.debug("admin session connected")

    def _new_outbox(self, user: str) -> Outbox:
        metrics = self.server.metrics
        return Outbox(
            self.ws,
            self.codec,
            user,
            max_frames=self.server.config.outbox_max_frames,
            max_bytes=self.server.config.outbox_max_bytes,
            on_sent=metrics.frames,
            on_too_slow=self._too_slow,
        )

    def _too_slow(self) -> None:
        self.server.metrics.slow_closes.inc()
        log.info("room %s: %s closed, too slow to read (1013)", self.room_id, self.user)
        if self.room_id is not None and self.outbox is not None:
            self.server.fanout.unsubscribe(self.room_id, self.outbox)

    # --- frames -----------------------------------------------------------

    async def _loop(self) -> None:
        assert self.outbox is not None
        with contextlib.suppress(ConnectionClosed):
            async for message in self.ws:
                # Once a close is under way (4403, 1013, a second hello...),
                # frames are read and dropped: reading is what lets the
                # peer's close frame, queued behind them, complete the
                # closing handshake instead of waiting for the close timeout.
                if not self.outbox.closing:
                    await self._frame(message)

    def _send(self, frame: dict[str, Any]) -> None:
        assert self.outbox is not None
        self.outbox.send(frame)

    def _allowed(self) -> bool:
        if self.bucket is None or self.bucket.allow(time.monotonic()):
            return True
        self.server.metrics.rate_limited.inc()
        return False

    async def _frame(self, message: bytes | str) -> bool:
        """Handle one frame; False ends the session."""
        try:
            frame = self.codec.decode(message)
        except BadFrame as exc:
            if not self._allowed():
                self._send(frames.error("rate_limited", "too many frames; slow down"))
            else:
                self._send(frames.error("bad_frame", str(exc)))
            return True
        t = frame.get("t")
        raw_id = frame.get("id")
        echo_id = raw_id if isinstance(raw_id, str) and len(raw_id) <= MAX_CMD_ID_LENGTH else None
        if t == "hello":
            self._send(frames.error("bad_frame", "a second hello"))
            assert self.outbox is not None
            self.outbox.close_after(frames.CLOSE_MISUSE, "a second hello")
            return False
        if t not in ("cmd", "sync"):
            if not self._allowed():
                self._send(frames.error("rate_limited", "too many frames; slow down", echo_id))
            else:
                self._send(frames.error("bad_frame", f"unknown frame type {t!r}", echo_id))
            return True
        if not self._allowed():
            self._send(frames.error("rate_limited", "too many commands; slow down", echo_id))
            return True
        if self.server.shutting_down:
            self._send(
                frames.error("internal", "the server is shutting down; retry later", echo_id)
            )
            return True
        if t == "sync":
            return await self._sync(frame)
        if echo_id is None or not raw_id:
            self._send(
                frames.error(
                    "bad_frame", f"a cmd needs an id: a string of 1-{MAX_CMD_ID_LENGTH} characters"
                )
            )
            return True
        if "op" not in frame:
            self._send(frames.error("bad_frame", "a cmd needs an op", echo_id))
            return True
        op, args = frame["op"], frame.get("args", {})
        if self.role == "admin":
            reply = await self.server.admin.execute(echo_id, op, args)
            self._send(reply)
            return True
        await self.inflight.acquire()
        if self.server.shutting_down:  # it began while we waited for a slot
            self.inflight.release()
            self._send(
                frames.error("internal", "the server is shutting down; retry later", echo_id)
            )
            return True
        command = Command(
            actor=rules.Actor(user=self.user or "", role=self.role or ""),
            epoch=self.epoch,
            cmd_id=echo_id,
            op=op,
            args=args,
            reply=self._send,
            expect=frame.get("expect", NO_EXPECT),
            done=self.inflight.release,
        )
        return self._submit(command)

    async def _sync(self, frame: dict[str, Any]) -> bool:
        since = frame.get("since")
        if self.host is None:
            self._send(frames.error("bad_frame", "admin sessions have no room to sync"))
            return True
        if type(since) is not int or since < 0:
            self._send(frames.error("bad_frame", "sync needs since: a version number"))
            return True
        assert self.outbox is not None
        await self.inflight.acquire()
        return self._submit(Sync(self.outbox, since, done=self.inflight.release))

    def _submit(self, item: Command | Sync) -> bool:
        assert self.host is not None
        try:
            self.host.submit(item)
        except RoomClosed:
            if item.done is not None:
                item.done()
            assert self.outbox is not None
            cmd_id = item.cmd_id if isinstance(item, Command) else None
            self._send(frames.error("not_found", "the room was deleted", cmd_id))
            self.outbox.close_after(frames.CLOSE_ROOM_DELETED, "room deleted")
            return False
        return True
