"""The room bus: a room's frames to every client subscribed to it.

`RoomBus` is the seam for delivering a room's frames wherever its clients
are (one process today; a pub/sub between processes could implement it).
Rooms publish a frame and never see a socket; subscribers are `Sink`s, a
two-member interface (its codec, `deliver`), so nothing connection-shaped
crosses the seam.

`Message` carries one frame to all of a room's subscribers, encoded at most
once per subprotocol present, whatever the number of clients: every client
of one subprotocol gets the very same bytes object. A frame that not every
viewer may see whole (per-role views, docs/views.md) comes with a
`FrameView`: viewers are grouped by its `key`, and each group's frame is
built and encoded once; viewers whose key is None get the plain frame.
At most `max_keys` groups are built per message (`admit`): a subscriber of
another group is handed to `on_overflow` instead, which sends it a snapshot
later (the room host: `Resync`), so that one message costs a bounded work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from sync_server.hosting.ws_fastpath import server_frame
from sync_server.wire.codec import Codec

log = logging.getLogger(__name__)


# What `Message.admit` answers a sink past the cap of views.
HELD: Any = object()


class FrameView(Protocol):
    """How one frame looks to each viewer."""

    def key(self, viewer: Any) -> Hashable | None:
        """Viewers with equal keys get equal frames; None: the plain frame."""
        ...

    def render(self, viewer: Any) -> dict[str, Any]:
        """The frame as `viewer` (one of its key's group) may see it."""
        ...

    def exempt(self, key: Hashable) -> bool:
        """A group the cap of views per frame never holds back."""
        ...


class Message:
    """One frame for a room, encoded lazily, once per codec and view group
    (and once more as a complete WebSocket frame, for the transports that
    take it)."""

    __slots__ = ("_frames", "_keys", "_views", "_wire", "frame", "max_keys", "on_overflow", "view")

    def __init__(
        self,
        frame: dict[str, Any],
        view: FrameView | None = None,
        *,
        max_keys: int | None = None,
        on_overflow: Callable[[Any], None] | None = None,
    ) -> None:
        self.frame = frame
        self.view = view
        self.max_keys = max_keys
        self.on_overflow = on_overflow
        self._keys: set[Hashable] = set()
        self._views: dict[Hashable, dict[str, Any]] = {}
        self._wire: dict[tuple[str, Hashable], bytes] = {}
        self._frames: dict[tuple[str, Hashable], bytes] = {}

    def key(self, viewer: Any) -> Hashable | None:
        return None if self.view is None or viewer is None else self.view.key(viewer)

    def admit(self, sink: Any) -> Hashable | None:
        """The key of `sink`'s group for this frame (see `key`), or HELD:
        `max_keys` other groups are built already, so the sink is marked
        `stale` and handed to `on_overflow` (a snapshot of its view, later)
        instead. Every sink that takes part in the cap (a WebSocket outbox,
        an event stream) asks here, so the rule is written once."""
        key = self.key(sink.viewer)
        if key is None or self.max_keys is None or self.on_overflow is None:
            return key
        if self.view is not None and self.view.exempt(key):
            return key  # the GM's own class (its affordances): never capped
        keys = self._keys
        if key in keys:
            return key
        if len(keys) < self.max_keys:
            keys.add(key)
            return key
        sink.stale = True
        self.on_overflow(sink)
        return HELD

    def frame_for(self, key: Hashable | None, viewer: Any) -> dict[str, Any]:
        if key is None:
            return self.frame
        found = self._views.get(key)
        if found is None:
            assert self.view is not None
            found = self._views[key] = self.view.render(viewer)
        return found

    def data(self, codec: Codec, key: Hashable | None = None, viewer: Any = None) -> bytes:
        """The encoded message (JSON as UTF-8 bytes) for `key`'s group,
        shared by every caller of that group."""
        data = self._wire.get((codec.name, key))
        if data is None:
            encoded = codec.encode(self.frame_for(key, viewer))
            data = self._wire[codec.name, key] = (
                encoded.encode() if isinstance(encoded, str) else encoded
            )
        return data

    def ws_frame(self, codec: Codec, key: Hashable | None = None, viewer: Any = None) -> bytes:
        """The same message as a complete server WebSocket frame."""
        frame = self._frames.get((codec.name, key))
        if frame is None:
            frame = self._frames[codec.name, key] = server_frame(
                self.data(codec, key, viewer), not codec.binary
            )
        return frame


class Sink(Protocol):
    """A subscriber: it says which codec it reads and who it shows frames
    to (its viewer, for views), and takes messages."""

    codec: Codec
    viewer: Any

    def deliver(self, message: Message) -> None: ...


class RoomBus(Protocol):
    def subscribe(self, room: str, sink: Sink) -> None: ...

    def unsubscribe(self, room: str, sink: Sink) -> None: ...

    def publish(
        self,
        room: str,
        frame: dict[str, Any],
        view: FrameView | None = None,
        *,
        max_keys: int | None = None,
        on_overflow: Callable[[Any], None] | None = None,
    ) -> None:
        """Deliver one frame to every subscriber of the room, in publish
        order; with `view`, each subscriber gets its viewer's frame, at
        most `max_keys` distinct ones built (past them, `on_overflow(sink)`
        instead of the frame)."""
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

    def publish(
        self,
        room: str,
        frame: dict[str, Any],
        view: FrameView | None = None,
        *,
        max_keys: int | None = None,
        on_overflow: Callable[[Any], None] | None = None,
    ) -> None:
        sinks = self._rooms.get(room)
        if not sinks:
            return
        message = Message(frame, view, max_keys=max_keys, on_overflow=on_overflow)
        for sink in list(sinks):
            try:
                sink.deliver(message)
            except Exception:  # one viewer's render or one sink: never the others
                log.exception(
                    "room %s: delivering v%s to a subscriber failed", room, frame.get("v")
                )

    def subscribers(self, room: str) -> int:
        return len(self._rooms.get(room, ()))
