"""One client's sending side: every frame for it goes through its `Outbox`.

Frames are written to the connection at once, synchronously, in the order
they are sent (a room never waits on a client). What a client has not read
yet waits in its connection's transport buffer, and that buffer is the one
place it waits: the outbox counts it (`transport.get_write_buffer_size`)
against `max_bytes`, for every frame, the first included, welcomes and
snapshots included. Past the bound, the client is too slow: it is closed
with 1013 (it resumes with `since`), so a reader that stopped reading costs
at most `max_bytes` of memory, whatever the room publishes.

What all clients hold together is bounded too (`OutboxBudget`): per room
and server-wide. Past either bound, the clients holding the most (the
slowest readers) are dropped first, their transport aborted so that their
buffers are freed at once, and the allocator is asked to give the memory
back to the system.

The outbox takes bytes (the bus's, shared by every client of one codec
and view class, or its own frame's, encoded once). Writes take the shared
pre-serialized WebSocket frame when the connection allows it
(ws_fastpath.py, optional), else websockets' public `broadcast`, which
writes without waiting and skips a connection that is closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from websockets.asyncio.server import broadcast
from websockets.exceptions import ConnectionClosed

from sync_server.clock import Clock, SystemClock
from sync_server.core.limits import (
    CLOSE_TIMEOUT_SECONDS,
    OUTBOX_MAX_BYTES,
    OUTBOX_ROOM_MAX_BYTES,
    OUTBOX_TOTAL_MAX_BYTES,
    TRIM_AFTER_BYTES,
    TRIM_DELAY_SECONDS,
)
from sync_server.hosting.bus import Message, encode
from sync_server.hosting.ws_fastpath import raw_writer
from sync_server.wire import protocol
from sync_server.wire.codec import Codec

log = logging.getLogger(__name__)


class Holder(Protocol):
    """What the budget counts: one reader's bytes written and not yet taken
    (a WebSocket's `Outbox`, an event stream, an HTTP answer), under the
    room it reads (None: no room's), and how to drop it."""

    room: str | None

    @property
    def buffered(self) -> int: ...

    def drop(self, code: int, reason: str) -> None: ...


class Connection(Protocol):
    """What an Outbox needs of a WebSocket connection (websockets'
    ServerConnection fits)."""

    async def close(self, code: int = protocol.WS_CLOSE_NORMAL, reason: str = "") -> None: ...


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's malloc_trim(0), which hands freed heap pages back to the
    system (Python's frees alone often keep them); None elsewhere."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    return None if trim is None else (lambda: trim(0))


class OutboxBudget:
    """What every client holds together (bytes written and not yet taken
    by its connection: WebSocket outboxes, event streams and HTTP answers
    alike), per room and for the server.

    Each outbox reports what it holds after each write (`held`); a client
    that drains its buffer meanwhile is counted high until its next write
    or the next check, which re-reads every client of the scope before
    dropping anyone. So a check costs a dict update, and the re-read runs
    only when the stale sum is over a bound."""

    def __init__(
        self,
        total_max: int = OUTBOX_TOTAL_MAX_BYTES,
        room_max: int = OUTBOX_ROOM_MAX_BYTES,
        on_drop: Callable[[Holder], None] | None = None,
    ) -> None:
        self.total_max = total_max
        self.room_max = room_max
        self.on_drop = on_drop
        self.total = 0
        self.rooms: Counter[str | None] = Counter()
        self._held: dict[Holder, int] = {}
        self._trim = _malloc_trim()
        self._trim_pending = False
        self.dropped = 0

    def held(self, outbox: Holder, size: int) -> None:
        """`outbox` holds `size` bytes now; drop the slowest if over a bound."""
        delta = size - self._held.get(outbox, 0)
        if delta == 0:
            return
        self._held[outbox] = size
        self.total += delta
        self.rooms[outbox.room] += delta
        if self.total > self.total_max:
            self._enforce(None)
        elif outbox.room is not None and self.rooms[outbox.room] > self.room_max:
            self._enforce(outbox.room)

    def forget(self, outbox: Holder) -> None:
        if outbox not in self._held:
            return
        size = self._held.pop(outbox)
        self.total -= size
        self.rooms[outbox.room] -= size
        if not self.rooms[outbox.room]:
            del self.rooms[outbox.room]
        if size >= TRIM_AFTER_BYTES:
            self._trim_soon()

    def _trim_soon(self) -> None:
        """A client that held much is gone: once its connection has let go
        of its buffer (a moment later), give the freed memory back."""
        if self._trim is None or self._trim_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._trim_pending = True

        def trim() -> None:
            self._trim_pending = False
            if self._trim is not None:
                self._trim()

        loop.call_later(TRIM_DELAY_SECONDS, trim)

    def _enforce(self, room: str | None) -> None:
        """Re-read the scope (a room, or the server), then drop its clients
        holding the most until it is within its bound."""
        scope = [o for o in self._held if room is None or o.room == room]
        for o in scope:
            size = o.buffered
            delta = size - self._held[o]
            self._held[o] = size
            self.total += delta
            self.rooms[o.room] += delta

        def over() -> bool:
            if room is None:
                return self.total > self.total_max
            return self.rooms[room] > self.room_max

        dropped = 0
        for o in sorted(scope, key=lambda o: self._held[o], reverse=True):
            if not over():
                break
            self.forget(o)
            o.drop(protocol.CLOSE_TOO_SLOW, "the server's send budget is spent; resume with since")
            dropped += 1
            if self.on_drop is not None:
                self.on_drop(o)
        if dropped:
            self.dropped += dropped
            log.warning(
                "outbox budget (%s) over: dropped the %d slowest reader(s)",
                "server" if room is None else f"room {room}",
                dropped,
            )
            if self._trim is not None:
                self._trim()


class Outbox:
    """A client's bounded sending side (see the module docstring)."""

    def __init__(
        self,
        ws: Any,
        codec: Codec,
        user: str,
        *,
        max_bytes: int = OUTBOX_MAX_BYTES,
        close_timeout: float = CLOSE_TIMEOUT_SECONDS,
        fast: bool = True,
        viewer: Any = None,
        on_sent: Callable[[int], None] | None = None,
        on_too_slow: Callable[[], None] | None = None,
        budget: OutboxBudget | None = None,
        room: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.ws = ws
        self.clock = clock or SystemClock()
        self.budget = budget
        self.room = room  # the room it reads (None: an admin session), for the budget
        self.codec = codec
        self.user = user
        # Who reads this connection (a rules.Viewer): frames with a view are
        # that viewer's. None sees every frame whole (admin sessions).
        self.viewer = viewer
        self.max_bytes = max_bytes
        self.close_timeout = close_timeout
        self._on_sent = on_sent
        self._on_too_slow = on_too_slow
        self._text = not codec.binary  # JSON: text frames (of UTF-8 bytes)
        # A transport that frames shared bytes itself (picows_transport.py)
        # writes them with one call; else websockets' fast path, if allowed.
        native = getattr(ws, "message_writer", None)
        self._raw: Callable[[bytes], bool] | None = (
            native(self._text)
            if native is not None
            else raw_writer(ws, self._text)
            if fast
            else None
        )
        transport = getattr(ws, "transport", None)
        self._buffered: Callable[[], int] = (
            transport.get_write_buffer_size if transport is not None else (lambda: 0)
        )
        self.closing = False  # no more frames accepted
        # A snapshot of its view is on its way (a patch's views were capped,
        # bus.Message.admit): the patches until then are covered by it.
        self.stale = False
        self.close_code: int | None = None
        self._closer: asyncio.Task[None] | None = None

    def send(self, frame: dict[str, Any]) -> int:
        """Encode and send one frame to this client only; returns its size
        in bytes (0 when the client is closing)."""
        if self.closing:
            return 0
        data = encode(self.codec, frame)
        self._write(data)
        return len(data)

    def deliver(self, data: bytes, v: int | None = None) -> None:
        """A frame's bytes shared with other clients (the bus calls this
        once it has admitted this outbox: not closing, not stale)."""
        if not (self.closing or self.stale):
            self._write(data)

    def resync(self, message: Message) -> None:
        """The snapshot a stale client was waiting for (its view, shared by
        the clients of its view class); the room's messages reach it again."""
        self.stale = False
        if not self.closing:
            self._write(message.data(self.codec))

    def _write(self, data: bytes) -> None:
        if self._buffered() + len(data) > self.max_bytes:
            self.abort(protocol.CLOSE_TOO_SLOW, "too slow to read; resume with since")
            if self._on_too_slow is not None:
                self._on_too_slow()
            return
        if self._raw is None or not self._raw(data):
            try:
                broadcast([self.ws], data, text=self._text)
            except Exception:  # a test double, or a connection gone meanwhile
                log.debug("write to %s failed", self.user, exc_info=True)
                return
        if self._on_sent is not None:
            self._on_sent(1)
        if self.budget is not None:
            self.budget.held(self, self._buffered())

    def close_after(self, code: int, reason: str) -> None:
        """Close once every frame sent so far is written (e.g. 4403 after
        the ack carrying a rotated token, 1001 at shutdown)."""
        if self.closing:
            return
        self.closing = True
        self.close_code = code
        self._closer = asyncio.get_running_loop().create_task(self._close(code, reason))

    def abort(self, code: int, reason: str) -> None:
        """Close now: no more frames (slow consumer, deleted room)."""
        self.close_after(code, reason)

    def drop(self, code: int, reason: str) -> None:
        """Over the send budget: no more frames, and the connection is cut
        at once, what it buffers freed (a close frame would wait behind the
        bytes its peer does not read)."""
        self.close_after(code, reason)
        transport = getattr(self.ws, "transport", None)
        if transport is not None:
            transport.abort()
        if self._on_too_slow is not None:
            self._on_too_slow()

    async def _close(self, code: int, reason: str) -> None:
        # websockets bounds the closing handshake by its close timeout, but
        # not the wait for the write buffer to drain before the close frame
        # goes out: a peer that never reads would hold us forever. Bound it,
        # then drop the connection (and what it still buffers).
        try:
            async with self.clock.timeout(self.close_timeout):
                await self.ws.close(code, reason)
        except TimeoutError:  # before OSError: TimeoutError is one
            transport = getattr(self.ws, "transport", None)
            if transport is not None:
                transport.abort()
        except (ConnectionClosed, OSError):
            pass

    @property
    def buffered(self) -> int:
        """Bytes written for this client and not yet taken by the kernel."""
        return self._buffered()

    async def flushed(self) -> None:
        """Wait until a decided close is done."""
        if self._closer is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(self._closer)

    async def stop(self) -> None:
        """The connection is gone: accept no more frames."""
        self.closing = True
        if self.budget is not None:
            self.budget.forget(self)
        if self._closer is not None and not self._closer.done():
            self._closer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._closer
