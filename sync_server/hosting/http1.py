"""Two doors on one listening socket: WebSocket (and the plain routes of
web.py) through websockets, the HTTP API (`/api/...`) through h11.

Why a layer in front of websockets: websockets answers plain HTTP requests
(`process_request`, web.py), but it reads no request body (a request with
one is refused while parsing) and sends an answer whole, so it can carry
neither a command's JSON body nor a Server-Sent Events stream. h11 (a
sans-I/O HTTP/1.1 state machine, like websockets' own protocol objects)
does both, and we drive it the way websockets drives its protocol.

`Door` is the asyncio protocol of each accepted connection (websockets'
public `create_connection` hook builds it around the `ServerConnection` it
would have used). It reads the request line only, then hands the transport
and the bytes read so far to one of the two:

- a request target under `/api/` goes to an `HttpConnection` (h11);
- anything else to websockets' `ServerConnection`, exactly as if it had
  been there from the start (its handshake, `process_request`, timeouts).

From then on the transport calls the chosen protocol directly: a WebSocket
connection costs one look at its first line, and nothing per frame.
TLS is below both (the server's SSLContext wraps the socket first), and a
reverse proxy sees one HTTP server.

`HttpConnection` serves one request per connection (`Connection: close`,
as the plain routes do): a tool's request is one command or one stream.
Every request is bounded before it costs (issue 33: one connection sending
a 64 KiB body in 65,536 one-byte chunks held every room's loop 0.74 s):

- the handler gets the request's head (`HttpRequest`) as soon as it is
  read, and decides the route and the caller from it; the socket is not
  read meanwhile, and the body only when the handler asks for it
  (`read_body`, after the token is checked), so a refused request never
  has its body read;
- a request comes in at most MAX_HTTP_REQUEST_PIECES pieces (reads of the
  socket and chunks of its body: each costs the parser ~11 us, whatever
  its size), its body within MAX_HTTP_BODY_BYTES, the whole of it within
  HTTP_REQUEST_TIMEOUT_SECONDS of the accept: past them, 400/413/408 and
  the connection closed;
- the answer is written as its reader takes it (`send`: a big one in
  slices, the next asked for only when the transport has room), what it
  holds counts in the outbox budget (outbox.py: per room and server), and
  a reader that takes nothing of it for the WebSocket's ping timeout is
  cut, as a WebSocket that does not answer its pings is;
- a peer that closes (end of file) ends a stream at once: its slot is
  free then, not at the next failed keepalive.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import h11
from websockets.asyncio.server import ServerConnection

from sync_server.clock import Clock, SystemClock
from sync_server.core.limits import (
    HTTP_REQUEST_TIMEOUT_SECONDS,
    MAX_HTTP_BODY_BYTES,
    MAX_HTTP_HEAD_BYTES,
    MAX_HTTP_REQUEST_PIECES,
    MAX_REQUEST_LINE_BYTES,
    PING_TIMEOUT_SECONDS,
)
from sync_server.hosting.outbox import OutboxBudget
from sync_server.wire import protocol

log = logging.getLogger("sync_server.http")

API_PREFIX = b"/api/"

# The headers of every answer of the API (as web.py's plain routes).
BASE_HEADERS = (
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)


def is_api_target(target: bytes) -> bool:
    return target.startswith(API_PREFIX) or target == API_PREFIX[:-1]


class Door(asyncio.Protocol):
    """A connection until its request line is read (see the module doc)."""

    def __init__(
        self,
        ws: ServerConnection,
        api: Callable[[], asyncio.Protocol] | None,
        timeout: float = HTTP_REQUEST_TIMEOUT_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        self.ws = ws
        self.clock = clock or SystemClock()
        # websockets' select_subprotocol closure checks it is called for the
        # protocol of the connection its factory built: this one's.
        self.protocol = ws.protocol
        self.api = api
        self.timeout = timeout
        self._buffer = bytearray()
        self._searched = 0  # bytes of the buffer known to hold no newline
        self._reads = 0
        self._accepted = 0.0
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self.api is None:  # no second door: straight to websockets
            self._hand_to(self.ws)
            return
        self._accepted = self.clock.monotonic()
        self._timer = asyncio.get_running_loop().call_later(self.timeout, transport.abort)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._reads += 1
        end = self._buffer.find(b"\n", self._searched)
        if end < 0:
            self._searched = len(self._buffer)
            if len(self._buffer) < MAX_REQUEST_LINE_BYTES:
                if self._reads >= MAX_HTTP_REQUEST_PIECES and self._transport is not None:
                    self._transport.abort()  # a request line dribbled byte by byte
                return  # the request line is not complete yet
        parts = bytes(self._buffer[: max(end, 0)]).split(b" ")
        target = parts[1] if len(parts) == 3 else b""
        assert self.api is not None
        if is_api_target(target):
            conn = self.api()
            if isinstance(conn, HttpConnection):
                conn.accepted = self._accepted  # one deadline from the accept
                conn.pieces = self._reads  # and one count of its pieces
            self._hand_to(conn)
        else:
            self._hand_to(self.ws)

    def _hand_to(self, chosen: asyncio.Protocol) -> None:
        assert self._transport is not None
        if self._timer is not None:
            self._timer.cancel()
        self._transport.set_protocol(chosen)
        chosen.connection_made(self._transport)
        if self._buffer:
            data, self._buffer = bytes(self._buffer), bytearray()
            chosen.data_received(data)

    def eof_received(self) -> bool:
        return False  # closed before a request line: nothing to answer

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()


def door_factory(
    api: Callable[[], asyncio.Protocol] | None,
    timeout: float = HTTP_REQUEST_TIMEOUT_SECONDS,
    clock: Clock | None = None,
) -> Callable[..., Door]:
    """websockets' `create_connection`: its connection, behind a `Door`."""

    def create(*args: Any, **kwargs: Any) -> Door:
        return Door(ServerConnection(*args, **kwargs), api, timeout, clock)

    return create


@attrs.frozen
class HttpRequest:
    """The head of one request of the API: what its route and caller are
    decided from, before any of its body is read (`HttpConnection.read_body`)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names; repeated ones joined with ", "
    peer: tuple[str, int] | None  # the socket's peer (web.client_address names the client)
    has_body: bool = False  # a Content-Length over 0, or a chunked body

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class BodyRefused(Exception):
    """The body was refused while it was read (too big, in too many pieces,
    too slow, malformed, cut): its status and why. The handler answers it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


Handler = Callable[[HttpRequest, "HttpConnection"], Awaitable[None]]

# Where a request is: its head being read; the head with the handler, its
# body not asked for (the socket is not read); its body being read; read whole.
HEAD, HANDLER, BODY, DONE = "head", "handler", "body", "done"

# An answer's slice: the next is asked for only once the transport holds
# less than this (asyncio's own low-water mark is a quarter of its 64 KiB).
SLICE_BYTES = 64 * 1024


class HttpConnection(asyncio.Protocol):
    """One HTTP/1.1 request and its answer (a response, or a stream), over
    h11, bounded before it costs (see the module docstring)."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_body: int = MAX_HTTP_BODY_BYTES,
        max_pieces: int = MAX_HTTP_REQUEST_PIECES,
        timeout: float = HTTP_REQUEST_TIMEOUT_SECONDS,
        stall: float = PING_TIMEOUT_SECONDS,
        server_header: str = "vtt-sync",
        tasks: set[asyncio.Task[None]] | None = None,
        on_refused: Callable[[HttpConnection], None] | None = None,
        budget: OutboxBudget | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.handler = handler
        self.clock = clock or SystemClock()
        self.max_body = max_body
        self.max_pieces = max_pieces
        self.timeout = timeout
        self.stall = stall
        self.server_header = server_header
        # Told of a request refused before the handler had it (a malformed
        # or oversized head, a head too slow): the per-address allowance.
        self.on_refused = on_refused
        # What every reader holds together (outbox.py): an answer's bytes not
        # yet taken count in it, under its room once the API knows it.
        self.budget = budget
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HTTP_HEAD_BYTES)
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()  # set when the peer is gone
        # Set when the peer closed its side (end of file) or is gone: a
        # stream ends then (its slot is free at once).
        self.hung_up = asyncio.get_running_loop().create_future()
        self.status: int | None = None  # the answer's status, once sent
        self.phase = HEAD
        self.accepted: float | None = None  # the clock's time at the accept (the door's)
        self.pieces = 0  # reads of the socket and chunks of the body, so far
        self.room: str | None = None  # the room of the request, once known
        self.cut_reason: str | None = None  # why the server cut it, if it did
        self._request: h11.Request | None = None
        self._body = bytearray()
        self._body_done: asyncio.Future[bytes] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tasks = tasks if tasks is not None else set()
        self._streaming = False
        self._writable: asyncio.Event = asyncio.Event()
        self._writable.set()
        self._watch: asyncio.Task[None] | None = None
        self._deadline_passed = False

    # --- asyncio.Protocol -----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        spent = 0.0 if self.accepted is None else self.clock.monotonic() - self.accepted
        self._timer = asyncio.get_running_loop().call_later(
            max(0.0, self.timeout - spent), self._too_slow
        )

    def data_received(self, data: bytes) -> None:
        self.pieces += 1
        if self.pieces > self.max_pieces:
            self._refuse_read(413 if self.phase == BODY else 400, self._too_many())
            return
        if self.phase in (HEAD, BODY):
            self.h11.receive_data(data)
            self._read_events()
        # else: after the request (one per connection), bytes are ignored

    def eof_received(self) -> bool:
        self._hang_up()
        if self.phase == HEAD:
            return False  # closed before its head: nothing to answer
        if self.phase == BODY:
            self._refuse_read(400, "the connection closed before the body's end")
        # A stream's reader is gone: end it now. Else half-closed: an answer
        # may still be written.
        return not self._streaming

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._watch is not None:
            self._watch.cancel()
        self._writable.set()  # a writer waiting for room sees the end
        self._hang_up()
        if self._body_done is not None and not self._body_done.done():
            self._body_done.set_exception(BodyRefused(400, "the connection closed"))
        if not self.closed.done():
            self.closed.set_result(None)
        if self.budget is not None:
            self.budget.forget(self)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def _hang_up(self) -> None:
        if not self.hung_up.done():
            self.hung_up.set_result(None)

    # --- reading the request ----------------------------------------------

    def _read_events(self) -> None:
        while self.phase in (HEAD, BODY):
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                self._refuse_read(exc.error_status_hint, f"bad request: {exc}")
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._request = event
                length = _content_length(event)
                if length is not None and length > self.max_body:
                    self._refuse_read(413, self._too_big())
                    return
                chunked = any(name == b"transfer-encoding" for name, _ in event.headers)
                if chunked or (length or 0) > 0:
                    # The handler decides from the head; the body waits
                    # (unread, in the kernel) until it is asked for.
                    if self.transport is not None:
                        self.transport.pause_reading()
                    self.phase = HANDLER
                    self._start(has_body=True)
                    return
            elif isinstance(event, h11.Data):
                self.pieces += 1
                self._body += event.data
                if len(self._body) > self.max_body:
                    self._refuse_read(413, self._too_big())
                    return
                if self.pieces > self.max_pieces:
                    self._refuse_read(413, self._too_many())
                    return
            elif isinstance(event, h11.EndOfMessage):
                if self._timer is not None:
                    self._timer.cancel()
                if self.phase == HEAD:
                    self.phase = DONE  # no body: the socket is read on (its end)
                    self._start(has_body=False)
                else:
                    self.phase = DONE
                    if self._body_done is not None and not self._body_done.done():
                        self._body_done.set_result(bytes(self._body))
                return
            elif isinstance(event, h11.ConnectionClosed):
                self._close()
                return

    def _too_many(self) -> str:
        return f"the request came in more than {self.max_pieces} pieces (reads and chunks)"

    def _too_big(self) -> str:
        return f"the body is over {self.max_body} bytes (a command's bound)"

    def _refuse_read(self, status: int, message: str) -> None:
        """The request fails while it is read: before the handler has it,
        answered here (and told to `on_refused`); while its body is read,
        the handler answers it (`read_body` raises)."""
        if self._timer is not None:
            self._timer.cancel()
        if self.phase == BODY and self._body_done is not None:
            self.phase = DONE
            if not self._body_done.done():
                self._body_done.set_exception(BodyRefused(status, message))
            return
        if self.phase == HEAD:
            self.phase = DONE
            self.respond_error(status, "bad_frame", message)
            if self.on_refused is not None:
                self.on_refused(self)
            return
        self.phase = DONE  # after the request: a peer sending on; drop it
        self.abort()

    def _too_slow(self) -> None:
        if self.phase in (HEAD, BODY):
            self._refuse_read(408, self._late())
        elif self.phase == HANDLER:
            self._deadline_passed = True  # its body, if asked for, is too late

    @staticmethod
    def _late() -> str:
        return "the request did not arrive in time"

    def _start(self, has_body: bool) -> None:
        assert self._request is not None and self.transport is not None
        r = self._request
        target = r.target.decode("latin-1")
        path, _, query = target.partition("?")
        headers: dict[str, str] = {}
        for name, value in r.headers:
            key, text = name.decode("latin-1"), value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        peer = self.transport.get_extra_info("peername")
        request = HttpRequest(
            r.method.decode("latin-1"),
            path,
            query,
            headers,
            (str(peer[0]), int(peer[1])) if peer else None,
            has_body,
        )
        task = asyncio.get_running_loop().create_task(self._run(request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def read_body(self) -> bytes:
        """The request's body, read now (the handler has decided it wants
        it); BodyRefused past its bounds (bytes, pieces, the deadline)."""
        if self.phase == DONE:
            return bytes(self._body)
        assert self.phase == HANDLER
        if self._deadline_passed:
            self.phase = DONE
            raise BodyRefused(408, self._late())
        self.phase = BODY
        self._body_done = asyncio.get_running_loop().create_future()
        if self.h11.they_are_waiting_for_100_continue:
            self._write(self.h11.send(h11.InformationalResponse(status_code=100, headers=[])))
        self._read_events()  # what came with the head
        if self.phase == BODY and self.transport is not None:
            self.transport.resume_reading()
        return await self._body_done

    async def _run(self, request: HttpRequest) -> None:
        try:
            await self.handler(request, self)
        except Exception:
            log.exception("HTTP %s %s failed", request.method, request.path)
            self.respond_error(500, "internal", "the server failed on this request; retry")
        finally:
            if self._streaming:
                self.end_stream()
            elif self.status is None:
                self.respond_error(500, "internal", "the server gave no answer; retry")

    # --- writing the answer -------------------------------------------------

    def _write(self, data: bytes | None) -> None:
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _head(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.status = status
        self._write(
            self.h11.send(
                h11.Response(
                    status_code=status,
                    reason=http.HTTPStatus(status).phrase.encode(),
                    headers=[
                        ("Date", email.utils.formatdate(usegmt=True)),
                        ("Server", self.server_header),
                        ("Connection", "close"),
                        *BASE_HEADERS,
                        *headers,
                    ],
                )
            )
        )

    def respond(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        """The whole answer, then the connection closes (after it is written,
        or once its reader has taken nothing of it for `stall` seconds)."""
        if self.status is not None or self.transport is None:
            return
        extra = [("Content-Length", str(len(body)))]
        if body or status not in (204, 304):
            extra.append(("Content-Type", content_type))
        try:
            self._head(status, [*extra, *(headers or [])])
            if body:
                self._write(self.h11.send(h11.Data(data=body)))
            self._write(self.h11.send(h11.EndOfMessage()))
        except h11.LocalProtocolError:  # the peer broke the exchange first
            pass
        self._count_held()
        self._close()

    def respond_error(
        self, status: int, code: str, message: str, headers: list[tuple[str, str]] | None = None
    ) -> None:
        """An answer whose body is the protocol's error frame."""
        body = json_body(protocol.error(code, message))
        self.respond(status, body, "application/json", headers)

    async def send(
        self,
        status: int,
        body: AsyncIterator[bytes],
        content_type: str = "application/json",
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        """An answer made of slices (chunked), each asked for only when the
        transport has room for it: what it holds for its reader stays about
        one slice, whatever the answer's size, and a reader that takes
        nothing for `stall` seconds is cut (its answer left unfinished)."""
        if self.status is not None or self.transport is None:
            return
        self._head(status, [("Content-Type", content_type), *(headers or [])])
        try:
            async for piece in body:
                if not await self._room_for_more():
                    return
                self._write(self.h11.send(h11.Data(data=piece)))
                self._count_held()
            self._write(self.h11.send(h11.EndOfMessage()))
        except h11.LocalProtocolError:
            self.abort()
            return
        except BaseException:
            # Its status is sent: a failure halfway (the room deleted, the
            # server stopping) leaves the answer unfinished, which the
            # reader sees (no last chunk), never a whole-looking one.
            self.abort()
            raise
        self._close()

    async def _room_for_more(self) -> bool:
        """Wait until the transport holds less than a slice (its reader took
        the rest); False when the connection is gone or was cut meanwhile."""
        while self.buffered >= SLICE_BYTES:
            before = self.buffered
            try:
                async with self.clock.timeout(self.stall):
                    await self._writable.wait()
            except TimeoutError:
                if self.buffered >= before:
                    self.cut(f"its reader took nothing for {self.stall:g} s")
                    return False
            if self.closed.done():
                return False
        return not self.closed.done() and self.cut_reason is None

    def start_stream(self, content_type: str, headers: list[tuple[str, str]]) -> None:
        """A 200 whose body is written piece by piece (chunked) until `end_stream`."""
        if self.status is not None:
            return
        self._streaming = True
        self._head(200, [("Content-Type", content_type), *headers])
        if self.hung_up.done():
            self.end_stream()  # its reader left before it started

    def write_data(self, data: bytes) -> None:
        if self._streaming and not self.closed.done():
            try:
                self._write(self.h11.send(h11.Data(data=data)))
            except h11.LocalProtocolError:
                self.abort()

    def end_stream(self) -> None:
        """The stream's last piece, then the connection closes once written."""
        if not self._streaming:
            return
        self._streaming = False
        with contextlib.suppress(h11.LocalProtocolError):
            self._write(self.h11.send(h11.EndOfMessage()))
        self._close()

    @property
    def buffered(self) -> int:
        """Bytes written and not yet taken by the kernel (the slow-reader bound)."""
        if self.transport is None or self.closed.done():
            return 0
        return self.transport.get_write_buffer_size()

    def _count_held(self) -> None:
        if self.budget is not None and not self.closed.done():
            self.budget.held(self, self.buffered)

    def cut(self, reason: str) -> None:
        """Drop the connection now, for `reason` (logged): a reader past its
        bound or its time, or the send budget spent."""
        if self.cut_reason is None:
            self.cut_reason = reason
            log.info("HTTP answer to %s cut: %s", self._peer_text(), reason)
        self.abort()

    def drop(self, code: int, reason: str) -> None:
        """The outbox budget's `drop` (outbox.py): this answer holds the most
        of a scope over its bound."""
        self.cut(reason)

    def abort(self) -> None:
        """Drop the connection now, with whatever it still buffers."""
        self._streaming = False
        if self.transport is not None:
            self.transport.abort()

    def _close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()  # after what is buffered is written
            if self.transport.get_write_buffer_size():
                self._watch = asyncio.get_running_loop().create_task(self._watch_drain())

    async def _watch_drain(self) -> None:
        """A closing connection whose reader takes nothing of what it still
        holds for `stall` seconds is cut (asyncio would wait for ever)."""
        last = self.buffered
        while not self.closed.done():
            await self.clock.sleep(self.stall)
            now = self.buffered
            if now and now >= last:
                self.cut(f"its reader took nothing for {self.stall:g} s")
                return
            last = now

    def _peer_text(self) -> str:
        peer = self.transport.get_extra_info("peername") if self.transport is not None else None
        return str(peer[0]) if peer else "?"


def _content_length(request: h11.Request) -> int | None:
    """The head's Content-Length (h11 checked its syntax: digits only)."""
    for name, value in request.headers:
        if name == b"content-length":
            with contextlib.suppress(ValueError):
                return int(value)
    return None


def json_body(value: Any) -> bytes:
    """JSON as the API sends it: compact, UTF-8, one line."""
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
