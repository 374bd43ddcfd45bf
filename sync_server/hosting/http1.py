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
The request, its headers and its body are bounded in size and time.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import h11
from websockets.asyncio.server import ServerConnection

from sync_server.core.limits import (
    HTTP_REQUEST_TIMEOUT_SECONDS,
    MAX_HTTP_BODY_BYTES,
    MAX_HTTP_HEAD_BYTES,
    MAX_REQUEST_LINE_BYTES,
)
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
    ) -> None:
        self.ws = ws
        # websockets' select_subprotocol closure checks it is called for the
        # protocol of the connection its factory built: this one's.
        self.protocol = ws.protocol
        self.api = api
        self.timeout = timeout
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self.api is None:  # no second door: straight to websockets
            self._hand_to(self.ws)
            return
        self._timer = asyncio.get_running_loop().call_later(self.timeout, transport.abort)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        end = self._buffer.find(b"\n")
        if end < 0 and len(self._buffer) < MAX_REQUEST_LINE_BYTES:
            return  # the request line is not complete yet
        parts = bytes(self._buffer[: max(end, 0)]).split(b" ")
        target = parts[1] if len(parts) == 3 else b""
        assert self.api is not None
        self._hand_to(self.api() if is_api_target(target) else self.ws)

    def _hand_to(self, protocol: asyncio.Protocol) -> None:
        assert self._transport is not None
        if self._timer is not None:
            self._timer.cancel()
        self._transport.set_protocol(protocol)
        protocol.connection_made(self._transport)
        if self._buffer:
            data, self._buffer = bytes(self._buffer), bytearray()
            protocol.data_received(data)

    def eof_received(self) -> bool:
        return False  # closed before a request line: nothing to answer

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()


def door_factory(
    api: Callable[[], asyncio.Protocol] | None, timeout: float = HTTP_REQUEST_TIMEOUT_SECONDS
) -> Callable[..., Door]:
    """websockets' `create_connection`: its connection, behind a `Door`."""

    def create(*args: Any, **kwargs: Any) -> Door:
        return Door(ServerConnection(*args, **kwargs), api, timeout)

    return create


@attrs.frozen
class HttpRequest:
    """One request of the API, read whole (its body bounded)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names; repeated ones joined with ", "
    body: bytes
    peer: tuple[str, int] | None  # the socket's peer (web.client_address names the client)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


Handler = Callable[[HttpRequest, "HttpConnection"], Awaitable[None]]


class HttpConnection(asyncio.Protocol):
    """One HTTP/1.1 request and its answer (a response, or a stream), over h11."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_body: int = MAX_HTTP_BODY_BYTES,
        timeout: float = HTTP_REQUEST_TIMEOUT_SECONDS,
        server_header: str = "vtt-sync",
        tasks: set[asyncio.Task[None]] | None = None,
    ) -> None:
        self.handler = handler
        self.max_body = max_body
        self.timeout = timeout
        self.server_header = server_header
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HTTP_HEAD_BYTES)
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()  # set when the peer is gone
        self.status: int | None = None  # the answer's status, once sent
        self._request: h11.Request | None = None
        self._body = bytearray()
        self._timer: asyncio.TimerHandle | None = None
        self._tasks = tasks if tasks is not None else set()
        self._streaming = False

    # --- asyncio.Protocol -----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._timer = asyncio.get_running_loop().call_later(self.timeout, self._too_slow)

    def data_received(self, data: bytes) -> None:
        if self.status is not None or self._request_done:
            return  # one request per connection: anything after it is ignored
        self.h11.receive_data(data)
        self._read_events()

    def eof_received(self) -> bool:
        if not self._request_done and self.status is None:
            with contextlib.suppress(h11.RemoteProtocolError):
                self.h11.receive_data(b"")
        return True  # half-closed: an answer may still be written

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self.closed.done():
            self.closed.set_result(None)

    # --- reading the request ----------------------------------------------

    @property
    def _request_done(self) -> bool:
        return self.h11.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED)

    def _read_events(self) -> None:
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                self.respond_error(exc.error_status_hint, "bad_frame", f"bad request: {exc}")
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._request = event
                length = _content_length(event)
                if length is not None and length > self.max_body:
                    self._body_too_big()
                    return
                if self.h11.they_are_waiting_for_100_continue:
                    self._write(
                        self.h11.send(h11.InformationalResponse(status_code=100, headers=[]))
                    )
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > self.max_body:
                    self._body_too_big()
                    return
            elif isinstance(event, h11.EndOfMessage):
                self._start()
                return
            elif isinstance(event, h11.ConnectionClosed):
                self._close()
                return

    def _body_too_big(self) -> None:
        self.respond_error(
            413, "bad_frame", f"the body is over {self.max_body} bytes (a command's bound)"
        )

    def _too_slow(self) -> None:
        if self.status is None:
            self.respond_error(408, "bad_frame", "the request did not arrive in time")

    def _start(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
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
            bytes(self._body),
            (str(peer[0]), int(peer[1])) if peer else None,
        )
        task = asyncio.get_running_loop().create_task(self._run(request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
        """The whole answer, then the connection closes (after it is written)."""
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
        self._close()

    def respond_error(
        self, status: int, code: str, message: str, headers: list[tuple[str, str]] | None = None
    ) -> None:
        """An answer whose body is the protocol's error frame."""
        body = json_body(protocol.error(code, message))
        self.respond(status, body, "application/json", headers)

    def start_stream(self, content_type: str, headers: list[tuple[str, str]]) -> None:
        """A 200 whose body is written piece by piece (chunked) until `end_stream`."""
        if self.status is not None:
            return
        self._streaming = True
        self._head(200, [("Content-Type", content_type), *headers])

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

    def buffered(self) -> int:
        """Bytes written and not yet taken by the kernel (the slow-reader bound)."""
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def abort(self) -> None:
        """Drop the connection now, with whatever it still buffers."""
        self._streaming = False
        if self.transport is not None:
            self.transport.abort()

    def _close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()  # after what is buffered is written


def _content_length(request: h11.Request) -> int | None:
    for name, value in request.headers:
        if name == b"content-length":
            with contextlib.suppress(ValueError):
                return int(value)
    return None


def json_body(value: Any) -> bytes:
    """JSON as the API sends it: compact, UTF-8, one line."""
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
