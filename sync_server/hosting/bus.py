"""The room bus: a room's frames to every client subscribed to it.

`RoomBus` is the seam for delivering a room's frames wherever its clients
are (one process today; a pub/sub between processes could implement it).
Rooms publish a frame and never see a socket; subscribers are `Sink`s, a
small interface (its codec, its viewer, whether it takes frames now, and
`deliver(data, v)`), so nothing connection-shaped crosses the seam.

What crosses it is bytes: the bus renders each frame once per view class
and encodes it once per codec present, whatever the number of clients,
and hands every sink of one (codec, view class) the very same bytes
object. A sink never sees a frame dict nor a view to render later, so a
transport (websockets, picows, an event stream) only writes bytes, and a
render or encode error is the bus's: it costs that group its patch (its
sinks are handed to `on_overflow`, a snapshot of their view later), never
the other sinks.

A frame that not every viewer may see whole (per-role views,
docs/views.md) comes with a `FrameView`: viewers are grouped by its `key`,
and each group's frame is built and encoded once; viewers whose key is
None get the plain frame. At most `max_keys` groups are built per message
(`Message.admit`): a subscriber of another group is handed to
`on_overflow` instead, which sends it a snapshot later (the room host:
`Resync`), so that one message costs a bounded work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import Any, Protocol

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

    def needs_snapshot(self, viewer: Any) -> bool:
        """A viewer whose view of this frame was never rendered (past the
        cap of views a version stores): it gets a snapshot instead."""
        ...


def encode(codec: Codec, frame: dict[str, Any]) -> bytes:
    """`frame` as `codec` puts it on the wire (JSON as UTF-8 bytes)."""
    encoded = codec.encode(frame)
    return encoded.encode() if isinstance(encoded, str) else encoded


class Message:
    """One frame for a room, rendered once per view group and encoded
    once per (codec, view group), lazily: the bus's own bookkeeping of a
    publish, and a frame shared by several sinks (a snapshot per view
    class). Sinks are handed its bytes, never the Message."""

    __slots__ = ("_keys", "_views", "_wire", "frame", "max_keys", "on_overflow", "view")

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

    def key(self, viewer: Any) -> Hashable | None:
        return None if self.view is None or viewer is None else self.view.key(viewer)

    def admit(self, sink: Any) -> Hashable | None:
        """The key of `sink`'s group for this frame (see `key`), or HELD:
        `max_keys` other groups are built already, so the sink is held
        (`hold`: a snapshot of its view, later) instead. The rule is
        written once, here, for every kind of sink."""
        viewer, view = sink.viewer, self.view
        if view is None or viewer is None:
            return None  # the plain frame (this runs per sink and frame: no more)
        key = view.key(viewer)
        if self.on_overflow is not None and view.needs_snapshot(viewer):
            # past the cap of views the version stored: no patch to render
            sink.stale = True
            self.on_overflow(sink)
            return HELD
        if key is None or self.max_keys is None or self.on_overflow is None:
            return key
        keys = self._keys
        if key in keys:
            return key
        if view.exempt(key):
            return key  # the GM's own class (its affordances): never capped
        if len(keys) < self.max_keys:
            keys.add(key)
            return key
        self.hold(sink)
        return HELD

    def hold(self, sink: Any) -> None:
        """`sink` does not get this frame: mark it stale and hand it to
        `on_overflow`, whose snapshot covers the frames it missed (without
        `on_overflow`, it just misses it)."""
        if self.on_overflow is not None:
            sink.stale = True
            self.on_overflow(sink)

    def frame_for(self, key: Hashable | None, viewer: Any) -> dict[str, Any]:
        if key is None:
            return self.frame
        found = self._views.get(key)
        if found is None:
            assert self.view is not None
            found = self._views[key] = self.view.render(viewer)
        return found

    def data(self, codec: Codec, key: Hashable | None = None, viewer: Any = None) -> bytes:
        """The encoded message for `key`'s group, shared by every caller of
        that group."""
        data = self._wire.get((codec.name, key))
        if data is None:
            data = self._wire[codec.name, key] = encode(codec, self.frame_for(key, viewer))
        return data


class Sink(Protocol):
    """A subscriber: the codec it reads, who it shows frames to (its
    viewer, for views), whether it takes frames now (not `closing`, not
    `stale`: waiting for a snapshot), and `deliver`, which takes the bytes
    of one frame as its codec and view class encode them, and the frame's
    version (an event stream's id)."""

    codec: Codec
    viewer: Any
    closing: bool
    stale: bool

    def deliver(self, data: bytes, v: int | None) -> None: ...


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
        instead of the frame). A failure for one subscriber or one view
        group never skips the others."""
        ...

    def subscribers(self, room: str) -> int: ...


def fan_out(
    room: str,
    sinks: list[Sink],
    frame: dict[str, Any],
    view: FrameView | None = None,
    *,
    max_keys: int | None = None,
    on_overflow: Callable[[Any], None] | None = None,
) -> None:
    """One frame to `sinks`: grouped by (codec, view key) first, each
    group's bytes built once, then delivered group by group (so a
    transport that frames the bytes sees the same object consecutively).
    Any `RoomBus` implementation can deliver its local sinks with it."""
    message = Message(frame, view, max_keys=max_keys, on_overflow=on_overflow)
    groups: dict[tuple[str, Hashable], list[Sink]] = {}
    for sink in sinks:
        if sink.closing or sink.stale:
            continue
        try:
            key = message.admit(sink)
        except Exception:  # one viewer's key: never the others
            log.exception("room %s: the view key of a subscriber for v%s", room, frame.get("v"))
            continue
        if key is not HELD:
            groups.setdefault((sink.codec.name, key), []).append(sink)
    v = frame.get("v")
    for (_, key), group in groups.items():
        try:
            data = message.data(group[0].codec, key, group[0].viewer)
        except Exception:  # one view class's render: a snapshot for it, later
            log.exception("room %s: rendering v%s for %d subscriber(s) failed", room, v, len(group))
            for sink in group:
                message.hold(sink)
            continue
        for sink in group:
            try:
                sink.deliver(data, v)
            except Exception:  # one sink: never the others
                log.exception("room %s: delivering v%s to a subscriber failed", room, v)


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
        if sinks:
            fan_out(room, list(sinks), frame, view, max_keys=max_keys, on_overflow=on_overflow)

    def subscribers(self, room: str) -> int:
        return len(self._rooms.get(room, ()))
