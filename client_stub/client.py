"""asyncio client of the vtt-sync wire protocol (docs/protocol.md).

    async with Client("ws://127.0.0.1:8765/", token, "r1") as c:
        ack = await c.command("damage", char="c1", amount=3)
        print(c.version, c.state["characters"]["c1"]["pv"])
        async for patch in c.patches():
            ...

The client keeps a mirror of the room (the welcome state plus every patch in
order; a gap in versions asks the server for what it missed with `sync`),
reconnects with capped exponential backoff and jitter, resumes with `since`,
and re-sends the commands still waiting for an answer under their original ids
(the server answers a repeated id with the first ack, so nothing applies twice).
Close codes 4400/4401/4403/4404 are final: the client stops and raises a
`ConnectionFailed` subclass; every other disconnection is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import random
import secrets
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from client_stub.errors import (
    FINAL_CLOSE_CODES,
    ClientClosed,
    CommandError,
    CommandTimeout,
    ConnectionFailed,
    FrameTooBig,
    Unauthenticated,
)
from client_stub.mirror import GAP, Mirror
from sync_server.wire import frames, protocol, reach
from sync_server.wire.codec import CODECS

log = logging.getLogger("vtt_sync.client")

SUBPROTOCOLS = {"msgpack": protocol.MSGPACK, "json": protocol.JSON}
MAX_FRAME = protocol.MAX_FRAME_BYTES  # the server closes a connection sending more (1009)
_END = object()


class Redirected(Exception):
    """The hello reached a node that does not serve the room (4302)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class _Pending:
    __slots__ = ("frame", "future", "sent")

    def __init__(self, frame: dict[str, Any], future: asyncio.Future[dict[str, Any]]):
        self.frame = frame
        self.future = future
        self.sent = 0


def tls_context(ca_file: str | None = None) -> ssl.SSLContext | None:
    """The TLS context for a wss:// server whose certificate is signed by the
    authority in `ca_file` (a private CA, or the self-signed certificate
    itself); None (the system's authorities) without one."""
    if not ca_file:
        return None
    return ssl.create_default_context(cafile=ca_file)


class Client:
    """One session with a vtt-sync server: a room (or the admin session when
    `room` is None). Use as an async context manager or call `connect()` and
    `close()`."""

    def __init__(
        self,
        url: str | Sequence[str],
        token: str,
        room: str | None = None,
        proto: str = "msgpack",
        *,
        reconnect: bool = True,
        retry_first: bool = True,
        backoff_initial: float = 0.2,
        backoff_max: float = 10.0,
        backoff_factor: float = 2.0,
        hello_timeout: float = 10.0,
        open_timeout: float = 10.0,
        id_prefix: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if proto not in SUBPROTOCOLS:
            raise ValueError(f"proto must be one of {sorted(SUBPROTOCOLS)}")
        # Several URLs: the nodes of a cluster (any of them redirects to the
        # room's node). A connection that fails or ends moves on to the next,
        # so a dead node is skipped; one URL (a load balancer's) does as well.
        self.urls = [url] if isinstance(url, str) else list(url)
        if not self.urls:
            raise ValueError("no URL given")
        self._url_index = 0
        self._token = token
        self.room = room
        self.proto = proto
        self.reconnect = reconnect
        # False: a failure before the first welcome is final (a one-shot CLI
        # command fails at once on a wrong address instead of retrying).
        self.retry_first = retry_first
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.backoff_factor = backoff_factor
        self.hello_timeout = hello_timeout
        self.open_timeout = open_timeout
        # For wss:// URLs: None trusts the system's certificate authorities;
        # `tls_context(ca_file)` trusts a private CA or a self-signed server.
        self.ssl_context = ssl_context
        # ids are unique per user across processes and restarts: a random prefix
        self._id_prefix = id_prefix or secrets.token_hex(4)
        self._id_counter = 0

        self.mirror = Mirror()
        self.user: str | None = None
        self.role: str | None = None
        self.connections = 0  # welcomes received (1 + successful reconnects)
        self.last_error: BaseException | None = None

        self._ws: ClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._settled = asyncio.Event()  # first welcome, or a final failure
        self._closed = False
        self._fatal: ConnectionFailed | None = None
        self._pending: dict[str, _Pending] = {}
        self._parked: list[tuple[int, asyncio.Future[dict[str, Any]], dict[str, Any]]] = []
        self._sync_sent_at: int | None = None
        self._auth_message: str | None = None
        self._listeners: dict[str, list[Callable[..., Any]]] = {
            "patch": [],
            "event": [],
            "state": [],
            "status": [],
            "error": [],
        }
        self._queues: dict[str, set[asyncio.Queue[Any]]] = {"patch": set(), "event": set()}
        self._change_waiters: list[asyncio.Future[None]] = []
        # history() requests by their sync id: (the version asked up to, the answer)
        self._history_waiters: dict[str, tuple[int, asyncio.Future[list[dict[str, Any]]]]] = {}
        self._bg: set[asyncio.Task[Any]] = set()

    # --- public state -------------------------------------------------------

    @property
    def state(self) -> dict[str, Any] | None:
        """The mirrored room state (docs/protocol.md, "hello -> welcome"). Read only."""
        return self.mirror.state

    @property
    def version(self) -> int | None:
        return self.mirror.version

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:  # never shows the token
        return (
            f"Client(url={self.url!r}, room={self.room!r}, proto={self.proto!r}, "
            f"user={self.user!r}, v={self.version})"
        )

    # --- lifecycle ----------------------------------------------------------

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self, timeout: float | None = None) -> None:
        """Start the session and wait for the first welcome. Raises
        `ConnectionFailed` (a subclass for final close codes), or after
        `timeout` seconds without a welcome."""
        if self._closed:
            raise ClientClosed("client closed")
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="vtt-sync-client")
        try:
            await asyncio.wait_for(self._settled.wait(), timeout)
        except TimeoutError:
            last = self.last_error
            await self.close()
            detail = f": {_describe(last, self.url)}" if last else ""
            raise ConnectionFailed(
                f"no welcome from {self.url} within {timeout:g} s{detail}"
            ) from last
        if self._fatal is not None:
            await self.close()
            raise self._fatal

    def start(self) -> None:
        """Start the session in the background without waiting (a live view
        that must survive the server being down at start)."""
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._run(), name="vtt-sync-client")

    async def wait_closed(self) -> None:
        """Wait until the session ends for good; raises its final error."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)
        if self._fatal is not None:
            raise self._fatal

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                await ws.close()
        self._finish(ClientClosed("client closed"))

    # --- commands -----------------------------------------------------------

    async def command(
        self,
        op: str,
        args: dict[str, Any] | None = None,
        /,
        *,
        expect: int | None = None,
        cmd_id: str | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Send a command and return its ack (`{"t": "ack", "id", "v", "result"}`)
        once the mirror holds its version. Raises a `CommandError` subclass
        (`.code`, `.message`) when the server refuses it. Arguments come as a
        dict, as keywords, or both. While disconnected the command waits and is
        sent (again, same id) after the next welcome."""
        if self._fatal is not None:
            raise self._fatal
        if self._closed:
            raise ClientClosed("client closed")
        payload = {**(args or {}), **kwargs}
        cid = cmd_id or self._next_id()
        frame = protocol.cmd(cid, op, payload, expect)
        size = len(self._encode(frame))
        if size > MAX_FRAME:
            raise FrameTooBig(f"frame of {size} bytes exceeds {MAX_FRAME}", id=cid)
        if cid in self._pending:
            raise ValueError(f"command id {cid!r} is already waiting")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        pending = self._pending[cid] = _Pending(frame, future)
        if self.connected:
            await self._send_pending(pending)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            raise CommandTimeout(f"no answer to {op} ({cid}) within {timeout:g} s")
        finally:
            if self._pending.get(cid) is pending:
                del self._pending[cid]

    def _next_id(self) -> str:
        self._id_counter += 1
        return f"{self._id_prefix}-{self._id_counter}"

    async def history(self, count: int = 30, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The last `count` patches up to the current version (their events
        make a log on arrival), asked with `sync`; [] when the server no
        longer has them. The mirror is not changed."""
        if not self.connected or self.version is None:
            return []
        since = max(0, self.version - count)
        if since >= self.version:
            return []
        future: asyncio.Future[list[dict[str, Any]]] = asyncio.get_running_loop().create_future()
        request_id = f"h-{self._next_id()}"
        self._history_waiters[request_id] = (self.version, future)
        await self._send(protocol.sync(since, request_id))
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return []
        finally:
            self._history_waiters.pop(request_id, None)

    @property
    def pending_commands(self) -> list[str]:
        return list(self._pending)

    # --- listening ----------------------------------------------------------

    def on_patch(self, fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        """Call `fn(patch)` for every patch applied to the mirror, in order."""
        self._listeners["patch"].append(fn)
        return fn

    def on_event(self, fn: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        """Call `fn(event)` for every event of every applied patch, in order.
        Each event dict gets the patch's version as `v` (a copy; patches are
        left untouched)."""
        self._listeners["event"].append(fn)
        return fn

    def on_state(self, fn: Callable[[dict[str, Any], int], Any]) -> Callable[..., Any]:
        """Call `fn(state, version)` after every change of the mirror
        (welcome, patch, snapshot)."""
        self._listeners["state"].append(fn)
        return fn

    def on_status(self, fn: Callable[[str, str], Any]) -> Callable[..., Any]:
        """Call `fn(status, detail)`: status in connecting, connected,
        disconnected, failed, closed."""
        self._listeners["status"].append(fn)
        return fn

    def on_error(self, fn: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
        """Call `fn(frame)` for `error` frames that answer no waiting command."""
        self._listeners["error"].append(fn)
        return fn

    def remove_listener(self, fn: Callable[..., Any]) -> None:
        for fns in self._listeners.values():
            while fn in fns:
                fns.remove(fn)

    def patches(self) -> AsyncIterator[dict[str, Any]]:
        """Every patch applied from now on; ends when the client closes
        (raises the final error if the session failed)."""
        return self._iterate("patch")

    def events(self) -> AsyncIterator[dict[str, Any]]:
        """Every event (with its patch version as `v`) from now on."""
        return self._iterate("event")

    async def _iterate(self, kind: str) -> AsyncIterator[dict[str, Any]]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._queues[kind].add(queue)
        try:
            while True:
                if self._closed and queue.empty():
                    break
                item = await queue.get()
                if item is _END:
                    break
                yield item
        finally:
            self._queues[kind].discard(queue)
        if self._fatal is not None:
            raise self._fatal

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float | None = None
    ) -> dict[str, Any]:
        """Wait until `predicate(state)` holds; returns the state."""

        async def waiting() -> dict[str, Any]:
            while True:
                if self.state is not None and predicate(self.state):
                    return self.state
                if self._fatal is not None:
                    raise self._fatal
                if self._closed:
                    raise ClientClosed("client closed")
                waiter = asyncio.get_running_loop().create_future()
                self._change_waiters.append(waiter)
                await waiter

        return await asyncio.wait_for(waiting(), timeout)

    async def wait_version(self, v: int, timeout: float | None = None) -> dict[str, Any]:
        return await self.wait_for(lambda _s: (self.version or 0) >= v, timeout)

    # --- the session loop ---------------------------------------------------

    @property
    def url(self) -> str:
        """The address this client connects to now (one of `urls`)."""
        return self.urls[self._url_index]

    async def _run(self) -> None:
        attempt = 0
        target, hops = self.url, 0
        while not self._closed:
            self._status("connecting", target)
            welcomed_before = self.connections
            try:
                await self._session(target)
                detail = "connection closed"
            except Redirected as moved:
                # Cluster mode: another node serves the room. Go there at once
                # (same hello, `since` included), a bounded number of hops;
                # past them (ownership moving under our feet), report it and
                # start again from the given address after the usual backoff.
                hops += 1
                if hops <= protocol.MAX_REDIRECTS:
                    log.info("redirected to %s", moved.url)
                    target = moved.url
                    continue
                detail = f"redirected {hops} times in a row (last to {moved.url})"
                self.last_error = moved
            except ConnectionFailed as exc:
                self._fail(exc)
                return
            except asyncio.CancelledError:
                raise
            except (OSError, InvalidHandshake, TimeoutError, ConnectionClosed) as exc:
                self.last_error = exc
                detail = _describe(exc, target)
            except Exception as exc:  # a bug or a broken frame: log, then retry
                self.last_error = exc
                detail = _describe(exc, target)
                log.warning("session error: %s", detail, exc_info=True)
            self._connected.clear()
            # Every new attempt starts from an address given (the next one,
            # if several): the room may have moved again (1012), or the node
            # be gone.
            self._url_index = (self._url_index + 1) % len(self.urls)
            target, hops = self.url, 0
            if self._closed:
                return
            self._status("disconnected", detail)
            if not self.reconnect:
                self._fail(_failed(f"disconnected: {detail}", self.last_error))
                return
            if not self.retry_first and self.connections == 0:
                self._fail(_failed(f"cannot connect to {self.url}: {detail}", self.last_error))
                return
            if self.connections > welcomed_before:
                attempt = 0
            delay = min(self.backoff_max, self.backoff_initial * self.backoff_factor**attempt)
            delay *= random.uniform(0.5, 1.0)
            attempt += 1
            log.info("reconnecting in %.2f s (%s)", delay, detail)
            await asyncio.sleep(delay)

    async def _session(self, url: str) -> None:
        # No `ssl` argument at all unless a context is given: websockets then
        # uses the system's authorities for wss:// (ssl=None would mean none).
        tls: dict[str, Any] = {} if self.ssl_context is None else {"ssl": self.ssl_context}
        ws = await connect(
            url,
            subprotocols=[SUBPROTOCOLS[self.proto]],  # type: ignore[list-item]
            open_timeout=self.open_timeout,
            max_size=64 * 1024 * 1024,
            user_agent_header="vtt-sync-client",
            **tls,
        )
        self._ws = ws
        try:
            since = self.mirror.version if self.mirror.ready else None
            handshake = frames.Handshake(self._token, self.room, since)
            await ws.send(self._encode(handshake.hello()))
            async with asyncio.timeout(self.hello_timeout):
                while True:
                    frame = self._decode(await ws.recv())
                    outcome = handshake.receive(frame)
                    if isinstance(outcome, frames.Welcome):
                        break
                    if isinstance(outcome, frames.Redirect):
                        raise Redirected(outcome.url)
                    self._handle(frame)  # a refusal: its words, then the close
            self._auth_message = None
            self._on_welcome(outcome)
            for pending in list(self._pending.values()):
                await self._send_pending(pending)
            async for raw in ws:
                self._handle(self._decode(raw))
            self._check_close(ws.close_code, ws.close_reason)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd is not None else None
            self._check_close(code, exc.rcvd.reason if exc.rcvd is not None else "")
            raise
        finally:
            self._connected.clear()
            if self._ws is ws:
                self._ws = None
            with contextlib.suppress(Exception):
                await ws.close()

    def _check_close(self, code: int | None, reason: str | None) -> None:
        if code in FINAL_CLOSE_CODES:
            cls = FINAL_CLOSE_CODES[code]
            message = self._auth_message or reason or cls.explanation
            raise cls(message, close_code=code)

    def _on_welcome(self, welcome: frames.Welcome) -> None:
        self.user = welcome.user
        self.role = welcome.role
        self._sync_sent_at = None
        if welcome.state is not None and welcome.v is not None:
            applied = self.mirror.reset(welcome.state, welcome.v)
            self._changed(applied, reset=True)
        elif welcome.patches is not None:
            applied = []
            for patch in welcome.patches:
                applied += self.mirror.feed(patch)[1]
            self._changed(applied)
            behind = self.mirror.version is not None and self.mirror.version < (welcome.v or 0)
            if behind:
                self._request_sync()
        self.connections += 1
        self._connected.set()
        self._settled.set()
        self._status("connected", f"{self.user} ({self.role})")

    def _handle(self, frame: dict[str, Any]) -> None:
        try:
            parsed = frames.parse_server(frame)
        except frames.BadFrame as bad:
            log.warning("ignored a frame that is not of the protocol: %s", bad.message)
            return
        if isinstance(parsed, frames.Patch):
            status, applied = self.mirror.feed(parsed.raw)
            if status == GAP:
                self._request_sync()
            self._changed(applied)
        elif isinstance(parsed, frames.Patches):
            waiter = self._history_waiters.pop(str(parsed.id), None)
            if waiter is not None:  # the answer to history(), told by its id
                up_to, future = waiter
                if not future.done():
                    future.set_result([p for p in parsed.patches if p.get("v", 0) <= up_to])
            else:
                self._sync_sent_at = None
            applied = []
            for patch in parsed.patches:
                applied += self.mirror.feed(patch)[1]
            self._changed(applied)
            if self.mirror.has_gap:
                self._request_sync()
        elif isinstance(parsed, frames.Snapshot):
            waiter = self._history_waiters.pop(str(parsed.id), None)
            if waiter is not None:  # history() asked further back than the server keeps
                if not waiter[1].done():
                    waiter[1].set_result([])
            else:
                self._sync_sent_at = None
            applied = self.mirror.reset(parsed.state, parsed.v)
            self._changed(applied, reset=True)
        elif isinstance(parsed, frames.Ack):
            pending = self._pending.pop(parsed.id, None)
            if pending is None or pending.future.done():
                return
            v = parsed.v
            if v is not None and (self.version is None or self.version < v):
                # the patch comes before the ack: if it is missing, ask for it
                self._parked.append((v, pending.future, frame))
                if not self.mirror.has_gap or self._sync_sent_at is None:
                    self._request_sync()
            else:
                pending.future.set_result(frame)
        elif isinstance(parsed, frames.Error):
            pending = self._pending.pop(parsed.id, None) if parsed.id else None
            if pending is not None and not pending.future.done():
                pending.future.set_exception(CommandError.from_frame(frame))
                return
            if parsed.code == "unauthenticated":
                self._auth_message = parsed.message or "unauthenticated"
            log.info("server error: %s %s", parsed.code, parsed.message)
            self._emit("error", frame)
        else:
            log.debug("ignored frame %s", type(parsed).__name__)

    def _request_sync(self) -> None:
        if self.mirror.version is None or self._sync_sent_at == self.mirror.version:
            return
        self._sync_sent_at = self.mirror.version
        self._spawn(self._send(protocol.sync(self.mirror.version)))

    def _changed(self, applied: list[dict[str, Any]], *, reset: bool = False) -> None:
        for patch in applied:
            self._emit("patch", patch)
            for queue in self._queues["patch"]:
                queue.put_nowait(patch)
            for event in patch.get("events") or []:
                event = {**event, "v": patch.get("v")}
                self._emit("event", event)
                for queue in self._queues["event"]:
                    queue.put_nowait(event)
        if not applied and not reset:
            return
        if self._parked and self.version is not None:
            keep = []
            for v, future, ack in self._parked:
                if v <= self.version:
                    if not future.done():
                        future.set_result(ack)
                else:
                    keep.append((v, future, ack))
            self._parked = keep
        if self.state is not None:
            self._emit("state", self.state, self.version)
        self._wake()

    def _wake(self) -> None:
        waiters, self._change_waiters = self._change_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # --- plumbing -----------------------------------------------------------

    def _encode(self, frame: dict[str, Any]) -> bytes | str:
        return CODECS[SUBPROTOCOLS[self.proto]].encode(frame)

    def _decode(self, raw: bytes | str) -> dict[str, Any]:
        frame = json.loads(raw) if isinstance(raw, str) else msgpack.unpackb(raw, raw=False)
        if not isinstance(frame, dict):
            raise ValueError("frame is not a map")
        return frame

    async def _send(self, frame: dict[str, Any]) -> None:
        ws = self._ws
        if ws is None:
            return
        with contextlib.suppress(ConnectionClosed):
            await ws.send(self._encode(frame))

    async def _send_pending(self, pending: _Pending) -> None:
        pending.sent += 1
        await self._send(pending.frame)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    def _emit(self, kind: str, *args: Any) -> None:
        for fn in list(self._listeners[kind]):
            try:
                result = fn(*args)
                if inspect.isawaitable(result):
                    self._spawn(result)
            except Exception:
                log.exception("%s listener failed", kind)

    def _status(self, status: str, detail: str = "") -> None:
        self._emit("status", status, detail)

    def _fail(self, exc: ConnectionFailed) -> None:
        self._fatal = exc
        self.last_error = exc
        self._settled.set()
        self._status("failed", str(exc))
        self._finish(exc)

    def _finish(self, exc: BaseException) -> None:
        """Fail every waiting command and end the iterators."""
        self._closed = True
        self._connected.clear()
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(exc)
                pending.future.exception()  # mark retrieved: the caller may be gone
        self._pending.clear()
        for _v, future, _ack in self._parked:
            if not future.done():
                future.set_exception(exc)
                future.exception()
        self._parked.clear()
        for queues in self._queues.values():
            for queue in queues:
                queue.put_nowait(_END)
        self._wake()
        if isinstance(exc, ClientClosed):
            self._status("closed", "")


def _failed(message: str, cause: BaseException | None) -> ConnectionFailed:
    """A final connection failure that keeps its cause (refused, unknown host...)."""
    exc = ConnectionFailed(message)
    exc.__cause__ = cause
    return exc


def _describe(exc: BaseException | None, url: str) -> str:
    """Why a connection to `url` failed: what to do when it is known (refused,
    unknown host, an untrusted certificate: sync_server.wire.reach, the
    words of both CLIs), else the error itself."""
    if exc is None:
        return ""
    if isinstance(exc, ConnectionClosed):
        code = exc.rcvd.code if exc.rcvd is not None else protocol.WS_CLOSE_ABNORMAL
        return f"connection closed ({code})"
    known = reach.reason(exc, url)
    if known is not None:
        return known
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if str(exc) else text


__all__ = ["MAX_FRAME", "SUBPROTOCOLS", "Client", "Unauthenticated"]
