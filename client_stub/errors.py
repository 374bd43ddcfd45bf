"""Typed errors of the vtt-sync client (docs/protocol.md, "Refusals" and "Closing")."""

from __future__ import annotations

from typing import Any

from sync_server.wire import protocol


class VttSyncError(Exception):
    """Base of every error raised by the client."""


# --- command errors (an `error` frame answering a `cmd`) ---------------------


class CommandError(VttSyncError):
    """The server refused a command. `.code` is its error code
    (docs/protocol.md, "Refusals"), `.message` its text."""

    code: str = "error"

    def __init__(self, message: str = "", *, code: str | None = None, id: str | None = None):
        if code is not None:
            self.code = code
        self.message = message
        self.id = id
        super().__init__(f"{self.code}: {message}" if message else self.code)

    def to_dict(self) -> dict[str, Any]:
        return {"t": "error", "id": self.id, "code": self.code, "message": self.message}

    @classmethod
    def from_frame(cls, frame: dict[str, Any]) -> CommandError:
        code = str(frame.get("code") or "error")
        sub = COMMAND_ERRORS.get(code, CommandError)
        return sub(str(frame.get("message") or ""), code=code, id=frame.get("id"))


class RateLimited(CommandError):
    code = "rate_limited"


class BadFrame(CommandError):
    code = "bad_frame"


class UnknownOp(CommandError):
    code = "unknown_op"


class InvalidArgs(CommandError):
    code = "invalid_args"


class NotFound(CommandError):
    code = "not_found"


class Forbidden(CommandError):
    code = "forbidden"


class Conflict(CommandError):
    code = "conflict"


class RuleError(CommandError):
    code = "rule"


class InternalError(CommandError):
    code = "internal"


COMMAND_ERRORS: dict[str, type[CommandError]] = {
    c.code: c
    for c in (
        RateLimited,
        BadFrame,
        UnknownOp,
        InvalidArgs,
        NotFound,
        Forbidden,
        Conflict,
        RuleError,
        InternalError,
    )
}


class FrameTooBig(CommandError):
    """Refused locally: the encoded frame exceeds the server's 64 KiB limit."""

    code = "frame_too_big"


class CommandTimeout(VttSyncError, TimeoutError):
    """No ack nor error within the command's timeout (the command may still apply)."""


# --- connection errors --------------------------------------------------------


class ConnectionFailed(VttSyncError):
    """The connection ended for good. `.close_code` is the WebSocket close code."""

    close_code: int | None = None
    explanation = "connection failed"

    def __init__(self, message: str = "", *, close_code: int | None = None):
        if close_code is not None:
            self.close_code = close_code
        self.message = message or self.explanation
        code = self.close_code
        super().__init__(self.message if code is None else f"{self.message} (close {code})")


class Unauthenticated(ConnectionFailed):
    close_code = protocol.CLOSE_UNAUTHENTICATED
    explanation = protocol.FINAL_CLOSE_CODES[protocol.CLOSE_UNAUTHENTICATED]


class AccessRevoked(ConnectionFailed):
    close_code = protocol.CLOSE_REVOKED
    explanation = protocol.FINAL_CLOSE_CODES[protocol.CLOSE_REVOKED]


class RoomDeleted(ConnectionFailed):
    close_code = protocol.CLOSE_ROOM_DELETED
    explanation = protocol.FINAL_CLOSE_CODES[protocol.CLOSE_ROOM_DELETED]


class ProtocolMisuse(ConnectionFailed):
    close_code = protocol.CLOSE_MISUSE
    explanation = protocol.FINAL_CLOSE_CODES[protocol.CLOSE_MISUSE]


class ClientClosed(VttSyncError):
    """The client was closed while a command was still waiting for its answer."""


FINAL_CLOSE_CODES: dict[int, type[ConnectionFailed]] = {
    cls.close_code: cls for cls in (ProtocolMisuse, Unauthenticated, AccessRevoked, RoomDeleted)
}
