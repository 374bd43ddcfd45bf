"""The typed frames of sync_server/wire/frames.py, with plain maps: every
frame kind parses to its class, every malformed one is refused with the
sentence the protocol answers, and the handshake says what a reply means."""

from __future__ import annotations

import pytest

from sync_server.wire import frames, protocol


def test_the_client_frames_parse_to_their_classes() -> None:
    assert frames.parse_client(protocol.hello("tok", "r1", 4)) == frames.Hello("tok", "r1", 4)
    cmd = frames.parse_client(protocol.cmd("c1", "damage", {"char": "c1"}, expect=3))
    assert cmd == frames.Cmd("c1", "damage", {"char": "c1"}, 3)
    no_expect = frames.parse_client(protocol.cmd("c2", "combat_end"))
    assert isinstance(no_expect, frames.Cmd) and no_expect.expect is protocol.NO_EXPECT
    assert frames.parse_client(protocol.sync(7, "q1")) == frames.Sync(7, "q1")


@pytest.mark.parametrize(
    ("frame", "message", "echo"),
    [
        ({"t": "cmd", "op": "damage"}, "a cmd needs an id: a string of 1-128 characters", None),
        ({"t": "cmd", "id": "x" * 129, "op": "damage"}, "a cmd needs an id", None),
        ({"t": "cmd", "id": "c1"}, "a cmd needs an op", "c1"),
        ({"t": "sync", "since": -1, "id": "q"}, "sync needs since: a version number", "q"),
        ({"t": "sync", "since": True}, "sync needs since", None),
        ({"t": "nope", "id": "c3"}, "unknown frame type 'nope'", "c3"),
        ({"t": "hello", "proto": 2, "token": "t"}, "unknown proto 2", None),
        ({"t": "hello", "proto": 1, "token": "t", "since": "4"}, "since must be a version", None),
    ],
)
def test_a_malformed_client_frame_is_refused_with_its_reason(
    frame: dict, message: str, echo: str | None
) -> None:
    with pytest.raises(frames.BadFrame) as info:
        frames.parse_client(frame)
    assert info.value.message.startswith(message)
    assert info.value.echo_id == echo


def test_an_admin_session_has_nothing_to_sync() -> None:
    with pytest.raises(frames.BadFrame, match="admin sessions have no room to sync"):
        frames.parse_client(protocol.sync(0), has_room=False)


def test_the_server_frames_parse_to_their_classes() -> None:
    p = protocol.patch(5, [["set", ["clock"], 6]], [], "u1", "c9")
    parsed = frames.parse_server(p)
    assert parsed == frames.Patch(5, [["set", ["clock"], 6]], [], "u1", "c9")
    assert isinstance(parsed, frames.Patch) and parsed.raw is p
    assert frames.parse_server(protocol.ack("c9", {}, v=5, dup=True)) == frames.Ack(
        "c9", {}, 5, True
    )
    assert frames.parse_server(protocol.error("rule", "no", "c9")) == frames.Error(
        "rule", "no", "c9"
    )
    welcome = frames.parse_server(protocol.welcome("r1", "u1", "gm", 5, state={"clock": 0}))
    assert welcome == frames.Welcome("u1", "gm", "r1", 5, {"clock": 0}, None)
    assert frames.parse_server(protocol.admin_welcome()) == frames.Welcome("admin", "admin")
    assert frames.parse_server(protocol.patches([p], "q")) == frames.Patches([p], "q")
    assert frames.parse_server(protocol.snapshot(5, {}, "q")) == frames.Snapshot(5, {}, "q")
    assert frames.parse_server(protocol.redirect("ws://b/")) == frames.Redirect("ws://b/")


@pytest.mark.parametrize(
    "frame",
    [
        [],
        {"t": "patch", "v": -1, "ops": [], "events": []},
        {"t": "patch", "v": 1, "ops": "x", "events": []},
        {"t": "ack", "result": {}},
        {"t": "welcome", "user": 3, "role": "gm"},
        {"t": "redirect", "url": ""},
        {"t": "snapshot", "v": 1},
        {"t": "surprise"},
    ],
)
def test_a_malformed_server_frame_is_refused(frame: object) -> None:
    with pytest.raises(frames.BadFrame):
        frames.parse_server(frame)


def test_the_handshake_says_what_each_reply_means() -> None:
    hs = frames.Handshake("tok", "r1", 3)
    assert hs.hello() == protocol.hello("tok", "r1", 3)
    assert isinstance(hs.receive(protocol.welcome("r1", "u1", "gm", 3, patches=[])), frames.Welcome)
    assert hs.receive(protocol.redirect("wss://b/")) == frames.Redirect("wss://b/")
    refused = hs.receive(protocol.error("unauthenticated", "bad token or room"))
    assert isinstance(refused, frames.Refused)
    assert refused.error.message == "bad token or room"
    assert hs.receive(protocol.ack("c1", {})) is None  # not an answer to the hello
