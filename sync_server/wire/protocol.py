"""The wire protocol, defined once: subprotocol names, the protocol version,
error codes (in the order they are checked), close codes, and a builder for
every frame either side sends.

Everything that speaks the protocol in Python imports it from here: the
server, the Python client (`client_stub`), the benchmarks and the testing
helpers. This module imports nothing of the server, so a client pulls in no
server code by using it. The JavaScript client keeps its own copy of these
names; both test suites check theirs against `protocol-vectors.json`
(written next to this module by `vectors()`), so neither can drift.

Builders return plain maps; `codec.py` encodes them. Optional fields are
left out when absent rather than sent as null, as docs/protocol.md shows them.
"""

from __future__ import annotations

from typing import Any

# --- transport --------------------------------------------------------------

PROTO_VERSION = 1

MSGPACK = "vtt-sync.msgpack.v1"
JSON = "vtt-sync.json.v1"

# In order of preference: the server picks MessagePack when a client offers
# both, and when it offers none.
SUBPROTOCOLS = (MSGPACK, JSON)

# The largest frame either side accepts: a command is a few hundred bytes;
# the server closes a connection sending more with 1009.
MAX_FRAME_BYTES = 64 * 1024

# --- error codes --------------------------------------------------------------

# In the order the server checks them: when a command has several problems,
# the earliest code in this tuple is the one reported.
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

# `error` frames answering a hello (not a command) use this code too.
UNAUTHENTICATED = "unauthenticated"


def earliest(*errors: tuple[str, str] | None) -> tuple[str, str] | None:
    """The (code, message) that the protocol's order checks first."""
    found = [e for e in errors if e is not None]
    if not found:
        return None
    return min(found, key=lambda e: _RANK.get(e[0], len(_RANK)))


# --- close codes ----------------------------------------------------------------

# RFC 6455's own codes, which the transports and clients name too: no
# decision of this protocol (not CLOSE_*: the API documents list those). A
# normal close; a connection lost without a close frame (only ever
# reported, never sent); a text frame not UTF-8.
WS_CLOSE_NORMAL = 1000
WS_CLOSE_ABNORMAL = 1006
WS_CLOSE_INVALID_DATA = 1007
CLOSE_SHUTDOWN = 1001  # the server is shutting down: reconnect later
CLOSE_POLICY = 1008  # policy violation: too many failed hellos from this address
CLOSE_TOO_BIG = 1009  # a frame over MAX_FRAME_BYTES
CLOSE_INTERNAL = 1011  # the server failed (e.g. cannot reach its storage): retry
CLOSE_SERVICE_RESTART = 1012  # this node stopped serving the room: reconnect, resume
CLOSE_TOO_SLOW = 1013  # too slow to read its patches: resume with `since`
CLOSE_REDIRECT = 4302  # the room is served by the node named in the `redirect` frame
CLOSE_MISUSE = 4400  # first frame not a hello, unknown proto, a second hello
CLOSE_UNAUTHENTICATED = 4401  # bad token or room
CLOSE_REVOKED = 4403  # the user was removed or its token rotated
CLOSE_ROOM_DELETED = 4404  # the room was deleted
CLOSE_HELLO_TIMEOUT = 4408  # no hello in time
# A project addition: a connection limit is reached. 1013 would make the
# client resume at once, in a loop; 4429 says "too many", like HTTP 429.
CLOSE_TOO_MANY = 4429

# Close codes after which a client must not reconnect by itself: retrying
# with the same token and room cannot succeed.
FINAL_CLOSE_CODES = {
    CLOSE_MISUSE: "the server says this client misused the protocol",
    CLOSE_UNAUTHENTICATED: "bad token or room",
    CLOSE_REVOKED: "this user was removed or its token rotated",
    CLOSE_ROOM_DELETED: "the room was deleted",
}

# A client follows at most this many redirects in a row, then reports an error.
MAX_REDIRECTS = 3


# --- frames a client sends ---------------------------------------------------------

# A `cmd` without `expect` (None is a value a client may send, and refused).
NO_EXPECT: Any = object()


def hello(token: str, room: str | None = None, since: int | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "hello", "proto": PROTO_VERSION, "token": token}
    if room is not None:
        frame["room"] = room
    if since is not None:
        frame["since"] = since
    return frame


def cmd(
    cmd_id: str, op: str, args: dict[str, Any] | None = None, expect: int | None = None
) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "cmd", "id": cmd_id, "op": op, "args": args or {}}
    if expect is not None:
        frame["expect"] = expect
    return frame


def sync(since: int, request_id: str | None = None) -> dict[str, Any]:
    """A request for what follows `since`; with `request_id` (an addition
    of v1.1), the reply echoes it so a client tells its own request's answer
    from a gap-fill."""
    frame: dict[str, Any] = {"t": "sync", "since": since}
    if request_id is not None:
        frame["id"] = request_id
    return frame


# --- frames the server sends --------------------------------------------------------


def welcome(
    room: str,
    user: str,
    role: str,
    v: int,
    *,
    state: dict[str, Any] | None = None,
    patches: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A room welcome: the whole `state`, or the `patches` after the hello's
    `since` (exactly one of the two)."""
    frame: dict[str, Any] = {"t": "welcome", "room": room, "user": user, "role": role, "v": v}
    if patches is not None:
        frame["patches"] = patches
    else:
        frame["state"] = state
    return frame


def admin_welcome(user: str = "admin") -> dict[str, Any]:
    return {"t": "welcome", "user": user, "role": "admin"}


def error(code: str, message: str, cmd_id: Any = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "error", "code": code, "message": message}
    if cmd_id is not None:
        frame["id"] = cmd_id
    return frame


def ack(
    cmd_id: str, result: dict[str, Any], v: int | None = None, dup: bool = False
) -> dict[str, Any]:
    """A command's ack; admin commands touch no room and carry no `v`."""
    frame: dict[str, Any] = {"t": "ack", "id": cmd_id}
    if v is not None:
        frame["v"] = v
    frame["result"] = result
    if dup:
        frame["dup"] = True
    return frame


def patch(v: int, ops: list[Any], events: list[Any], by: str, cmd_id: str | None) -> dict[str, Any]:
    return {"t": "patch", "v": v, "ops": ops, "events": events, "by": by, "id": cmd_id}


def patches(items: list[dict[str, Any]], request_id: str | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "patches", "patches": items}
    if request_id is not None:
        frame["id"] = request_id
    return frame


def snapshot(v: int, state: dict[str, Any], request_id: str | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "snapshot", "v": v, "state": state}
    if request_id is not None:
        frame["id"] = request_id
    return frame


def redirect(url: str) -> dict[str, Any]:
    """Cluster mode: the room is served by the node at `url` (then 4302)."""
    return {"t": "redirect", "url": url}


# --- test vectors ---------------------------------------------------------------------


def vectors() -> dict[str, Any]:
    """The names and shapes every client implementation must agree on,
    as JSON-able data (written to `protocol-vectors.json`, read by the
    Python and JavaScript test suites)."""
    return {
        "proto": PROTO_VERSION,
        "subprotocols": {"msgpack": MSGPACK, "json": JSON},
        "max_frame_bytes": MAX_FRAME_BYTES,
        "error_order": list(ERROR_ORDER),
        "close_codes": {
            "shutdown": CLOSE_SHUTDOWN,
            "policy": CLOSE_POLICY,
            "too_big": CLOSE_TOO_BIG,
            "internal": CLOSE_INTERNAL,
            "service_restart": CLOSE_SERVICE_RESTART,
            "too_slow": CLOSE_TOO_SLOW,
            "redirect": CLOSE_REDIRECT,
            "misuse": CLOSE_MISUSE,
            "unauthenticated": CLOSE_UNAUTHENTICATED,
            "revoked": CLOSE_REVOKED,
            "room_deleted": CLOSE_ROOM_DELETED,
            "hello_timeout": CLOSE_HELLO_TIMEOUT,
            "too_many": CLOSE_TOO_MANY,
        },
        "final_close_codes": sorted(FINAL_CLOSE_CODES),
        "max_redirects": MAX_REDIRECTS,
        "frames": {
            "hello": hello("TOKEN", "r1", 41),
            "hello_admin": hello("TOKEN"),
            "cmd": cmd("c-17", "damage", {"char": "c1", "amount": 3}, expect=57),
            "cmd_no_expect": cmd("c-18", "combat_end"),
            "sync": sync(41),
            "sync_with_id": sync(41, "q1"),
        },
    }


if __name__ == "__main__":  # python -m sync_server.wire.protocol > tests/vectors/protocol.json
    import json

    print(json.dumps(vectors(), indent=2, sort_keys=True))
