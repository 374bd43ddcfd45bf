"""The room bus: a room's frames to every client subscribed to it.

`RoomBus` is the seam for delivering a room's frames wherever its clients
are (one process today; a pub/sub between processes could implement it).
Rooms publish a frame and never see a socket; subscribers are `Sink`s, a
two-member interface (its codec, `deliver`), so nothing connection-shaped
crosses the seam.

`Message` carries one frame to all of a room's subscribers, encoded at most
once per subprotocol present, whatever the number of clients: every client
of one subprotocol gets the very same bytes object.
"""

from __future__ import annotations

from typing import Any, Protocol

from sync_server.codec import Codec
from sync_server.ws_fastpath import server_frame


class Message:
    """One frame for a room, encoded lazily, once per codec (and once more
    as a complete WebSocket frame, for the transports that take it)."""

    __slots__ = ("_frames", "_wire", "frame")

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame
        self._wire: dict[str, bytes] = {}
        self._frames: dict[str, bytes] = {}

    def data(self, codec: Codec) -> bytes:
        """The encoded message (JSON as UTF-8 bytes), shared by every caller."""
        data = self._wire.get(codec.name)
        if data is None:
            encoded = codec.encode(self.frame)
            data = self._wire[codec.name] = (
                encoded.encode() if isinstance(encoded, str) else encoded
            )
        return data

    def ws_frame(self, codec: Codec) -> bytes:
        """The same message as a complete server WebSocket frame."""
        frame = self._frames.get(codec.name)
        if frame is None:
            frame = self._frames[codec.name] = server_frame(self.data(codec), not codec.binary)
        return frame


class Sink(Protocol):
    """A subscriber: it says which codec it reads, and takes messages."""

    codec: Codec

    def deliver(self, message: Message) -> None: ...


class RoomBus(Protocol):
    def subscribe(self, room: str, sink: Sink) -> None: ...

    def unsubscribe(self, room: str, sink: Sink) -> None: ...

    def publish(self, room: str, frame: dict[str, Any]) -> None:
        """Deliver one frame to every subscriber of the room, in publish order."""
        ...

    def subscribers(self, room: str) -> int: ...


class LocalBus:
    """`RoomBus` within one process: an ordered set of sinks per room."""

    def __init__(self) -> None:
        self._rooms: dict[str, dict[Sink, None]] = {}  # insertion-ordered sets

    def subscribe(self, room: str, sink: Sink) -> None:
        self._rooms.setdefault(room, {})[sink] = None

    def unsubscribe(self, room: str, sink: Sink) -> None:
        sinks = self._rooms.get(room)
        if sinks is not None:
            sinks.pop(sink, None)
            if not sinks:
                del self._rooms[room]

    def publish(self, room: str, frame: dict[str, Any]) -> None:
        sinks = self._rooms.get(room)
        if not sinks:
            return
        message = Message(frame)
        for sink in list(sinks):
            sink.deliver(message)

    def subscribers(self, room: str) -> int:
        return len(self._rooms.get(room, ()))

    def drop_room(self, room: str) -> None:
        self._rooms.pop(room, None)
