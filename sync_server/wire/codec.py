"""Frames on the wire: MessagePack or JSON, chosen by the WebSocket subprotocol.

Sans-I/O: `decode` turns one WebSocket message (bytes or str) into a frame
map or raises `BadFrame`; `encode` does the reverse. Both subprotocols carry
the same maps, so the decoder also checks that a frame stays inside what
both can represent (string keys, 64-bit integers, finite floats, bounded
nesting): a JSON client cannot smuggle in a value that a MessagePack client
could not receive or that the log could not store.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import attrs
import msgpack

from sync_server.wire.bounds import MAX_INT, MAX_NESTING, MIN_INT
from sync_server.wire.protocol import JSON, MSGPACK, SUBPROTOCOLS


class BadFrame(Exception):
    """A message that is not a well-formed frame: the protocol's `bad_frame`
    (docs/protocol.md, "Refusals")."""


def _reject_constant(name: str) -> Any:
    # json.loads accepts NaN, Infinity and -Infinity by default; they are not
    # JSON, and MessagePack peers would receive values they cannot expect.
    raise BadFrame(f"{name} is not valid JSON")


def _check(value: Any, depth: int = 0) -> None:
    """Walk a decoded value: string keys only, integers in range, finite
    floats, bounded depth. Iterative enough for 64 KiB frames."""
    if depth > MAX_NESTING:
        raise BadFrame(f"frame nested deeper than {MAX_NESTING} levels")
    if isinstance(value, dict):
        for k, v in value.items():
            if type(k) is not str:
                raise BadFrame("map keys must be strings")
            _check(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check(v, depth + 1)
    elif isinstance(value, bool) or value is None or isinstance(value, str):
        return
    elif isinstance(value, int):
        if not MIN_INT <= value <= MAX_INT:
            raise BadFrame("integer out of the 64-bit range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise BadFrame("NaN and infinite numbers are not allowed")
    else:
        # bytes (MessagePack bin), ExtType and anything else: not in the protocol.
        raise BadFrame(f"values of type {type(value).__name__} are not allowed")


_local = threading.local()


def packb(value: Any) -> bytes:
    """`msgpack.packb(value, use_bin_type=True)`, with one Packer kept per
    thread: `packb` builds a Packer and its buffer on each call, which is
    2.5x the cost of packing our small frames and log records. A Packer is
    not shared between threads (the storage thread packs log records while
    the event loop packs frames); it resets itself after each call, also
    when packing raises."""
    packer = getattr(_local, "packer", None)
    if packer is None:
        packer = _local.packer = msgpack.Packer(use_bin_type=True)
    packed: bytes = packer.pack(value)
    return packed


def _no_ext(code: int, data: bytes) -> Any:
    raise BadFrame("MessagePack extension types are not allowed")


@attrs.frozen
class Codec:
    """One subprotocol's encoding. `binary` says which WebSocket frame type
    it uses (a text frame on a binary connection is a bad frame)."""

    name: str
    binary: bool

    def decode(self, message: bytes | str) -> dict[str, Any]:
        """Decode one WebSocket message into a frame map, or raise BadFrame."""
        if self.binary:
            if not isinstance(message, bytes | bytearray | memoryview):
                raise BadFrame("text frame on a MessagePack connection; send binary frames")
            try:
                value = msgpack.unpackb(
                    message, raw=False, strict_map_key=False, ext_hook=_no_ext, use_list=True
                )
            except BadFrame:
                raise
            except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
                raise BadFrame(f"not MessagePack: {type(exc).__name__}")
        else:
            if not isinstance(message, str):
                raise BadFrame("binary frame on a JSON connection; send text frames")
            try:
                value = json.loads(message, parse_constant=_reject_constant)
            except BadFrame:
                raise
            except (ValueError, RecursionError) as exc:
                raise BadFrame(f"not JSON: {type(exc).__name__}")
        _check(value)
        if not isinstance(value, dict):
            raise BadFrame("a frame must be a map")
        return value

    def encode(self, frame: dict[str, Any]) -> bytes | str:
        """Encode a frame: bytes for MessagePack (binary frame), str for JSON
        (text frame), so `websocket.send` picks the right frame type."""
        if self.binary:
            return packb(frame)
        return json.dumps(frame, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


CODECS: dict[str, Codec] = {
    MSGPACK: Codec(MSGPACK, binary=True),
    JSON: Codec(JSON, binary=False),
}


def codec_for(subprotocol: str | None) -> Codec:
    """The codec of a negotiated subprotocol; MessagePack when none was."""
    return CODECS.get(subprotocol or MSGPACK, CODECS[MSGPACK])


def select_subprotocol(_connection: object, offered: Any) -> str | None:
    """websockets' `select_subprotocol` hook: our preferred one among those
    offered; when the client offers none, accept the connection without a
    subprotocol (it then speaks MessagePack). An offer with none of ours is
    also accepted as MessagePack rather than failing the handshake, so a
    client sending an unknown future version still gets a readable reply."""
    for name in SUBPROTOCOLS:
        if name in offered:
            return name
    return None


__all__ = [
    "CODECS",
    "JSON",
    "MSGPACK",
    "SUBPROTOCOLS",
    "BadFrame",
    "Codec",
    "codec_for",
    "packb",
    "select_subprotocol",
]
