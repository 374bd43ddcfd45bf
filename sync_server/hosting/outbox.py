"""One client's sending side: every frame for it goes through its `Outbox`.

Frames are written to the connection at once, synchronously, in the order
they are sent (a room never waits on a client). What a client has not read
yet waits in its connection's transport buffer, and that buffer is the one
place it waits: the outbox counts it (`transport.get_write_buffer_size`)
against `max_bytes`, for every frame, the first included, welcomes and
snapshots included. Past the bound, the client is too slow: it is closed
with 1013 (it resumes with `since`), so a reader that stopped reading costs
at most `max_bytes` of memory, whatever the room publishes.

Writes take the shared pre-serialized frame when the connection allows it
(ws_fastpath.py, optional), else websockets' public `broadcast`, which
writes without waiting and skips a connection that is closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

from websockets.asyncio.server import broadcast
from websockets.exceptions import ConnectionClosed

from sync_server.core.limits import CLOSE_TIMEOUT_SECONDS, OUTBOX_MAX_BYTES
from sync_server.hosting.bus import Message
from sync_server.hosting.ws_fastpath import raw_writer
from sync_server.wire import protocol
from sync_server.wire.codec import Codec

log = logging.getLogger(__name__)


class Connection(Protocol):
    """What an Outbox needs of a WebSocket connection (websockets'
    ServerConnection fits)."""

    async def close(self, code: int = 1000, reason: str = "") -> None: ...


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
    ) -> None:
        self.ws = ws
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
        self._raw = raw_writer(ws) if fast else None
        transport = getattr(ws, "transport", None)
        self._buffered: Callable[[], int] = (
            transport.get_write_buffer_size if transport is not None else (lambda: 0)
        )
        self.closing = False  # no more frames accepted
        self.close_code: int | None = None
        self._closer: asyncio.Task[None] | None = None

    def send(self, frame: dict[str, Any]) -> int:
        """Encode and send one frame to this client only; returns its size
        in bytes (0 when the client is closing)."""
        if self.closing:
            return 0
        message = Message(frame)
        self.deliver(message)
        return len(message.data(self.codec))

    def deliver(self, message: Message) -> None:
        """Send a message shared with other clients (the bus calls this)."""
        if self.closing:
            return
        viewer = self.viewer
        key = message.key(viewer)
        data = message.data(self.codec, key, viewer)
        if self._buffered() + len(data) > self.max_bytes:
            self.abort(protocol.CLOSE_TOO_SLOW, "too slow to read; resume with since")
            if self._on_too_slow is not None:
                self._on_too_slow()
            return
        if self._raw is None or not self._raw(message.ws_frame(self.codec, key, viewer)):
            try:
                broadcast([self.ws], data, text=self._text)
            except Exception:  # a test double, or a connection gone meanwhile
                log.debug("write to %s failed", self.user, exc_info=True)
                return
        if self._on_sent is not None:
            self._on_sent(1)

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

    async def _close(self, code: int, reason: str) -> None:
        # websockets bounds the closing handshake by its close timeout, but
        # not the wait for the write buffer to drain before the close frame
        # goes out: a peer that never reads would hold us forever. Bound it,
        # then drop the connection (and what it still buffers).
        try:
            async with asyncio.timeout(self.close_timeout):
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
        if self._closer is not None and not self._closer.done():
            self._closer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._closer
