"""This module owns a session's state machine and what each frame means.

A session moves AWAITING_HELLO -> OPEN -> CLOSING -> CLOSED (`SessionState`).
`read_hello` turns the first frame into a `Hello` or a refusal;
`SessionCore.receive` turns every later frame into one action, as data:
reply with an error, run a command (room or admin), run a `sync`, or reply
and close. Rate limiting and frame checks happen here, with the time passed
in, so a unit test checks every branch with plain maps and no socket; the
asyncio `Session` (sessions.py) only carries the actions out.
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
    AWAITING_HELLO = "awaiting_hello"
    OPEN = "open"
    CLOSING = "closing"  # a close was decided: frames are read and dropped
    CLOSED = "closed"


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


Action = Reply | ReplyAndClose | RunCommand | RunSync | Ignore


class SessionCore:
    """An open session's frame handling: `receive` one decoded frame (or
    the decode error), get the action to carry out."""

    def __init__(self, role: str, bucket: TokenBucket | None, *, has_room: bool = True) -> None:
        self.role = role
        self.bucket = bucket
        self.has_room = has_room
        self.state = SessionState.OPEN
        self.rate_limited = 0  # frames refused by the bucket (for metrics)

    def closing(self) -> None:
        if self.state is SessionState.OPEN:
            self.state = SessionState.CLOSING

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
            self.state = SessionState.CLOSING
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
