"""The frames the server sends, and PROTOCOL.md's codes, in one place.

Builders return plain maps; the codec encodes them. Keeping every frame's
shape here makes docs/protocol.md easy to check against the code.
"""

from __future__ import annotations

from typing import Any

# Error codes, in the order PROTOCOL.md says they are checked: when a
# command has several problems, the earliest code in this tuple wins.
ERROR_ORDER = (
    "rate_limited",
    "bad_frame",
    "unknown_op",
    "invalid_args",
    "not_found",
    "forbidden",
    "conflict",
    "rule",
    "internal",
)
_RANK = {code: i for i, code in enumerate(ERROR_ORDER)}

# Close codes (PROTOCOL.md, Transport), plus the project's 4429.
CLOSE_SHUTDOWN = 1001
CLOSE_TOO_BIG = 1009
CLOSE_TOO_SLOW = 1013
CLOSE_MISUSE = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_REVOKED = 4403
CLOSE_ROOM_DELETED = 4404
CLOSE_HELLO_TIMEOUT = 4408

PROTO_VERSION = 1


def earliest(*errors: tuple[str, str] | None) -> tuple[str, str] | None:
    """The (code, message) that PROTOCOL.md's order checks first."""
    found = [e for e in errors if e is not None]
    if not found:
        return None
    return min(found, key=lambda e: _RANK.get(e[0], len(_RANK)))


def error(code: str, message: str, cmd_id: Any = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "error", "code": code, "message": message}
    if cmd_id is not None:
        frame["id"] = cmd_id
    return frame


def ack(
    cmd_id: str, result: dict[str, Any], v: int | None = None, dup: bool = False
) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "ack", "id": cmd_id}
    if v is not None:
        frame["v"] = v
    frame["result"] = result
    if dup:
        frame["dup"] = True
    return frame


def patch(v: int, ops: list[Any], events: list[Any], by: str, cmd_id: str | None) -> dict[str, Any]:
    return {"t": "patch", "v": v, "ops": ops, "events": events, "by": by, "id": cmd_id}
