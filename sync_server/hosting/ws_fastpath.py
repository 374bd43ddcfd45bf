"""The one module that touches websockets' internals: writing a frame that
was serialized once for a whole room straight to a connection's transport.

The bus hands every sink of one (codec, view class) the very same bytes
object, group by group (bus.fan_out); `framed` keeps the WebSocket frame
of the last bytes it framed, so a group's frame is built once, here, in
the one transport that needs it, and the bus knows nothing of WebSocket
frames.

Why: a server's frames are unmasked and compression is off, so a patch's
WebSocket frame, header included, is the same bytes for every client of one
subprotocol. Serializing it once (`server_frame`) and handing the same bytes
to each transport saves websockets building the frame again per client (the
profile's hot spot at 8 clients per room; docs/performance.md).

Sound because, in websockets' asyncio implementation, sending a data frame
changes nothing in the Sans-I/O protocol's state but its `writes` buffer,
which `Connection.send_data` hands to `transport.write` at once: writing the
same bytes to the transport is what `send` does. The write is refused (the
caller then takes the public path, `websockets.asyncio.server.broadcast`)
unless the connection is OPEN, has no fragmented message under way, and
nothing waits in the protocol's `writes` (pings, pongs and the close
handshake go through it, so frames stay whole and in order).

It is optional (`Config.fast_fanout`); `raw_writer` returns None whenever
the connection does not look exactly like what this was written against
(a client connection, a negotiated extension, another websockets), and
tests/server/test_fanout.py fails loudly if a websockets upgrade changes
what it relies on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from websockets.frames import Frame, Opcode
from websockets.protocol import Side, State

# What `raw_writer` reads on a connection and on its protocol object.
CONNECTION_ATTRIBUTES = ("protocol", "transport", "send_in_progress")
PROTOCOL_ATTRIBUTES = ("side", "state", "extensions", "writes", "expect_continuation_frame")


def server_frame(data: bytes, text: bool) -> bytes:
    """One complete WebSocket frame as a server sends it (FIN, unmasked, no
    extensions), serialized by websockets itself so the bytes are exactly
    those `send` would produce."""
    return Frame(Opcode.TEXT if text else Opcode.BINARY, data).serialize(mask=False)


class _LastFrame:
    """The frame of the last payload framed (held, so its identity cannot be
    reused by another object while it is compared)."""

    __slots__ = ("data", "frame", "text")

    def __init__(self) -> None:
        self.data: bytes | None = None
        self.text = False
        self.frame = b""


_last = _LastFrame()


def framed(data: bytes, text: bool) -> bytes:
    """`server_frame(data, text)`, built once for consecutive calls with
    the very same bytes object (every client of one view class in turn)."""
    last = _last
    if last.data is not data or last.text is not text:
        last.frame = server_frame(data, text)
        last.data, last.text = data, text
    return last.frame


def raw_writer(ws: Any, text: bool = False) -> Callable[[bytes], bool] | None:
    """A writer of a message's bytes, as one shared `server_frame` (a text
    frame if `text`), to `ws`'s transport, or None when `ws` is not a
    websockets asyncio server connection without extensions. The writer
    returns False (nothing written) whenever writing raw bytes would not be
    exactly what `send` does at that moment."""
    protocol = getattr(ws, "protocol", None)
    transport = getattr(ws, "transport", None)
    if (
        protocol is None
        or transport is None
        or not all(hasattr(ws, a) for a in CONNECTION_ATTRIBUTES)
        or not all(hasattr(protocol, a) for a in PROTOCOL_ATTRIBUTES)
        or protocol.side is not Side.SERVER
        or protocol.extensions != []
        or not isinstance(protocol.writes, list)
    ):
        return None

    def write(data: bytes) -> bool:
        if (
            protocol.state is not State.OPEN
            or protocol.writes
            or protocol.expect_continuation_frame
            or ws.send_in_progress is not None
        ):
            return False
        transport.write(framed(data, text))
        return True

    return write
