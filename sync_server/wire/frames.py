"""Frames as small typed values, parsed once (as h11's events are).

`protocol.py` builds the frames either side sends (plain maps, which the
codec encodes once for every receiver); this module reads them. Each frame
kind is a frozen attrs class, and one function per direction turns a decoded
map into one of them or raises `BadFrame` with the sentence the other side
is told:

- `parse_client(frame)`: what a server reads (hello, cmd, sync), with the
  protocol's bounds checked here and nowhere else;
- `parse_server(frame)`: what a client reads (welcome, ack, error, patch,
  patches, snapshot, redirect).

`Handshake` is the client's side of the hello, sans-I/O as websockets'
protocol objects are: `hello()` gives the frame to send, `receive(frame)`
says what a frame received before the welcome means. Every Python client
(the client package, the testing client, the admin CLI, the benchmarks)
runs its hello through it, so the handshake is written once.
"""

from __future__ import annotations

from typing import Any

import attrs

from sync_server.wire import protocol
from sync_server.wire.bounds import MAX_CMD_ID_LENGTH


class BadFrame(ValueError):
    """A frame that is not of the protocol. `message` is what the sender is
    told (a `bad_frame` error); `echo_id` the id to answer under, when the
    frame carried a usable one."""

    def __init__(self, message: str, echo_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.echo_id = echo_id


# --- what a client sends -------------------------------------------------------


@attrs.frozen
class Hello:
    """The first frame. `room` None asks for an admin session; `token` is
    checked for shape only here (its owner is the server's business)."""

    token: Any
    room: Any = None
    since: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return protocol.hello(self.token, self.room, self.since)


@attrs.frozen
class Cmd:
    id: str
    op: Any
    args: Any = attrs.field(factory=dict)
    expect: Any = protocol.NO_EXPECT


@attrs.frozen
class Sync:
    since: int
    id: str | None = None


ClientFrame = Hello | Cmd | Sync


def echo_id(frame: dict[str, Any]) -> str | None:
    """The id a reply to `frame` carries: a string within the bound, else none."""
    raw = frame.get("id")
    return raw if isinstance(raw, str) and len(raw) <= MAX_CMD_ID_LENGTH else None


def frame_type(frame: dict[str, Any]) -> Any:
    return frame.get("t")


def parse_hello(frame: dict[str, Any]) -> Hello:
    """A hello's shape: type, protocol version, `since`. The token and the
    room keep their values, whatever they are: whether they open a session
    is the server's answer (one answer for every bad token or room)."""
    if frame.get("t") != "hello":
        raise BadFrame("the first frame must be a hello")
    proto = frame.get("proto")
    if type(proto) is not int or proto != protocol.PROTO_VERSION:
        raise BadFrame(f"unknown proto {proto!r}; this server speaks {protocol.PROTO_VERSION}")
    since = frame.get("since")
    if not (since is None or (type(since) is int and since >= 0)):
        raise BadFrame("since must be a version number")
    return Hello(frame.get("token"), frame.get("room"), since)


def parse_client(frame: dict[str, Any], *, has_room: bool = True) -> ClientFrame:
    """A frame a server reads, whole; raises BadFrame with the sentence the
    protocol answers. `has_room` False for admin sessions (nothing to sync)."""
    t = frame.get("t")
    if t == "hello":
        return parse_hello(frame)
    eid = echo_id(frame)
    if t == "sync":
        if not has_room:
            raise BadFrame("admin sessions have no room to sync", eid)
        since = frame.get("since")
        if type(since) is not int or since < 0:
            raise BadFrame("sync needs since: a version number", eid)
        return Sync(since, eid)
    if t != "cmd":
        raise BadFrame(f"unknown frame type {t!r}", eid)
    if eid is None or not eid:
        raise BadFrame(f"a cmd needs an id: a string of 1-{MAX_CMD_ID_LENGTH} characters")
    if "op" not in frame:
        raise BadFrame("a cmd needs an op", eid)
    return Cmd(eid, frame["op"], frame.get("args", {}), frame.get("expect", protocol.NO_EXPECT))


# --- what a server sends ---------------------------------------------------------


@attrs.frozen
class Welcome:
    """A room's welcome (the whole `state`, or the `patches` after the
    hello's `since`), or an admin session's (`room` None, no state)."""

    user: str
    role: str
    room: str | None = None
    v: int | None = None
    state: dict[str, Any] | None = None
    patches: list[dict[str, Any]] | None = None
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen
class Ack:
    id: str
    result: dict[str, Any]
    v: int | None = None
    dup: bool = False
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen
class Error:
    code: str
    message: str
    id: str | None = None
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen
class Patch:
    """One version. `raw` is the frame itself: the mirror applies its ops and
    applications read its events as they came."""

    v: int
    ops: list[Any]
    events: list[Any]
    by: str | None = None
    id: str | None = None
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen
class Patches:
    """A `sync` reply (or a resume's): the patches after `since`, in order."""

    patches: list[dict[str, Any]]
    id: str | None = None


@attrs.frozen
class Snapshot:
    """A `sync` reply when the gap is older than the server keeps."""

    v: int
    state: dict[str, Any]
    id: str | None = None


@attrs.frozen
class Redirect:
    """Cluster mode: the room is served by the node at `url` (then 4302)."""

    url: str


ServerFrame = Welcome | Ack | Error | Patch | Patches | Snapshot | Redirect


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise BadFrame(what)


def _opt_str(frame: dict[str, Any], key: str) -> str | None:
    value = frame.get(key)
    _need(value is None or isinstance(value, str), f"{key} must be a string")
    return value


def _version(frame: dict[str, Any], key: str = "v", *, required: bool = True) -> int | None:
    value = frame.get(key)
    if value is None and not required:
        return None
    if type(value) is not int or value < 0:
        raise BadFrame(f"{key} must be a version number")
    return value


def parse_server(frame: Any) -> ServerFrame:
    """A frame a client reads, whole; raises BadFrame for anything else (a
    client then drops the connection rather than mirror a malformed room)."""
    _need(isinstance(frame, dict), "a frame must be a map")
    t = frame.get("t")
    if t == "patch":
        ops, events = frame.get("ops"), frame.get("events", [])
        _need(isinstance(ops, list) and isinstance(events, list), "a patch needs ops and events")
        v = _version(frame)
        assert v is not None
        return Patch(v, ops, events, _opt_str(frame, "by"), _opt_str(frame, "id"), frame)
    if t == "ack":
        cmd_id, result = frame.get("id"), frame.get("result", {})
        _need(isinstance(cmd_id, str), "an ack needs the command's id")
        _need(isinstance(result, dict), "an ack's result must be a map")
        dup = frame.get("dup", False)
        return Ack(cmd_id, result, _version(frame, required=False), dup is True, frame)
    if t == "error":
        code, message = frame.get("code"), frame.get("message", "")
        _need(isinstance(code, str) and isinstance(message, str), "an error needs a code")
        return Error(code, message, _opt_str(frame, "id"), frame)
    if t == "welcome":
        user, role = frame.get("user"), frame.get("role")
        _need(isinstance(user, str) and isinstance(role, str), "a welcome names user and role")
        state, patches = frame.get("state"), frame.get("patches")
        _need(state is None or isinstance(state, dict), "a welcome's state must be a map")
        _need(patches is None or isinstance(patches, list), "a welcome's patches are a list")
        return Welcome(
            user,
            role,
            _opt_str(frame, "room"),
            _version(frame, required=False),
            state,
            patches,
            frame,
        )
    if t == "patches":
        items = frame.get("patches")
        _need(isinstance(items, list), "patches must be a list")
        return Patches(items, _opt_str(frame, "id"))
    if t == "snapshot":
        state = frame.get("state")
        _need(isinstance(state, dict), "a snapshot needs a state")
        v = _version(frame)
        assert v is not None
        return Snapshot(v, state, _opt_str(frame, "id"))
    if t == "redirect":
        url = frame.get("url")
        _need(isinstance(url, str) and url != "", "a redirect needs a url")
        return Redirect(url)
    raise BadFrame(f"unknown frame type {t!r}")


# --- the client's side of the hello ------------------------------------------------


@attrs.frozen
class Refused:
    """The server refused the hello: its error frame (the close follows)."""

    error: Error


@attrs.define
class Handshake:
    """One hello, sans-I/O: send `hello()`, then feed each frame received
    until `receive` returns a `Welcome`, a `Redirect` or a `Refused`; it
    returns None for a frame that may come first (a patch racing the
    welcome is not one: the server sends nothing before it)."""

    token: str
    room: str | None = None
    since: int | None = None

    def hello(self) -> dict[str, Any]:
        return protocol.hello(self.token, self.room, self.since)

    def receive(self, frame: Any) -> Welcome | Redirect | Refused | None:
        parsed = parse_server(frame)
        if isinstance(parsed, Welcome | Redirect):
            return parsed
        if isinstance(parsed, Error):
            return Refused(parsed)
        return None


__all__ = [
    "MAX_CMD_ID_LENGTH",
    "Ack",
    "BadFrame",
    "ClientFrame",
    "Cmd",
    "Error",
    "Handshake",
    "Hello",
    "Patch",
    "Patches",
    "Redirect",
    "Refused",
    "ServerFrame",
    "Snapshot",
    "Sync",
    "Welcome",
    "echo_id",
    "parse_client",
    "parse_hello",
    "parse_server",
]
