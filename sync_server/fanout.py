"""Fan-out: delivering a room's frames to its clients.

`FanOut` is the seam for a multi-node mode (Redis pub/sub, say): rooms call
`publish` and never see a socket. The in-process implementation encodes a
frame ONCE per subprotocol present in the room and hands the same bytes to
every client's `Outbox`.

An `Outbox` is one client's bounded queue of encoded frames, drained by its
own writer task. A client that stops reading cannot delay anyone else (the
room only appends to queues) and cannot grow memory without bound: past
the limit its queue is dropped and it is closed with 1013, to resume with
`since`.

Fast path (the profile's hot spot: a task wake-up and an async `send` per
client per patch): when a client's queue is empty and its connection is
open and not paused by flow control, the frame is written to the socket
at once, synchronously, through websockets' Sans-I/O protocol object. Any
other time it goes through the queue and the writer task, as before, so
order and the slow-reader bound are unchanged.

Pre-serialized frames (the next hot spot: websockets building the same
frame once per client): a server's frames are unmasked and compression is
off, so a patch's WebSocket frame, header included, is the same bytes for
every client of one subprotocol. `LocalFanOut.publish` serializes it once
(`server_frame`) and `Outbox.push` writes those bytes straight to the
client's transport when that is exactly what websockets would have done
(see `_raw_writer`); else it takes the direct path, else the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import attrs
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.protocol import Side, State

from sync_server.codec import Codec
from sync_server.limits import CLOSE_TIMEOUT_SECONDS, OUTBOX_MAX_BYTES, OUTBOX_MAX_FRAMES

log = logging.getLogger(__name__)

CLOSE_GOING_AWAY = 1001
CLOSE_TOO_SLOW = 1013


class Connection(Protocol):
    """What an Outbox needs of a WebSocket connection (websockets'
    ServerConnection fits)."""

    async def send(self, message: bytes | str, text: bool | None = None) -> None: ...

    async def close(self, code: int = 1000, reason: str = "") -> None: ...


@attrs.frozen
class _Close:
    code: int
    reason: str


def _direct_writer(ws: Connection) -> Callable[[bytes, bool], bool] | None:
    """A synchronous writer for a websockets asyncio connection: queue the
    frame in its protocol and hand the bytes to the transport, as
    `Connection.send` does minus the task switch and the context manager.
    Returns False (and writes nothing) whenever `send` could have to wait
    or fail: not open, paused by flow control, a fragmented send under way.
    None for connections without these attributes (test doubles)."""
    protocol = getattr(ws, "protocol", None)
    send_data = getattr(ws, "send_data", None)
    if protocol is None or send_data is None or not hasattr(ws, "paused"):
        return None

    def write(data: bytes, text: bool) -> bool:
        if (
            ws.paused  # type: ignore[attr-defined]
            or protocol.state is not State.OPEN
            or getattr(ws, "send_in_progress", None) is not None
        ):
            return False
        if text:
            protocol.send_text(data)
        else:
            protocol.send_binary(data)
        send_data()
        return True

    return write


def _raw_writer(ws: Connection) -> Callable[[bytes], bool] | None:
    """A writer of complete, pre-serialized frames (`server_frame`) to a
    websockets asyncio server connection's transport, skipping its
    Sans-I/O protocol object. Sound because, in websockets 17, sending a
    data frame changes nothing in the protocol's state but its `writes`
    buffer (`Protocol.send_frame` appends `frame.serialize(...)`, which
    `Connection.send_data` hands to `transport.write` at once): writing the
    same bytes to the transport is what `send` does. Pings, pongs and the
    close handshake also go through `writes` and are flushed to the
    transport within the same callback, so frames stay whole and in order.

    The write is refused (False, nothing written; the caller falls back)
    unless the connection is OPEN (not closing or closed), not paused by
    flow control, has no fragmented message under way and nothing waiting
    in the protocol's `writes`. None (never usable) for client connections
    (their frames are masked), negotiated extensions (compression makes
    frames per-connection) and objects without these attributes (test
    doubles, another websockets version)."""
    protocol = getattr(ws, "protocol", None)
    transport = getattr(ws, "transport", None)
    if (
        protocol is None
        or transport is None
        or not hasattr(ws, "paused")
        or getattr(protocol, "side", None) is not Side.SERVER
        or getattr(protocol, "extensions", None) != []
        or not isinstance(getattr(protocol, "writes", None), list)
        or not hasattr(protocol, "expect_continuation_frame")
    ):
        return None

    def write(frame: bytes) -> bool:
        if (
            ws.paused  # type: ignore[attr-defined]
            or protocol.state is not State.OPEN
            or protocol.writes
            or protocol.expect_continuation_frame
            or getattr(ws, "send_in_progress", None) is not None
        ):
            return False
        transport.write(frame)
        return True

    return write


def server_frame(data: bytes, text: bool) -> bytes:
    """One complete WebSocket frame as a server sends it (FIN, unmasked, no
    extensions), serialized by websockets itself so the bytes are exactly
    those `send` would produce."""
    return Frame(Opcode.TEXT if text else Opcode.BINARY, data).serialize(mask=False)


def wire_bytes(data: bytes | str) -> bytes:
    """A codec's output as the bytes of a WebSocket frame (JSON text is
    UTF-8 encoded here, once, rather than by each connection's send)."""
    return data.encode() if isinstance(data, str) else data


class Outbox:
    """One client's bounded queue of encoded frames and the task writing it."""

    def __init__(
        self,
        ws: Connection,
        codec: Codec,
        user: str,
        *,
        max_frames: int = OUTBOX_MAX_FRAMES,
        max_bytes: int = OUTBOX_MAX_BYTES,
        on_sent: Callable[[int], None] | None = None,
        on_too_slow: Callable[[], None] | None = None,
    ) -> None:
        self.ws = ws
        self.codec = codec
        self.user = user
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self._on_sent = on_sent
        self._on_too_slow = on_too_slow
        self._queue: deque[bytes | _Close] = deque()
        self._bytes = 0
        self._text = not codec.binary  # JSON: text frames (of UTF-8 bytes)
        self._direct = _direct_writer(ws)
        self._raw = _raw_writer(ws)
        self._writing = False  # the writer task is inside ws.send
        self._wake = asyncio.Event()
        self.closing = False  # no more frames accepted
        self._aborted = False
        self.close_code: int | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def send(self, frame: dict[str, Any]) -> None:
        """Encode and send or queue one frame for this client only."""
        if not self.closing:
            self.push(self.codec.encode(frame))

    def push(self, data: bytes | str, frame: bytes | None = None) -> None:
        """Send or queue an already-encoded message (fan-out shares the
        bytes). `frame`, if given, is the same message as a complete
        WebSocket frame (`server_frame(data, text)`), written as is when the
        connection allows it."""
        if self.closing:
            return
        data = wire_bytes(data)
        idle = not self._queue and not self._writing and self._task is not None
        if idle and self._now(data, frame):
            if self._on_sent is not None:
                self._on_sent(1)
            return
        if len(self._queue) >= self.max_frames or self._bytes + len(data) > self.max_bytes:
            self.abort(CLOSE_TOO_SLOW, "too slow to read; resume with since")
            if self._on_too_slow is not None:
                self._on_too_slow()
            return
        self._queue.append(data)
        self._bytes += len(data)
        self._wake.set()

    def _now(self, data: bytes, frame: bytes | None) -> bool:
        """Write at once, synchronously, if the connection allows it: the
        shared frame first, else through websockets' protocol object."""
        if frame is not None and self._raw is not None and self._raw(frame):
            return True
        return self._direct is not None and self._direct(data, self._text)

    def close_after(self, code: int, reason: str) -> None:
        """Close once every frame queued so far is sent (e.g. 4403 after
        the ack carrying a rotated token, 1001 at shutdown)."""
        if self.closing:
            return
        self.closing = True
        self.close_code = code
        self._queue.append(_Close(code, reason))
        self._wake.set()

    def abort(self, code: int, reason: str) -> None:
        """Close now, dropping what is queued (slow consumer, deleted room)."""
        if self._aborted:
            return
        self._aborted = True
        self.closing = True
        self.close_code = code
        self._queue.clear()
        self._bytes = 0
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = asyncio.get_running_loop().create_task(self._close(code, reason))

    async def _close(self, code: int, reason: str) -> None:
        # websockets bounds the closing handshake by its close timeout, but
        # not the wait for the write buffer to drain before the close frame
        # goes out: a peer that never reads would hold us forever. Bound it.
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_SECONDS):
                await self.ws.close(code, reason)
        except (ConnectionClosed, OSError):
            pass
        except TimeoutError:
            transport = getattr(self.ws, "transport", None)
            if transport is not None:
                transport.abort()

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def flushed(self) -> None:
        """Wait until the writer finished (queue sent and close done)."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(self._task)

    async def stop(self) -> None:
        """Cancel the writer (the connection is already gone)."""
        self.closing = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self) -> None:
        try:
            while True:
                while not self._queue:
                    self._wake.clear()
                    await self._wake.wait()
                item = self._queue.popleft()
                if isinstance(item, _Close):
                    await self._close(item.code, item.reason)
                    return
                self._bytes -= len(item)
                self._writing = True
                try:
                    await self.ws.send(item, text=self._text)  # type: ignore[call-arg]
                finally:
                    self._writing = False
                if self._on_sent is not None:
                    self._on_sent(1)
        except ConnectionClosed:
            self.closing = True


class FanOut(Protocol):
    """Delivery of room frames to the room's clients, wherever they are."""

    def subscribe(self, room: str, client: Outbox) -> None: ...

    def unsubscribe(self, room: str, client: Outbox) -> None: ...

    def publish(self, room: str, frame: dict[str, Any]) -> None:
        """Send one frame to every client of the room, in publish order."""
        ...

    def count(self, room: str, user: str | None = None) -> int: ...

    def total(self) -> int: ...

    def close_room(self, room: str, code: int, reason: str) -> None: ...

    def close_user(self, room: str, user: str, code: int, reason: str) -> None:
        """Close a user's connections after the frames already queued."""
        ...

    def all_clients(self) -> list[Outbox]: ...


class LocalFanOut:
    """`FanOut` for one process: a set of outboxes per room."""

    def __init__(self) -> None:
        self._rooms: dict[str, dict[Outbox, None]] = {}  # insertion-ordered sets

    def subscribe(self, room: str, client: Outbox) -> None:
        self._rooms.setdefault(room, {})[client] = None

    def unsubscribe(self, room: str, client: Outbox) -> None:
        clients = self._rooms.get(room)
        if clients is not None:
            clients.pop(client, None)
            if not clients:
                del self._rooms[room]

    def publish(self, room: str, frame: dict[str, Any]) -> None:
        # Once per subprotocol present: the message, and the same message
        # as a complete WebSocket frame for the outboxes that can take it.
        encoded: dict[str, tuple[bytes, bytes]] = {}
        for client in list(self._rooms.get(room, ())):
            codec = client.codec
            wire = encoded.get(codec.name)
            if wire is None:
                data = wire_bytes(codec.encode(frame))
                wire = encoded[codec.name] = (data, server_frame(data, not codec.binary))
            client.push(*wire)

    def count(self, room: str, user: str | None = None) -> int:
        clients = self._rooms.get(room, {})
        if user is None:
            return sum(1 for c in clients if not c.closing)
        return sum(1 for c in clients if c.user == user and not c.closing)

    def total(self) -> int:
        return sum(len(c) for c in self._rooms.values())

    def close_room(self, room: str, code: int, reason: str) -> None:
        for client in list(self._rooms.pop(room, {})):
            client.abort(code, reason)

    def close_user(self, room: str, user: str, code: int, reason: str) -> None:
        for client in list(self._rooms.get(room, ())):
            if client.user == user:
                client.close_after(code, reason)
                self.unsubscribe(room, client)

    def all_clients(self) -> list[Outbox]:
        return [c for clients in self._rooms.values() for c in clients]
