"""The optional fast transport: picows (a Cython WebSocket library) behind
the same sessions, rooms and bus (`serve --transport picows`, installed by
`pip install vtt-sync[fast]`, with uvloop as the event loop).

Why: the profile of a durable command (docs/performance.md) spends about a
quarter of the server's CPU in websockets' Python frame parsing and
writing. picows parses and frames in C; the rest of the server does not
change: a `PicowsConnection` offers the part of websockets'
`ServerConnection` a `Session` and its `Outbox` use (`subprotocol`,
`recv`, async iteration, `send`, `close`, `transport`, `request`,
`remote_address`), and writes the bus's shared bytes with one call
(`message_writer`, which the outbox prefers to websockets' fast path).

The same limits hold, read from the server's `Limits`: a message's size
(`MAX_FRAME_BYTES`, fragments included: 1009), the queue of unread
messages (`max_incoming_queue`: past it the socket is not read), the
outbox's byte bounds (the transport's write buffer, as with websockets),
pings (`ping_interval` of silence, then `ping_timeout` for the pong), the
close timeout, the opening handshake's timeout, the Origin check, TLS (an
`ssl` context).

What it does not serve, because picows answers plain HTTP only from a
synchronous hook and only for GET requests without a body: the HTTP API
(`/api/`: POST bodies and event streams), `/admin/` over HTTP (its answers
are awaited), OPTIONS preflights and HEAD. Those answer 501 with a line
naming `--transport websockets`; the page, `/healthz`, `/metrics` and
`/links.json` are served as with websockets (tests/server/test_transports.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import importlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK
from websockets.frames import Close
from websockets.http11 import Request, Response

from sync_server.clock import Clock, SystemClock
from sync_server.core.limits import MAX_FRAME_BYTES, Limits
from sync_server.wire.codec import select_subprotocol
from sync_server.wire.protocol import (
    CLOSE_SHUTDOWN,
    CLOSE_TOO_BIG,
    WS_CLOSE_INVALID_DATA,
    WS_CLOSE_NORMAL,
)

picows: Any
try:  # the [fast] extra
    picows = importlib.import_module("picows")
except ImportError:  # pragma: no cover - without the extra
    picows = None

log = logging.getLogger(__name__)

NOT_SERVED = (
    b"not served by this server's transport (picows): the HTTP API, /admin/ over HTTP, "
    b"OPTIONS and HEAD need --transport websockets\n"
)
# Our name only, as with websockets (server.SERVER_HEADER): no library or
# Python versions for a scanner.
SERVER_HEADER = ("Server", "vtt-sync")
# Close codes (RFC 6455), named once in the protocol module.
NORMAL, INVALID_DATA, TOO_BIG = WS_CLOSE_NORMAL, WS_CLOSE_INVALID_DATA, CLOSE_TOO_BIG


def available() -> bool:
    """Whether the [fast] extra (picows) is installed."""
    return picows is not None


class _Closed:
    """The end of the message queue."""


_END = _Closed()


class PicowsConnection:
    """One client connection over picows, shaped as the part of websockets'
    `ServerConnection` the session and its outbox use (module docstring)."""

    def __init__(
        self,
        request: Request,
        subprotocol: str | None,
        handler: Callable[[Any], Awaitable[None]],
        limits: Limits,
        tasks: set[asyncio.Task[None]],
        clock: Clock,
    ) -> None:
        self.request = request
        self.clock = clock
        self.subprotocol = subprotocol
        self._handler = handler
        self.close_timeout = limits.close_timeout
        self.max_queue = limits.max_incoming_queue
        self._tasks = tasks
        self._t: Any = None  # picows.WSTransport, once connected
        self.open = False  # connected, no close frame sent or received
        self.transport: Any = None  # the asyncio transport under it
        self.remote_address: Any = None
        self._queue: deque[bytes | str | _Closed] = deque()
        self._ready = asyncio.Event()
        self._paused = False
        self._parts: list[bytes] = []
        self._part_size = 0
        self._part_text = False
        self.close_sent: Close | None = None
        self.close_rcvd: Close | None = None
        self.close_rcvd_then_sent: bool = False
        self.disconnected = asyncio.get_running_loop().create_future()
        self.protocol = self  # _close_info reads close_sent/close_rcvd on it

    # --- picows' listener callbacks --------------------------------------

    def listener(self) -> Any:
        """The picows WSListener that feeds this connection."""
        assert picows is not None
        conn = self

        class Listener(picows.WSListener):
            def on_ws_connected(self, transport: Any) -> None:
                conn._connected(transport)

            def on_ws_frame(self, transport: Any, frame: Any) -> None:
                conn._frame(frame)

            def on_ws_disconnected(self, transport: Any) -> None:
                conn._disconnected()

        return Listener()

    def _connected(self, t: Any) -> None:
        self._t = t
        self.open = True
        self.transport = t.underlying_transport
        self.remote_address = self.transport.get_extra_info("peername")
        task = asyncio.get_running_loop().create_task(self._run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self) -> None:
        try:
            await self._handler(self)
        except Exception:
            log.exception("a session over picows failed")
        finally:
            await self.close(NORMAL, "")

    def _frame(self, frame: Any) -> None:
        assert picows is not None
        kind = frame.msg_type
        T = picows.WSMsgType
        if kind == T.CLOSE:
            self.open = False
            text = frame.get_close_message() or b""
            self.close_rcvd = Close(int(frame.get_close_code()), text.decode("utf-8", "replace"))
            if self.close_sent is None:
                self.close_rcvd_then_sent = True
                self._send_close(self.close_rcvd.code, "")
            self._t.disconnect()
            return
        if kind not in (T.TEXT, T.BINARY, T.CONTINUATION):
            return  # pings are answered by picows; pongs end its idle check
        if kind != T.CONTINUATION:
            self._parts, self._part_size, self._part_text = [], 0, kind == T.TEXT
        self._part_size += frame.payload_size
        if self._part_size > MAX_FRAME_BYTES:
            self._fail(TOO_BIG, "message too big")
            return
        if frame.fin and not self._parts:
            data = frame.get_payload_as_bytes()
        else:
            self._parts.append(frame.get_payload_as_bytes())
            if not frame.fin:
                return
            data, self._parts = b"".join(self._parts), []
        if self._part_text:
            try:
                message: bytes | str = data.decode()
            except UnicodeDecodeError:
                self._fail(INVALID_DATA, "invalid UTF-8")
                return
        else:
            message = data
        self._queue.append(message)
        self._ready.set()
        if len(self._queue) >= self.max_queue and not self._paused:
            self._paused = True  # the reader is behind: stop reading the socket
            self.transport.pause_reading()

    def _disconnected(self) -> None:
        self.open = False
        self._queue.append(_END)
        self._ready.set()
        if not self.disconnected.done():
            self.disconnected.set_result(None)

    def _fail(self, code: int, reason: str) -> None:
        self._send_close(code, reason)
        self._t.disconnect()

    def _send_close(self, code: int, reason: str) -> None:
        assert picows is not None
        self.open = False
        if self.close_sent is None and not self._t.is_disconnected:
            self.close_sent = Close(code, reason)
            self._t.send_close(picows.WSCloseCode(code), reason.encode())

    def _closed_error(self) -> Exception:
        ok = self.close_rcvd is not None and self.close_rcvd.code in (NORMAL, CLOSE_SHUTDOWN)
        kind = ConnectionClosedOK if ok else ConnectionClosedError
        both = self.close_rcvd is not None and self.close_sent is not None
        return kind(self.close_rcvd, self.close_sent, self.close_rcvd_then_sent if both else None)

    # --- what a session uses ---------------------------------------------

    async def recv(self) -> bytes | str:
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        item = self._queue[0]
        if isinstance(item, _Closed):
            raise self._closed_error()
        self._queue.popleft()
        if self._paused and len(self._queue) < self.max_queue // 2:
            self._paused = False
            self.transport.resume_reading()
        return item

    def __aiter__(self) -> PicowsConnection:
        return self

    async def __anext__(self) -> bytes | str:
        try:
            return await self.recv()
        except ConnectionClosedOK:
            raise StopAsyncIteration from None

    def message_writer(self, text: bool) -> Callable[[bytes], bool]:
        """A writer of one message's bytes (shared with other clients) as a
        text or binary frame, for the outbox; it returns False (nothing
        written) once the connection is closing."""
        assert picows is not None
        opcode = picows.WSMsgType.TEXT if text else picows.WSMsgType.BINARY

        def write(data: bytes) -> bool:
            if not self.open:
                return False
            self._t.send(opcode, data)
            return True

        return write

    async def send(self, message: bytes | str) -> None:
        text = isinstance(message, str)
        data = message.encode() if isinstance(message, str) else message
        if not self.message_writer(text)(data):
            raise self._closed_error()

    async def close(self, code: int = NORMAL, reason: str = "") -> None:
        """Send a close frame once what is buffered is written, then wait
        for the peer's (bounded by the close timeout) and disconnect."""
        if self._t is None or self.disconnected.done():
            return
        self._send_close(code, reason)
        try:
            async with self.clock.timeout(self.close_timeout):
                await asyncio.shield(self.disconnected)
        except TimeoutError:
            self._t.disconnect(graceful=False)

    async def wait_closed(self) -> None:
        await asyncio.shield(self.disconnected)


def _request(upgrade: Any) -> Request:
    """picows' request as websockets' (what web.Routes and peer_of read)."""
    headers = Headers()
    for name, value in upgrade.headers.items():
        headers[name] = value
    path = upgrade.path
    return Request(path.decode() if isinstance(path, bytes) else path, headers)


class PicowsServer:
    """A listening picows server, shaped as the part of websockets' `Server`
    the composition root uses (`server.close`, `sockets`, `close`,
    `wait_closed`)."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.connections: set[PicowsConnection] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def sockets(self) -> Any:
        assert self.server is not None
        return self.server.sockets

    @classmethod
    async def start(
        cls,
        handler: Callable[[Any], Awaitable[None]],
        host: str | None,
        port: int | None,
        *,
        process_request: Callable[[Any, Request], Any],
        limits: Limits,
        ssl: Any = None,
        sock: Any = None,
        clock: Clock | None = None,
    ) -> PicowsServer:
        if picows is None:
            raise RuntimeError(
                "--transport picows needs the fast extra: pip install 'vtt-sync[fast]'"
            )
        self = cls()

        def factory(upgrade: Any) -> Any:
            request = _request(upgrade)
            if request.path.startswith("/api/"):
                return _not_served()  # the HTTP API's door (http1.py) is websockets'
            answer = process_request(None, request)
            if isinstance(answer, Response):
                return _response(answer)
            if answer is not None:  # awaited (/admin/): not served here
                with contextlib.suppress(Exception):
                    answer.close()
                return _not_served()
            if "websocket" not in request.headers.get("Upgrade", "").lower():
                return _not_served()
            offered = [
                p.strip()
                for value in request.headers.get_all("Sec-WebSocket-Protocol")
                for p in value.split(",")
            ]
            chosen = select_subprotocol(None, offered)
            conn = PicowsConnection(
                request, chosen, self._serve(handler), limits, self._tasks, clock or SystemClock()
            )
            extra = [SERVER_HEADER]
            if chosen is not None:
                extra.append(("Sec-WebSocket-Protocol", chosen))
            return picows.WSUpgradeResponseWithListener(
                picows.WSUpgradeResponse.create_101_response(extra), conn.listener()
            )

        self.server = await picows.ws_create_server(
            factory,
            None if sock is not None else host,
            None if sock is not None else port,
            sock=sock,
            ssl=ssl,
            websocket_handshake_timeout=limits.handshake_timeout,
            enable_auto_ping=True,
            auto_ping_idle_timeout=limits.ping_interval,
            auto_ping_reply_timeout=limits.ping_timeout,
            enable_auto_pong=True,
            max_frame_size=MAX_FRAME_BYTES,
            logger_name="vtt_sync",
        )
        return self

    def _serve(self, handler: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        async def run(conn: Any) -> None:
            self.connections.add(conn)
            try:
                await handler(conn)
            finally:
                self.connections.discard(conn)

        return run

    def close(self, code: int = CLOSE_SHUTDOWN, reason: str = "") -> None:
        """Stop accepting; close every connection (as websockets' `close`)."""
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            asyncio.get_running_loop().create_task(conn.close(code, reason))

    async def wait_closed(self) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self.server is not None:
            await self.server.wait_closed()


def _response(answer: Response) -> Any:
    """websockets' HTTP response as picows' (a plain HTTP answer: picows
    closes the connection after it)."""
    assert picows is not None
    headers = [(k, v) for k, v in answer.headers.raw_items() if k.lower() != "content-length"]
    headers.append(SERVER_HEADER)
    made = picows.WSUpgradeResponse.create_ok_response(bytes(answer.body), headers)
    made.status = http.HTTPStatus(answer.status_code)
    return picows.WSUpgradeResponseWithListener(made, None)


def _not_served() -> Any:
    """501 for what only the websockets transport serves."""
    assert picows is not None
    made = picows.WSUpgradeResponse.create_error_response(501, NOT_SERVED, [SERVER_HEADER])
    return picows.WSUpgradeResponseWithListener(made, None)
