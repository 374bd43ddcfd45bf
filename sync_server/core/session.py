"""This module owns a session's state machine, the hello included, and what
each frame means.

The states and every legal move between them are one table, `TRANSITIONS`
(as h11's `_state.py` holds the HTTP connection's): a session starts
AWAITING_HELLO, authenticates (AUTHENTICATING), joins its room (JOINING) or
opens at once (an admin session), is OPEN, then CLOSING and CLOSED. Each
event the asyncio side feeds in (`start`, `hello_received`, `admin_token`,
`room_token`, `located`, `join_retry`, `joined`, `receive`...) moves the
session along the table and returns one action, as data: read the hello,
authenticate it, locate the room, join it, redirect, refuse, reply, run a
command or a `sync`, close. An event the table does not allow in the
current state raises `SessionMisuse` at one place. Rate limiting and frame
checks happen here, with the time passed in, so a unit test checks every
branch with plain maps and no socket; the asyncio `Session`
(hosting/sessions.py) awaits what an action asks and feeds the answer back,
deciding nothing.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from sync_server.core.auth import plausible_token
from sync_server.core.limits import MAX_TOKEN_LENGTH
from sync_server.core.ratelimit import TokenBucket
from sync_server.wire import frames, protocol
from sync_server.wire.frames import Hello

NO_EXPECT = protocol.NO_EXPECT


class SessionState(enum.Enum):
    AWAITING_HELLO = "awaiting_hello"  # accepted; the first frame must be a hello
    AUTHENTICATING = "authenticating"  # a well-formed hello: whose token is it?
    JOINING = "joining"  # a room user's token: the room is located and joined
    OPEN = "open"
    CLOSING = "closing"  # a close was decided: frames are read and dropped
    CLOSED = "closed"


S = SessionState

# Every legal move: (state, event) -> next state. Anything else is a bug of
# the asyncio side, caught at one place (`SessionCore._move`).
TRANSITIONS: dict[tuple[SessionState, str], SessionState] = {
    (S.AWAITING_HELLO, "start"): S.AWAITING_HELLO,
    (S.AWAITING_HELLO, "penalised"): S.CLOSING,
    (S.AWAITING_HELLO, "hello"): S.AUTHENTICATING,
    (S.AWAITING_HELLO, "bad_hello"): S.CLOSING,
    (S.AWAITING_HELLO, "hello_timeout"): S.CLOSING,
    (S.AUTHENTICATING, "admin"): S.OPEN,
    (S.AUTHENTICATING, "room_user"): S.JOINING,
    (S.AUTHENTICATING, "refused"): S.CLOSING,
    (S.JOINING, "join"): S.JOINING,
    (S.JOINING, "retry"): S.JOINING,
    (S.JOINING, "joined"): S.OPEN,
    (S.JOINING, "redirect"): S.CLOSING,
    (S.JOINING, "refused"): S.CLOSING,
    (S.OPEN, "frame"): S.OPEN,
    (S.OPEN, "second_hello"): S.CLOSING,
    (S.OPEN, "closing"): S.CLOSING,
    (S.CLOSING, "frame"): S.CLOSING,
    (S.CLOSING, "closing"): S.CLOSING,
}
# Any state may end: the connection went away, or the session is cleaned up.
TRANSITIONS.update({(state, "closed"): S.CLOSED for state in SessionState})

# A room may be unloaded, deleted or moved between being located and the
# join reaching its queue: look again this many times, then give up.
JOIN_ATTEMPTS = 3


class SessionMisuse(RuntimeError):
    """The asyncio side fed an event the table does not allow now."""


class HelloRefused(Exception):
    """The first frame cannot open a session: an error frame, then `close`."""

    def __init__(self, code: str, message: str, close: int) -> None:
        super().__init__(message)
        self.code, self.message, self.close = code, message, close

    def frame(self) -> dict[str, Any]:
        return protocol.error(self.code, self.message)


def unauthenticated() -> HelloRefused:
    """One answer for every bad token or room, so that it tells a guesser
    nothing about which part was wrong."""
    return HelloRefused(
        protocol.UNAUTHENTICATED, "bad token or room", protocol.CLOSE_UNAUTHENTICATED
    )


def read_hello(frame: dict[str, Any]) -> Hello:
    """Check the first frame; raises HelloRefused (4400 or 4401). The shape
    is the wire's (`frames.parse_hello`); the token's is checked here."""
    try:
        hello = frames.parse_hello(frame)
    except frames.BadFrame as bad:
        raise HelloRefused("bad_frame", bad.message, protocol.CLOSE_MISUSE) from None
    token, room = hello.token, hello.room
    if isinstance(token, str) and len(token) > MAX_TOKEN_LENGTH:
        raise HelloRefused(
            protocol.UNAUTHENTICATED,
            f"a token is at most {MAX_TOKEN_LENGTH} characters; this is not one",
            protocol.CLOSE_UNAUTHENTICATED,
        )
    if not plausible_token(token) or not (room is None or isinstance(room, str)):
        raise unauthenticated()
    return hello


# --- actions -----------------------------------------------------------------


@attrs.frozen
class Reply:
    """Send `frame` to this client only; the session stays open."""

    frame: dict[str, Any]


@attrs.frozen
class ReplyAndClose:
    """Send `frame`, then close with `code` once it is written."""

    frame: dict[str, Any]
    code: int
    reason: str


@attrs.frozen
class RunCommand:
    """A room command for the room's queue (or, in an admin session, for
    the admin service)."""

    cmd_id: str
    op: Any
    args: Any
    expect: Any = NO_EXPECT


@attrs.frozen
class RunSync:
    since: int
    request_id: str | None = None


@attrs.frozen
class Ignore:
    """Nothing to do (a frame read while the session is closing)."""


@attrs.frozen
class ReadHello:
    """Wait for the first frame, at most `timeout` seconds."""

    timeout: float


@attrs.frozen
class Authenticate:
    """Find whose token this is: the server's admin token, a room user's, or
    nobody's; answer with `admin_token` or `room_token`."""

    hello: Hello


@attrs.frozen
class Locate:
    """Find the host of `room` (here, another node, or none); answer with
    `located`."""

    room: str
    user: str


@attrs.frozen
class JoinRoom:
    """Submit the join to the room's queue; answer with `joined`, or
    `join_retry` when the room closed meanwhile, or `refused`."""

    room: str
    user: str
    since: int | None


@attrs.frozen
class OpenAdmin:
    """An admin session: take a slot, send the admin welcome."""


@attrs.frozen
class Opened:
    """The session is open: carry frames to `receive` from now on."""

    role: str


@attrs.frozen
class Refuse:
    """The hello is refused: send the error frame, close with `close`.
    `failed` counts it against the peer's address (a guessed token);
    `wait` seconds pass first (a peer already over its failed hellos)."""

    refusal: HelloRefused
    failed: bool = True
    wait: float = 0.0


@attrs.frozen
class RedirectTo:
    """Cluster mode: send a `redirect` to `url`, close with 4302."""

    url: str


@attrs.frozen
class CloseNow:
    """Close with `code` and `reason`, sending nothing first."""

    code: int
    reason: str


HelloAction = (
    ReadHello
    | Authenticate
    | Locate
    | JoinRoom
    | OpenAdmin
    | Opened
    | Refuse
    | RedirectTo
    | CloseNow
)
Action = Reply | ReplyAndClose | RunCommand | RunSync | Ignore


class SessionCore:
    """A session's state machine: feed it events, get actions. Built
    `awaiting_hello` for a new connection; `SessionCore(role, bucket)` is
    an already open session (what the tests of frame handling start from)."""

    def __init__(self, role: str, bucket: TokenBucket | None, *, has_room: bool = True) -> None:
        self.role = role
        self.bucket = bucket
        self.has_room = has_room
        self.state = SessionState.OPEN
        self.rate_limited = 0  # frames refused by the bucket (for metrics)
        self.hello: Hello | None = None
        self.room: str | None = None
        self.user: str | None = None
        self._attempts = 0

    @classmethod
    def awaiting_hello(cls) -> SessionCore:
        core = cls("", None)
        core.state = SessionState.AWAITING_HELLO
        return core

    def _move(self, event: str) -> None:
        try:
            self.state = TRANSITIONS[(self.state, event)]
        except KeyError:
            raise SessionMisuse(f"{event!r} in state {self.state.value}") from None

    def _refuse(self, refused: HelloRefused, *, failed: bool = True, wait: float = 0.0) -> Refuse:
        self._move("refused" if self.state is not S.AWAITING_HELLO else "bad_hello")
        return Refuse(refused, failed, wait)

    # --- the hello --------------------------------------------------------

    def start(self, allowed: bool, hello_timeout: float, penalty: float) -> HelloAction:
        """A new connection. `allowed` False: its address is over its failed
        hellos (guessing tokens): a short wait, then the door, before
        reading anything."""
        self._move("start")
        if not allowed:
            self._move("penalised")
            refusal = HelloRefused(
                "rate_limited", "too many failed hellos; wait and retry", protocol.CLOSE_POLICY
            )
            return Refuse(refusal, failed=False, wait=penalty)
        return ReadHello(hello_timeout)

    def hello_timed_out(self) -> HelloAction:
        self._move("hello_timeout")
        return CloseNow(protocol.CLOSE_HELLO_TIMEOUT, "no hello in time")

    def hello_received(self, frame: dict[str, Any] | Exception) -> HelloAction:
        """The first frame, decoded (or the decoder's error)."""
        if isinstance(frame, Exception):
            return self._refuse(
                HelloRefused(
                    "bad_frame", f"the first frame must be a hello: {frame}", protocol.CLOSE_MISUSE
                )
            )
        try:
            hello = read_hello(frame)
        except HelloRefused as refused:
            return self._refuse(refused)
        self._move("hello")
        self.hello = hello
        return Authenticate(hello)

    def admin_token(self, slot_free: bool) -> HelloAction:
        """The hello carries the server's admin token."""
        assert self.hello is not None
        if self.hello.room is not None:
            return self._refuse(unauthenticated())  # it opens admin sessions only
        if not slot_free:
            return self._refuse(
                HelloRefused("rate_limited", "too many admin sessions", protocol.CLOSE_TOO_MANY)
            )
        self._move("admin")
        self.role, self.has_room = "admin", False
        return OpenAdmin()

    def room_token(self, found: tuple[str, str] | None) -> HelloAction:
        """Whose token it is: (room, user), or None for nobody's."""
        assert self.hello is not None
        if found is None or found[0] != self.hello.room:
            return self._refuse(unauthenticated())
        self._move("room_user")
        self.room, self.user = found
        return Locate(*found)

    def located(self, where: str, url: str = "") -> HelloAction:
        """`where`: "here" (this process hosts it), "elsewhere" (another node,
        at `url`) or "nowhere" (no such room any more)."""
        assert self.room is not None and self.user is not None and self.hello is not None
        if where == "elsewhere":
            if not url:  # a node that names no address cannot be reached
                return self._refuse(
                    HelloRefused(
                        "internal",
                        "the room's node has no address; retry",
                        protocol.CLOSE_INTERNAL,
                    ),
                    failed=False,
                )
            self._move("redirect")
            return RedirectTo(url)
        if where != "here":
            return self._refuse(unauthenticated())
        self._move("join")
        return JoinRoom(self.room, self.user, self.hello.since)

    def join_retry(self) -> HelloAction:
        """The room closed between locating it and the join: look again."""
        assert self.room is not None and self.user is not None
        self._move("retry")
        self._attempts += 1
        if self._attempts >= JOIN_ATTEMPTS:
            return self._refuse(unauthenticated())
        return Locate(self.room, self.user)

    def joined(self, role: str, bucket: TokenBucket | None) -> HelloAction:
        self._move("joined")
        self.role, self.bucket, self.has_room = role, bucket, True
        return Opened(role)

    def refused(self, refusal: HelloRefused, *, failed: bool = True) -> HelloAction:
        """The host refused the hello (a join refused, the storage down...)."""
        return self._refuse(refusal, failed=failed)

    def opened(self, bucket: TokenBucket | None) -> None:
        """An admin session's bucket, once its slot is taken."""
        self.bucket = bucket

    # --- an open session --------------------------------------------------

    def closing(self) -> None:
        if self.state is SessionState.OPEN:
            self._move("closing")

    def closed(self) -> None:
        self._move("closed")

    def _allowed(self, now: float) -> bool:
        if self.bucket is None or self.bucket.allow(now):
            return True
        self.rate_limited += 1
        return False

    def receive(
        self, frame: dict[str, Any] | Exception, now: float, shutting_down: bool = False
    ) -> Action:
        """One frame after the hello. `frame` is the decoded map, or the
        decoder's exception (its message becomes the bad_frame's)."""
        if self.state is not SessionState.OPEN:
            return Ignore()
        if isinstance(frame, Exception):
            if not self._allowed(now):
                return Reply(protocol.error("rate_limited", "too many frames; slow down"))
            return Reply(protocol.error("bad_frame", str(frame)))
        t = frames.frame_type(frame)
        eid = frames.echo_id(frame)
        if t == "hello":
            self._move("second_hello")
            return ReplyAndClose(
                protocol.error("bad_frame", "a second hello"),
                protocol.CLOSE_MISUSE,
                "a second hello",
            )
        if t not in ("cmd", "sync"):
            if not self._allowed(now):
                return Reply(protocol.error("rate_limited", "too many frames; slow down", eid))
            return Reply(protocol.error("bad_frame", f"unknown frame type {t!r}", eid))
        if not self._allowed(now):
            return Reply(protocol.error("rate_limited", "too many commands; slow down", eid))
        if shutting_down:
            return Reply(
                protocol.error("internal", "the server is shutting down; retry later", eid)
            )
        try:
            parsed = frames.parse_client(frame, has_room=self.has_room)
        except frames.BadFrame as bad:
            return Reply(protocol.error("bad_frame", bad.message, bad.echo_id))
        if isinstance(parsed, frames.Sync):
            return RunSync(parsed.since, parsed.id)
        assert isinstance(parsed, frames.Cmd)
        return RunCommand(parsed.id, parsed.op, parsed.args, parsed.expect)
