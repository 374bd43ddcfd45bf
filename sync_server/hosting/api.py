"""The HTTP API: the same room through a second door (docs/http.md).

    POST /api/v1/rooms/{room}/commands   a command; the reply is its ack or error
    GET  /api/v1/rooms/{room}            the caller's view of the room
    GET  /api/v1/rooms/{room}/events     Server-Sent Events: the caller's patches
    GET  /api/v1/rooms/{room}/history    the events of the recent patches
    GET  /api/v1/openapi.json            this API, described (apidoc.py)
    GET  /api/v1/asyncapi.json           the WebSocket protocol, described

Not a second implementation: every request goes where a WebSocket frame
goes. A command is a `Command` in the room host's queue (the same dedup,
the `Idempotency-Key` header being the command id; the same batches and
commit before anything is sent); the stream is a `Join` (the welcome and
the subscription in one step, a sink on the room bus with the caller's
viewer, counted by the registry, closed by it when the token is rotated or
the room deleted, bounded like a WebSocket outbox); reads are queued too
(`Query`), so they see the room as stored. The token is checked as a
hello's is (a refusal counts against the address), the allowance is the
user's one bucket shared with their WebSocket sessions, and the Origin
check and CORS answers are the plain routes' (web.py).

Every answer is JSON: the ack (with the patch as the sender sees it) or
the protocol's error frame, its HTTP status read from the error code
(`STATUS`). Tokens are never logged; the DEBUG line of a request names its
method, path, status and peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import secrets
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs

import rules
from rules.catalog import valid_room_id
from rules.model import ROLES as ROOM_ROLES
from rules.state import role_of
from sync_server.cluster.leases import Owner
from sync_server.core.auth import hash_token, plausible_token, same_hash
from sync_server.core.inputs import CommandIn
from sync_server.core.limits import (
    HISTORY_DEFAULT_LIMIT,
    MAX_CMD_ID_LENGTH,
    MAX_INT,
)
from sync_server.core.outputs import KEY_REUSED
from sync_server.core.ratelimit import TokenBucket, reply_cost
from sync_server.core.reads import JoinRefused, history_entry
from sync_server.core.recent import RecentPatches
from sync_server.core.room import RoomCore
from sync_server.hosting.bus import Message
from sync_server.hosting.http1 import (
    SLICE_BYTES,
    BodyRefused,
    HttpConnection,
    HttpRequest,
    json_body,
)
from sync_server.hosting.outbox import OutboxBudget
from sync_server.hosting.room_host import RoomHost
from sync_server.hosting.sessions import HelloGate, SessionDeps, request_bucket
from sync_server.hosting.web import CORS_MAX_AGE_SECONDS, client_address, origin_allowed
from sync_server.hosting.work import Command, Join, RoomClosed
from sync_server.wire import frames, protocol
from sync_server.wire.codec import CODECS, BadFrame

log = logging.getLogger("sync_server.http")

PREFIX = "/api/v1"
JSON = CODECS[protocol.JSON]
NO_EXPECT = protocol.NO_EXPECT

# An error code's HTTP status. `rule` (the rules refuse it in this state of
# the room) is a conflict with the room, like `conflict`.
STATUS = {
    "bad_frame": 400,
    "unknown_op": 400,
    "invalid_args": 400,
    protocol.UNAUTHENTICATED: 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "rule": 409,
    "rate_limited": 429,
    "internal": 500,
}

# The methods of each route (every other one reads).
ALLOW = {"commands": "POST, OPTIONS"}
ALLOW_DEFAULT = "GET, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID"
EVENT_STREAM = "text/event-stream; charset=utf-8"


@attrs.frozen
class Call:
    """One authenticated request to a room's route."""

    request: HttpRequest
    conn: HttpConnection
    cors: list[tuple[str, str]]
    host: RoomHost
    user: str
    role: str
    bucket: TokenBucket | None
    # The authenticated token's hash: a stream's join checks it is still the
    # user's (a rotation stored meanwhile ends it, as for a WebSocket hello).
    digest: bytes
    # Its address's failed attempt: a body refused counts there too.
    attempt: Attempt


def route_of(path: str) -> tuple[str, str | None, str]:
    """(route, room, last segment) of a request path; route "" if none."""
    path = urllib.parse.unquote(path)
    parts = path[len(PREFIX) :].strip("/").split("/") if path.startswith(PREFIX + "/") else []
    if len(parts) == 1 and parts[0] in ("openapi.json", "asyncapi.json"):
        return "openapi", None, parts[0]
    if len(parts) in (2, 3) and parts[0] == "rooms" and valid_room_id(parts[1]):
        route = parts[2] if len(parts) == 3 else "state"
        if route in ("state", "commands", "events", "history"):
            return route, parts[1], parts[-1]
    return "", None, ""


class Refusal(Exception):
    """A request refused before it reaches a room: its status and error frame."""

    def __init__(
        self, code: str, message: str, status: int | None = None, headers: Any = None
    ) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.status = status or STATUS[code]
        self.headers: list[tuple[str, str]] = headers or []


class Moved(Exception):
    """Cluster mode: another node serves the room, at `url`."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class Attempt:
    """One request's failed attempt against its address's allowance (the
    refused hellos' one, `HelloGate`): reserved at the request's head,
    before anything else is looked at, so that requests sent together
    cannot all pass a check that costs nothing. Given back once the request
    reaches a room as a user's (its token checked) or is answered without a
    refusal; kept when it is refused, whatever refuses it: a bad token, an
    unknown route, a wrong method, an origin, a body over its bounds. A
    refusal after the token was checked (the body) takes one anew. The
    answers of a room to its user (the rules' refusals, the user's own rate)
    are that user's: charged to their allowance, as a WebSocket command's."""

    def __init__(self, gate: HelloGate, peer: str) -> None:
        self.gate = gate
        self.peer = peer
        self.held = False

    async def reserve(self, deadline: float) -> bool:
        self.held = await self.gate.reserve(self.peer, deadline)
        return self.held

    def passed(self) -> None:
        if self.held:
            self.held = False
            self.gate.release(self.peer, failed=False)

    def failed(self) -> None:
        if self.held:
            self.held = False
            self.gate.release(self.peer, failed=True)
        else:
            self.gate.charge(self.peer)


def unauthenticated() -> Refusal:
    """One answer for every bad token or room, as for a hello."""
    return Refusal(
        protocol.UNAUTHENTICATED,
        "bad token or room: send 'Authorization: Bearer TOKEN' with this room's token",
        headers=[("WWW-Authenticate", 'Bearer realm="vtt-sync"')],
    )


def whole_number(raw: str, what: str, low: int, high: int) -> int:
    """`raw` (a query parameter, a header) as a whole number from `low` to
    `high`, else a 400 that says what is expected: the one parser of every
    number the API reads. ASCII digits only (`str.isdigit` also takes "²"
    and other digits `int` refuses: a 500 and a traceback), and no more of
    them than `high` has (a 5,000-digit one is refused before `int` reads
    it: past 4,300 digits it raises, and it costs its length squared)."""
    text = raw.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(high))):
        raise Refusal("invalid_args", f"{what} must be a whole number from {low} to {high}")
    value = int(text)
    if not low <= value <= high:
        raise Refusal("invalid_args", f"{what} must be a whole number from {low} to {high}")
    return value


def retry_after(bucket: TokenBucket) -> str:
    """Whole seconds until `bucket` allows one request again."""
    missing = 1.0 - bucket.tokens
    return str(max(1, math.ceil(missing / bucket.spec.rate)))


def json_line(frame: dict[str, Any]) -> bytes:
    """A frame as the JSON subprotocol encodes it, as bytes."""
    text = JSON.encode(frame)
    return text.encode() if isinstance(text, str) else text


def sse(event: str, data: bytes, event_id: int | None = None) -> bytes:
    """One Server-Sent Event; `data` is one line of JSON (the codec never
    writes a raw newline)."""
    head = b"" if event_id is None else b"id: %d\n" % event_id
    return head + b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


def history_slice(picks: list[bytes], start: int, viewer: rules.Viewer) -> tuple[bytes, int]:
    """The history's entries from `picks[start]` on, as its JSON list's
    items (a comma first unless `start` is 0), until the slice is
    SLICE_BYTES or more: (its bytes, where the next starts). The slices
    joined are exactly `json_body` of the whole list's items."""
    pieces: list[bytes] = []
    size, i = 0, start
    while i < len(picks) and size < SLICE_BYTES:
        entry = history_entry(RecentPatches.load(picks[i]), viewer)
        encoded = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()
        pieces.append(encoded)
        size += len(encoded)
        i += 1
    return (b"," if start else b"") + b",".join(pieces), i


def _history_scan_in(
    v: int, want: int, viewer: rules.Viewer, core: RoomCore
) -> tuple[list[bytes], int | None]:
    """One step of `RoomCore.history_scan`, as a read of the room's queue."""
    return core.history_scan(v, want, viewer, SLICE_BYTES)


def _history_slice_in(
    picks: list[bytes], start: int, viewer: rules.Viewer, core: RoomCore
) -> tuple[bytes, int]:
    """`history_slice`, as a read of the room's queue (the core unused: the
    queue is where its CPU is metered)."""
    return history_slice(picks, start, viewer)


class EventStream:
    """A viewer's patches as Server-Sent Events: a subscriber of the room
    bus (a `Sink`) and of the registry (a `Closable`), as a WebSocket
    session's outbox is. Each patch goes out as the JSON its WebSocket
    would carry (the very bytes, encoded once per view group), with its
    version as the event id.

    What its reader has not taken yet is bounded as a WebSocket reader's
    is: by the outbox's bound (`outbox_max_bytes`), by the outbox budget of
    its room and of the server (outbox.py: it is one of the readers the
    budget counts and drops, the slowest first), and in time: a reader that
    took nothing of what it holds between two keepalives (`ping_interval`)
    is cut, as a WebSocket that does not answer its pings is. Cut, it
    resumes with `Last-Event-ID` (1013, logged with the reason)."""

    codec = JSON

    def __init__(
        self,
        conn: HttpConnection,
        user: str,
        max_bytes: int,
        on_sent: Callable[[int], None],
        on_too_slow: Callable[[EventStream, str], None],
        budget: OutboxBudget | None = None,
        room: str | None = None,
    ) -> None:
        self.conn = conn
        self.user = user
        self.room = room
        self.budget = budget
        self.viewer: Any = None
        self.max_bytes = max_bytes
        self.closing = False
        self.close_code: int | None = None
        self._on_sent = on_sent
        self._on_too_slow = on_too_slow
        self._started = False
        # A snapshot of its view is on its way (a patch's views were capped,
        # bus.Message.admit): the patches until then are covered by it.
        self.stale = False
        # What it held at the last keepalive, and wrote since: what its
        # reader took meanwhile (`keepalive`).
        self._held_then = 0
        self._written = 0

    @property
    def buffered(self) -> int:
        """Bytes written for its reader and not yet taken (the budget's count)."""
        return self.conn.buffered

    def _write(self, chunk: bytes) -> int:
        if self.closing:
            return 0
        if self.conn.buffered + len(chunk) > self.max_bytes:
            # Too slow: nothing more can be written, the close event neither;
            # the connection goes with what it still buffers.
            self.drop(protocol.CLOSE_TOO_SLOW, "too slow to read; resume with Last-Event-ID")
            return 0
        if not self._started:
            self._started = True
            self.conn.start_stream(EVENT_STREAM, [("X-Accel-Buffering", "no")])
        self.conn.write_data(chunk)
        self._written += len(chunk)
        self._on_sent(1)
        if self.budget is not None:
            self.budget.held(self, self.conn.buffered)
        return len(chunk)

    def drop(self, code: int, reason: str) -> None:
        """Cut now (1013: too slow, or the send budget spent), what it
        buffers freed: a close event would wait behind what the reader does
        not take."""
        if self.closing:
            return
        self.closing = True
        self.close_code = code
        if self.budget is not None:
            self.budget.forget(self)
        self.conn.cut(reason)
        self._on_too_slow(self, reason)

    def send(self, frame: dict[str, Any]) -> int:
        """A frame for this stream only: the join's welcome (a snapshot
        event, or one event per patch when it resumes)."""
        parsed = frames.parse_server(frame)
        if isinstance(parsed, frames.Welcome) and parsed.patches is not None:
            return sum(self.send(p) for p in parsed.patches)
        if isinstance(parsed, frames.Welcome):
            assert parsed.v is not None and parsed.state is not None  # a room's welcome
            snapshot = protocol.snapshot(parsed.v, parsed.state)
            snapshot.update(room=parsed.room, user=parsed.user, role=parsed.role)
            return self._write(sse("snapshot", json_line(snapshot), parsed.v))
        return self._write(sse(frames.frame_type(frame), json_line(frame), frame.get("v")))

    def deliver(self, data: bytes, v: int | None = None) -> None:
        """A patch from the bus, as this stream's viewer sees it (past a
        patch's cap of views, the bus holds it back: a snapshot of its view
        comes instead, as for a WebSocket session)."""
        if not (self.closing or self.stale):
            self._write(sse("patch", data, v))

    def resync(self, message: Message) -> None:
        """The snapshot a stale stream was waiting for: a snapshot event,
        then the room's patches again."""
        self.stale = False
        if not self.closing:
            frame = message.frame_for(None, self.viewer)
            self._write(sse("snapshot", json_line(frame), frame.get("v")))

    def keepalive(self, interval: float) -> None:
        """Every `interval`: a reader that held bytes at the last one and
        took none of them since is cut (the WebSocket's ping timeout);
        else a comment line, which keeps proxies from timing the stream out
        and finds a reader that is gone."""
        if not self._started or self.closing:
            return
        now = self.conn.buffered
        taken = self._held_then + self._written - now
        if self._held_then and taken <= 0:
            self.drop(protocol.CLOSE_TOO_SLOW, f"its reader took nothing for {interval:g} s")
            return
        self._held_then, self._written = now, 0
        self._write(b": keepalive\n\n")

    def close_after(self, code: int, reason: str) -> None:
        """A last `close` event (the WebSocket close code and reason), then
        the end of the stream."""
        if self.closing:
            return
        if self._started:
            self._write(sse("close", json_body({"code": code, "reason": reason}).rstrip()))
        self.closing = True
        self.close_code = code
        self.conn.end_stream()

    def abort(self, code: int, reason: str) -> None:
        """Close now (the room was deleted): the close event, then the end;
        no more patches."""
        self.close_after(code, reason)


class Api:
    """The HTTP API of one server (see the module docstring)."""

    def __init__(
        self,
        deps: SessionDeps,
        *,
        allowed_origins: frozenset[str] = frozenset(),
        documents: Callable[[str], bytes | None] = lambda name: None,
    ) -> None:
        self.deps = deps
        self.allowed_origins = frozenset(o.rstrip("/") for o in allowed_origins)
        self.documents = documents
        self.streams: set[EventStream] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.connections: set[HttpConnection] = set()
        self._inflight: dict[tuple[str, str], int] = {}

    def connection(self) -> HttpConnection:
        """A new connection's protocol (the door's factory for /api/)."""
        conn = HttpConnection(
            self.handle,
            tasks=self.tasks,
            stall=self.deps.limits.ping_timeout,
            on_refused=self._refused_head,
            budget=self.deps.outbox_budget,
            clock=self.deps.clock,
        )
        self.connections.add(conn)
        conn.closed.add_done_callback(lambda _: self.connections.discard(conn))
        return conn

    def _refused_head(self, conn: HttpConnection) -> None:
        """A request refused before its head was whole (malformed, too big,
        in too many pieces, too slow): one failed attempt of its address. Its
        headers were not read, so behind a trusted proxy the address is the
        proxy's: nothing is charged then (the proxy parses heads itself)."""
        transport = conn.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        remote = str(peer[0]) if peer else "?"
        if remote not in self.deps.trusted_proxies:
            self.deps.hello_gate.charge(remote)
        self.deps.metrics.http_request("none", conn.status or 0)

    async def close(self, code: int, reason: str) -> None:
        """Shutdown (after the rooms drained): end every stream with `code`,
        let the answers of the last commands go out, then drop what is left."""
        for stream in list(self.streams):
            stream.close_after(code, reason)
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=self.deps.limits.close_timeout)
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for conn in list(self.connections):
            conn.abort()

    # --- one request -------------------------------------------------------

    def _peer(self, request: HttpRequest) -> str:
        remote = request.peer[0] if request.peer else "?"
        return client_address(remote, request.header("x-forwarded-for"), self.deps.trusted_proxies)

    def _cors(self, request: HttpRequest) -> list[tuple[str, str]]:
        origin = request.header("origin")
        if origin is None:
            return []
        if "*" in self.allowed_origins:
            return [("Access-Control-Allow-Origin", "*")]
        origin = origin.strip().rstrip("/")
        if origin in self.allowed_origins:
            return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")]
        return []

    async def handle(self, request: HttpRequest, conn: HttpConnection) -> None:
        """One request, from its head: its address's allowance first, then
        its route and its caller, its body only for a command, once both are
        known (module http1.py: a refused request never has its body read)."""
        cors = self._cors(request)
        route, room, name = route_of(request.path)
        deps = self.deps
        attempt = Attempt(deps.hello_gate, self._peer(request))
        try:
            if not await attempt.reserve(deps.clock.monotonic() + deps.limits.hello_timeout):
                log.info("HTTP request from %s refused: too many failed attempts", attempt.peer)
                await deps.clock.sleep(deps.limits.hello_penalty_seconds)
                raise Refusal("rate_limited", "too many failed attempts; wait and retry",
                              headers=[("Retry-After", "1")])  # fmt: skip
            await self._route(request, conn, cors, route, room, name, attempt)
        except Refusal as refused:
            conn.respond_error(
                refused.status, refused.code, refused.message, refused.headers + cors
            )
        except BodyRefused as refused:
            attempt.failed()
            conn.respond_error(refused.status, "bad_frame", refused.message, cors)
        except Moved as moved:  # the WebSocket's redirect frame, as an HTTP redirect
            body = json_body(protocol.redirect(moved.url))
            conn.respond(307, body, headers=[("Location", moved.url), *cors])
        finally:
            if attempt.held:  # refused before it reached a room: the address's
                if conn.status is not None and 400 <= conn.status < 500:
                    attempt.failed()
                else:
                    attempt.passed()
            self.deps.metrics.http_request(route or "none", conn.status or 0)
            self._log(request, conn)

    def _log(self, request: HttpRequest, conn: HttpConnection) -> None:
        if log.isEnabledFor(logging.DEBUG):
            peer = self._peer(request)
            log.debug(
                "%s %s %s from %s",
                request.method,
                request.path,
                conn.status,
                peer,
                extra={"event": "http", "method": request.method, "path": request.path,
                       "status": conn.status, "peer": peer},
            )  # fmt: skip

    async def _route(
        self,
        request: HttpRequest,
        conn: HttpConnection,
        cors: list[tuple[str, str]],
        route: str,
        room: str | None,
        name: str,
        attempt: Attempt,
    ) -> None:
        if not route:
            raise Refusal("not_found", f"no such endpoint: {request.path}")
        if request.has_body and route != "commands":
            raise Refusal("bad_frame", f"{request.method} {request.path} takes no body")
        allow = ALLOW.get(route, ALLOW_DEFAULT)
        if request.method == "OPTIONS":
            extra = [("Allow", allow)]
            if cors:
                extra += [
                    *cors,
                    ("Access-Control-Allow-Methods", allow),
                    ("Access-Control-Allow-Headers", CORS_HEADERS),
                    ("Access-Control-Max-Age", str(CORS_MAX_AGE_SECONDS)),
                ]
            conn.respond(204, b"", headers=extra)
            attempt.passed()
            return
        if request.method not in allow.split(", "):
            raise Refusal(
                "bad_frame", f"{request.method} is not allowed here", 405, [("Allow", allow)]
            )
        if not origin_allowed(
            request.header("origin"), request.header("host"), self.allowed_origins
        ):
            raise Refusal("forbidden", "this page's origin may not use this server")
        if route == "openapi":
            document = self.documents(name)
            if document is None:
                raise Refusal("not_found", f"no such endpoint: {request.path}")
            conn.respond(200, document, headers=cors)
            attempt.passed()
            return
        assert room is not None
        if self.deps.shutting_down():
            raise Refusal("internal", "the server is shutting down; retry later")
        host, user, role, digest = await self._authenticate(request, room)
        attempt.passed()  # a user of the room: their own allowance from here on
        conn.room = room
        bucket = request_bucket(self.deps, role, room, user)
        self._allow(bucket)
        call = Call(request, conn, cors, host, user, role, bucket, digest, attempt)
        await {
            "commands": self._command,
            "state": self._state,
            "history": self._history,
            "events": self._events,
        }[route](call)

    async def _authenticate(
        self, request: HttpRequest, room: str
    ) -> tuple[RoomHost, str, str, bytes]:
        """(the room's host, the user, their role, the token's hash), as a
        hello checks them (the request's `Attempt` was reserved from the
        address's allowance before: kept if this refuses); a stored role
        that is not a room's (gm, player, observer) opens nothing; and a
        room loaded after the lookup has the token looked up again (the new
        host never saw a rotation stored before its load)."""
        deps, peer = self.deps, self._peer(request)
        scheme, _, token = (request.header("authorization") or "").strip().partition(" ")
        token = token.strip()
        found = None
        digest, looked_up = b"", deps.rooms.loads  # room loads begun before the lookup
        if scheme.lower() == "bearer" and plausible_token(token):
            digest = hash_token(token)
            if not same_hash(digest, deps.admin_hash):  # the admin token has no room
                found = await deps.find_token(digest)
        if found is not None and found[0] == room:
            located = await deps.rooms.locate(room)
            if isinstance(located, Owner):  # cluster: another node serves the room
                if not located.url:
                    raise Refusal("internal", "the room's node has no address; retry")
                base = located.url.rstrip("/")  # its WebSocket URL: ws(s)://
                target = ("http" + base[2:] if base.startswith("ws") else base) + request.path
                if request.query:
                    target += "?" + request.query
                raise Moved(target)
            if located is not None and await located.token_still_found(
                looked_up, digest, found, deps.find_token
            ):
                user = found[1]
                role = role_of(located.state, user)
                # A rotation stored since the lookup: the token is over
                # (a command would get the new epoch, a stream join it).
                if role in ROOM_ROLES and located.core.token_current(user, digest):
                    return located, user, role, digest
        log.info("HTTP request from %s refused: bad token or room", peer)
        raise unauthenticated()

    def _allow(self, bucket: TokenBucket | None) -> None:
        """The user's one allowance, shared with their WebSocket sessions."""
        if bucket is not None and not bucket.allow(self.deps.clock.monotonic()):
            self.deps.metrics.rate_limited.inc()
            raise Refusal("rate_limited", "too many requests for this user; slow down",
                          headers=[("Retry-After", retry_after(bucket))])  # fmt: skip

    def _charge(self, bucket: TokenBucket | None, nbytes: int) -> None:
        if bucket is not None:
            bucket.charge(self.deps.clock.monotonic(), reply_cost(nbytes))

    async def _query(self, host: RoomHost, read: Callable[[RoomCore], Any]) -> Any:
        try:
            return await host.query(read)
        except RoomClosed:
            raise self._gone(host)

    def _gone(self, host: RoomHost) -> Refusal:
        if host.lost_reason is not None:
            return Refusal("internal", "this server stopped serving the room; retry")
        return Refusal("not_found", "the room was deleted")

    # --- the routes ----------------------------------------------------------

    async def _command(self, call: Call) -> None:
        request, conn, cors, host = call.request, call.conn, call.cors, call.host
        user, role = call.user, call.role
        cmd_id = request.header("idempotency-key")
        if cmd_id is None:
            cmd_id = f"http-{secrets.token_hex(8)}"
        elif not 1 <= len(cmd_id) <= MAX_CMD_ID_LENGTH:
            raise Refusal(
                "bad_frame",
                f"Idempotency-Key must be 1 to {MAX_CMD_ID_LENGTH} characters"
                + (" (it is empty: leave the header out for a new command)" if not cmd_id else ""),
            )
        key = (host.room_id, user)
        if self._inflight.get(key, 0) >= self.deps.limits.max_inflight_per_session:
            raise Refusal("rate_limited", "too many commands of this user in flight",
                          headers=[("Retry-After", "1")])  # fmt: skip
        body = await conn.read_body()  # only now: the caller and the route are known
        frame = self._command_frame(body, call.attempt)
        viewer = rules.Viewer(user, role)
        seen: list[dict[str, Any]] = []

        def patch_to(patch: dict[str, Any], view: Any) -> None:
            if view is not None and view.needs_snapshot(viewer):
                return  # past the cap of views: the ack has no patch, the stream a snapshot
            message = Message(patch, view)  # as the bus would render it for this viewer
            seen.append(message.frame_for(message.key(viewer), viewer))

        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def reply(answer: dict[str, Any]) -> None:
            if not fut.done():
                fut.set_result(answer)

        def done() -> None:
            left = self._inflight.get(key, 1) - 1
            if left:
                self._inflight[key] = left
            else:
                self._inflight.pop(key, None)

        command = CommandIn(
            actor=rules.Actor(user=user, role=role),
            epoch=host.epochs.get(user, 0),
            cmd_id=cmd_id,
            op=frame["op"],
            args=frame.get("args", {}),
            expect=frame.get("expect", NO_EXPECT),
            same_command=True,  # a key reused for another command: 422, not its first answer
            sessionless=True,  # what it may do is kept current from this command on
        )
        self._inflight[key] = self._inflight.get(key, 0) + 1
        item = Command(command, reply, done, self.deps.clock.monotonic(), patch_to)
        try:
            host.submit(item)
        except RoomClosed:
            done()
            raise self._gone(host)
        answer = await fut
        answered = frames.parse_server(answer)
        if isinstance(answered, frames.Error):
            reused = item.outcome == KEY_REUSED  # a key reused for another command
            conn.respond(
                422 if reused else STATUS.get(answered.code, 500), json_body(answer), headers=cors
            )
            return
        if seen:
            answer = {**answer, "patch": seen[0]}
        conn.respond(200, json_body(answer), headers=cors)

    @staticmethod
    def _command_frame(body: bytes, attempt: Attempt) -> dict[str, Any]:
        """The body as a command frame; a malformed one is a refused request
        (it counts against the address, as a body over its bounds does)."""
        try:
            frame = JSON.decode(body.decode("utf-8"))
            if "op" not in frame:
                raise Refusal("bad_frame", 'a command needs an op: {"op": ..., "args": {...}}')
        except UnicodeDecodeError:
            attempt.failed()
            raise Refusal("bad_frame", "the body must be JSON in UTF-8")
        except BadFrame as exc:
            attempt.failed()
            raise Refusal("bad_frame", f'the body must be a JSON object {{"op", "args"}}: {exc}')
        except Refusal:
            attempt.failed()
            raise
        return frame

    async def _read(self, call: Call, build: Callable[[RoomCore, rules.Viewer], Any]) -> None:
        """Answer with `build(core, viewer)`, read and encoded in the room's
        queue (the room as stored; its CPU the room's share, share.py); its
        size is charged like a sync reply's."""

        def read(core: RoomCore) -> bytes | None:
            viewer = core.viewer(call.user)
            return None if viewer is None else json_body(build(core, viewer))

        body = await self._query(call.host, read)
        if body is None:  # removed from the room meanwhile
            raise unauthenticated()
        self._charge(call.bucket, len(body))
        call.conn.respond(200, body, headers=call.cors)

    async def _state(self, call: Call) -> None:
        await self._read(
            call,
            lambda core, viewer: {
                "room": call.host.room_id,
                "user": call.user,
                "role": viewer.role,
                "v": core.committed().v,
                "state": core.view(viewer),
            },
        )

    async def _history(self, call: Call) -> None:
        params = urllib.parse.parse_qs(call.request.query)
        most = self.deps.limits.recent_patches_in_memory
        raw = (params.get("limit") or [str(HISTORY_DEFAULT_LIMIT)])[0]
        limit = whole_number(raw, "limit", 1, most)

        def start(core: RoomCore) -> tuple[rules.Viewer, bytes, int] | None:
            viewer = core.viewer(call.user)
            if viewer is None:
                return None
            v = core.committed().v
            head = json_body({"room": call.host.room_id, "v": v})[:-2] + b',"history":['
            return viewer, head, v

        found = await self._query(call.host, start)
        if found is None:  # removed from the room meanwhile
            raise unauthenticated()
        viewer, head, at = found
        # The versions it lists, picked in steps of the room's queue (each
        # looks at ~64 KiB of kept patches): between them, the room's share
        # of the CPU lets the other rooms' work in.
        picks: list[bytes] = []
        v: int | None = at
        while v is not None and len(picks) < limit:
            step = functools.partial(_history_scan_in, v, limit - len(picks), viewer)
            found_step, v = await self._query(call.host, step)
            picks += found_step
        picks.reverse()

        async def slices() -> AsyncIterator[bytes]:
            # Each slice made in the room's queue: its CPU is the room's
            # share, and the next one waits for the reader (http1.send).
            yield head
            done = 0
            while done < len(picks):
                piece, done = await self._query(
                    call.host, functools.partial(_history_slice_in, picks, done, viewer)
                )
                self._charge(call.bucket, len(piece))
                yield piece
            yield b"]}\n"

        await call.conn.send(200, slices(), headers=call.cors)

    async def _events(self, call: Call) -> None:
        request, conn, host, user, bucket = (
            call.request,
            call.conn,
            call.host,
            call.user,
            call.bucket,
        )
        raw = request.header("last-event-id")
        if raw is None:
            given = urllib.parse.parse_qs(request.query).get("since")
            raw = given[0] if given else None
        since = None if raw is None else whole_number(raw, "Last-Event-ID (or since)", 0, MAX_INT)
        deps = self.deps
        stream = EventStream(
            conn,
            user,
            deps.limits.outbox_max_bytes,
            deps.metrics.frames,
            self._too_slow,
            deps.outbox_budget,
            host.room_id,
        )
        fut: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()

        def charge(cost: float) -> None:
            if bucket is not None:
                bucket.charge(deps.clock.monotonic(), cost)

        try:
            host.submit(Join(stream, user, since, fut, charge, call.digest))
            await fut
        except RoomClosed:
            raise self._gone(host)
        except JoinRefused as refused:
            status = 429 if refused.code == "rate_limited" else STATUS.get(refused.code, 500)
            raise Refusal(refused.code, refused.message, status)
        self.streams.add(stream)
        deps.metrics.sse_streams.set(len(self.streams))
        room = host.room_id
        try:
            # Until the reader hangs up (its end of file: a clean close frees
            # the slot at once, not at the next keepalive that fails).
            while not stream.closing and not conn.hung_up.done():
                with contextlib.suppress(TimeoutError):
                    async with deps.clock.timeout(deps.limits.ping_interval):
                        await asyncio.shield(conn.hung_up)
                stream.keepalive(deps.limits.ping_interval)
        finally:
            self.streams.discard(stream)
            if stream.budget is not None:
                stream.budget.forget(stream)
            deps.metrics.sse_streams.set(len(self.streams))
            deps.bus.unsubscribe(room, stream)
            deps.registry.remove(room, stream)
            host.left(user)
            if not stream.closing:
                stream.close_after(protocol.CLOSE_SHUTDOWN, "stream ended")

    def _too_slow(self, stream: EventStream, reason: str) -> None:
        self.deps.metrics.slow_closes.inc()
        log.info("%s's event stream cut (1013): %s", stream.user, reason)
