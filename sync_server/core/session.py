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
from sync_server.core.limits import MAX_CMD_ID_LENGTH, MAX_TOKEN_LENGTH
from sync_server.core.ratelimit import TokenBucket
from sync_server.wire import protocol

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


@attrs.frozen
class Hello:
    """A well-formed hello. `room` None asks for an admin session."""

    token: str
    room: str | None
    since: int | None


def read_hello(frame: dict[str, Any]) -> Hello:
    """Check the first frame's shape; raises HelloRefused (4400 or 4401)."""
    if frame.get("t") != "hello":
        raise HelloRefused("bad_frame", "the first frame must be a hello", protocol.CLOSE_MISUSE)
    proto = frame.get("proto")
    if type(proto) is not int or proto != protocol.PROTO_VERSION:
        raise HelloRefused(
            "bad_frame",
            f"unknown proto {proto!r}; this server speaks {protocol.PROTO_VERSION}",
            protocol.CLOSE_MISUSE,
        )
    since = frame.get("since")
    if not (since is None or (type(since) is int and since >= 0)):
        raise HelloRefused("bad_frame", "since must be a version number", protocol.CLOSE_MISUSE)
    token, room = frame.get("token"), frame.get("room")
    if isinstance(token, str) and len(token) > MAX_TOKEN_LENGTH:
        raise HelloRefused(
            protocol.UNAUTHENTICATED,
            f"a token is at most {MAX_TOKEN_LENGTH} characters; this is not one",
            protocol.CLOSE_UNAUTHENTICATED,
        )
    if not plausible_token(token) or not (room is None or isinstance(room, str)):
        raise unauthenticated()
    return Hello(token, room, since)


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
        t = frame.get("t")
        raw_id = frame.get("id")
        echo_id = raw_id if isinstance(raw_id, str) and len(raw_id) <= MAX_CMD_ID_LENGTH else None
        if t == "hello":
            self.state = SessionState.CLOSING
            return ReplyAndClose(
                protocol.error("bad_frame", "a second hello"),
                protocol.CLOSE_MISUSE,
                "a second hello",
            )
        if t not in ("cmd", "sync"):
            if not self._allowed(now):
                return Reply(protocol.error("rate_limited", "too many frames; slow down", echo_id))
            return Reply(protocol.error("bad_frame", f"unknown frame type {t!r}", echo_id))
        if not self._allowed(now):
            return Reply(protocol.error("rate_limited", "too many commands; slow down", echo_id))
        if shutting_down:
            return Reply(
                protocol.error("internal", "the server is shutting down; retry later", echo_id)
            )
        if t == "sync":
            return self._sync(frame, echo_id)
        if echo_id is None or not raw_id:
            return Reply(
                protocol.error(
                    "bad_frame", f"a cmd needs an id: a string of 1-{MAX_CMD_ID_LENGTH} characters"
                )
            )
        if "op" not in frame:
            return Reply(protocol.error("bad_frame", "a cmd needs an op", echo_id))
        return RunCommand(
            echo_id, frame["op"], frame.get("args", {}), frame.get("expect", NO_EXPECT)
        )

    def _sync(self, frame: dict[str, Any], echo_id: str | None) -> Action:
        since = frame.get("since")
        if not self.has_room:
            return Reply(
                protocol.error("bad_frame", "admin sessions have no room to sync", echo_id)
            )
        if type(since) is not int or since < 0:
            return Reply(protocol.error("bad_frame", "sync needs since: a version number", echo_id))
        return RunSync(since, echo_id)
