"""The bus contract: what every `RoomBus` must do for the sinks of one
process (bytes per codec and view class, built once and shared; publish
order; closing, stale and held sinks; a failure for one sink or one view
class never skipping the others), each check on a fresh bus (`check_bus`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sync_server.hosting.bus import RoomBus
from sync_server.wire.codec import CODECS, JSON, MSGPACK


class _CountingCodec:
    """A real codec that counts its encode calls."""

    def __init__(self, name: str) -> None:
        self.inner = CODECS[name]
        self.name, self.binary = self.inner.name, self.inner.binary
        self.calls = 0

    def encode(self, frame: dict[str, Any]) -> bytes | str:
        self.calls += 1
        return self.inner.encode(frame)

    def decode(self, data: bytes | str) -> Any:
        return self.inner.decode(data)


class _Sink:
    """A bus subscriber that keeps what it was handed."""

    def __init__(self, codec: Any, viewer: Any = None) -> None:
        self.codec = codec
        self.viewer = viewer
        self.closing = False
        self.stale = False
        self.got: list[tuple[bytes, int | None]] = []

    def deliver(self, data: bytes, v: int | None) -> None:
        assert isinstance(data, bytes), f"a sink is handed bytes, not {type(data).__name__}"
        self.got.append((data, v))

    def frames(self) -> list[Any]:
        return [self.codec.decode(d if self.codec.binary else d.decode()) for d, _ in self.got]


class _ByViewer:
    """A view: each viewer (a string) its own frame; 'broken' cannot be
    rendered; 'gm' is exempt from the cap."""

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame
        self.renders = 0

    def key(self, viewer: Any) -> Any:
        return viewer

    def render(self, viewer: Any) -> dict[str, Any]:
        self.renders += 1
        if viewer == "broken":
            raise ValueError("cannot render")
        return {**self.frame, "for": viewer}

    def exempt(self, key: Any) -> bool:
        return key == "gm"

    def needs_snapshot(self, viewer: Any) -> bool:
        return False


def _patch(v: int) -> dict[str, Any]:
    return {"t": "patch", "v": v, "ops": [["set", ["characters", "c1", "pv"], v]], "events": []}


def frames_reach_every_subscriber_in_publish_order(bus: RoomBus) -> None:
    sinks = [_Sink(CODECS[MSGPACK]), _Sink(CODECS[JSON]), _Sink(CODECS[MSGPACK])]
    for sink in sinks:
        bus.subscribe("r1", sink)
    for v in (1, 2, 3):
        bus.publish("r1", _patch(v))
    for sink in sinks:
        assert sink.frames() == [_patch(v) for v in (1, 2, 3)], sink.frames()
        assert [v for _, v in sink.got] == [1, 2, 3], "each frame's version goes with its bytes"
    assert bus.subscribers("r1") == 3


def each_frame_is_encoded_once_per_codec_and_view_class(bus: RoomBus) -> None:
    codecs = {name: _CountingCodec(name) for name in (MSGPACK, JSON)}
    sinks = [_Sink(codecs[name], viewer) for name in (MSGPACK, JSON) for viewer in "aab"]
    for sink in sinks:
        bus.subscribe("r1", sink)
    view = _ByViewer(_patch(1))
    bus.publish("r1", _patch(1), view)
    assert view.renders == 2, f"{view.renders} renders for two view classes"
    assert codecs[MSGPACK].calls == 2 and codecs[JSON].calls == 2
    for name in (MSGPACK, JSON):
        mine = [s for s in sinks if s.codec is codecs[name]]
        same = {id(s.got[0][0]) for s in mine if s.viewer == "a"}
        assert len(same) == 1, "every sink of one codec and view class: the very same bytes"
        assert [f["for"] for s in mine for f in s.frames()] == ["a", "a", "b"]
    bus.publish("r1", _patch(2))  # no view: one encoding per codec
    assert codecs[MSGPACK].calls == 3 and codecs[JSON].calls == 3


def rooms_and_unsubscribes_are_kept_apart(bus: RoomBus) -> None:
    codec = _CountingCodec(MSGPACK)
    one, two = _Sink(codec), _Sink(codec)
    bus.subscribe("r1", one)
    bus.subscribe("r2", two)
    bus.publish("r2", _patch(1))
    assert one.got == [] and len(two.got) == 1
    bus.unsubscribe("r2", two)
    bus.unsubscribe("r2", two)  # twice: harmless
    bus.publish("r2", _patch(2))
    assert len(two.got) == 1 and codec.calls == 1, "a room with no subscriber encodes nothing"
    assert bus.subscribers("r2") == 0 and bus.subscribers("r1") == 1


def closing_and_stale_sinks_get_nothing(bus: RoomBus) -> None:
    sinks = [_Sink(CODECS[MSGPACK]) for _ in range(3)]
    for sink in sinks:
        bus.subscribe("r1", sink)
    sinks[0].closing = True
    sinks[1].stale = True
    bus.publish("r1", _patch(1))
    assert [len(s.got) for s in sinks] == [0, 0, 1]


def past_the_cap_of_views_sinks_are_held_for_a_snapshot(bus: RoomBus) -> None:
    sinks = [_Sink(CODECS[JSON], viewer) for viewer in ("a", "b", "gm", "c", "a")]
    for sink in sinks:
        bus.subscribe("r1", sink)
    held: list[Any] = []
    view = _ByViewer(_patch(1))
    bus.publish("r1", _patch(1), view, max_keys=2, on_overflow=held.append)
    assert [len(s.got) for s in sinks] == [1, 1, 1, 0, 1], "the GM's exempt class is never held"
    assert held == [sinks[3]] and sinks[3].stale, "held: marked stale, handed to on_overflow"
    assert view.renders == 3


def a_render_error_skips_no_other_sink(bus: RoomBus) -> None:
    sinks = [_Sink(CODECS[JSON], viewer) for viewer in ("a", "broken", "b")]
    for sink in sinks:
        bus.subscribe("r1", sink)
    held: list[Any] = []
    bus.publish("r1", _patch(1), _ByViewer(_patch(1)), max_keys=8, on_overflow=held.append)
    assert [len(s.got) for s in sinks] == [1, 0, 1], [len(s.got) for s in sinks]
    assert sinks[2].frames()[0]["for"] == "b"
    assert held == [sinks[1]] and sinks[1].stale, "the class it could not render: a snapshot"


def a_failing_sink_skips_no_other_sink(bus: RoomBus) -> None:
    class Failing(_Sink):
        def deliver(self, data: bytes, v: int | None) -> None:
            raise OSError("connection gone")

    sinks = [_Sink(CODECS[MSGPACK]), Failing(CODECS[MSGPACK]), _Sink(CODECS[MSGPACK])]
    for sink in sinks:
        bus.subscribe("r1", sink)
    bus.publish("r1", _patch(1))
    bus.publish("r1", _patch(2))
    assert [len(s.got) for s in sinks] == [2, 0, 2]


BUS_CHECKS: list[Callable[[RoomBus], None]] = [
    frames_reach_every_subscriber_in_publish_order,
    each_frame_is_encoded_once_per_codec_and_view_class,
    rooms_and_unsubscribes_are_kept_apart,
    closing_and_stale_sinks_get_nothing,
    past_the_cap_of_views_sinks_are_held_for_a_snapshot,
    a_render_error_skips_no_other_sink,
    a_failing_sink_skips_no_other_sink,
]


def check_bus(make_bus: Callable[[], RoomBus]) -> None:
    """Run every check of the bus contract, each on a fresh bus from
    `make_bus()`. Raises AssertionError naming the first check that fails."""
    for check in BUS_CHECKS:
        try:
            check(make_bus())
        except AssertionError as exc:
            raise AssertionError(f"bus contract, {check.__name__}: {exc}") from exc
