"""The session core, sans-I/O: hellos and frames as plain maps, actions out,
time passed in. No socket."""

from __future__ import annotations

import pytest

from sync_server.core.ratelimit import RateSpec, TokenBucket
from sync_server.core.session import (
    NO_EXPECT,
    TRANSITIONS,
    Authenticate,
    CloseNow,
    Hello,
    HelloRefused,
    Ignore,
    JoinRoom,
    Locate,
    OpenAdmin,
    Opened,
    ReadHello,
    RedirectTo,
    Refuse,
    Reply,
    ReplyAndClose,
    RunCommand,
    RunSync,
    SessionCore,
    SessionMisuse,
    SessionState,
    read_hello,
)
from sync_server.wire import protocol
from sync_server.wire.codec import BadFrame


def test_a_good_hello() -> None:
    assert read_hello(protocol.hello("tok", "r1", 4)) == Hello("tok", "r1", 4)
    assert read_hello(protocol.hello("tok")) == Hello("tok", None, None)


@pytest.mark.parametrize(
    ("frame", "code", "close"),
    [
        ({"t": "cmd"}, "bad_frame", 4400),
        ({"t": "hello", "proto": 2, "token": "x"}, "bad_frame", 4400),
        ({"t": "hello", "proto": True, "token": "x"}, "bad_frame", 4400),
        ({"t": "hello", "proto": 1, "token": "x", "since": -1}, "bad_frame", 4400),
        ({"t": "hello", "proto": 1, "token": "x", "since": 1.5}, "bad_frame", 4400),
        ({"t": "hello", "proto": 1, "token": ""}, "unauthenticated", 4401),
        ({"t": "hello", "proto": 1, "token": "x" * 1000}, "unauthenticated", 4401),
        ({"t": "hello", "proto": 1, "token": 7}, "unauthenticated", 4401),
        ({"t": "hello", "proto": 1, "token": "x", "room": 3}, "unauthenticated", 4401),
    ],
)
def test_bad_hellos_are_refused_with_their_close_code(frame, code, close) -> None:
    with pytest.raises(HelloRefused) as refused:
        read_hello(frame)
    assert (refused.value.code, refused.value.close) == (code, close)
    assert refused.value.frame()["t"] == "error"


def test_frames_become_actions() -> None:
    core = SessionCore("gm", None)
    assert core.receive(protocol.cmd("c1", "damage", {"char": "c1"}, expect=3), 0.0) == (
        RunCommand("c1", "damage", {"char": "c1"}, 3)
    )
    assert core.receive({"t": "cmd", "id": "c2", "op": "combat_end"}, 0.0) == RunCommand(
        "c2", "combat_end", {}, NO_EXPECT
    )
    assert core.receive(protocol.sync(5), 0.0) == RunSync(5, None)
    assert core.receive(protocol.sync(5, "q1"), 0.0) == RunSync(5, "q1")


@pytest.mark.parametrize(
    ("frame", "code", "echo"),
    [
        ({"t": "cmd", "op": "damage"}, "bad_frame", None),  # no id
        ({"t": "cmd", "id": "", "op": "damage"}, "bad_frame", None),
        ({"t": "cmd", "id": "x" * 200, "op": "damage"}, "bad_frame", None),
        ({"t": "cmd", "id": "c1"}, "bad_frame", "c1"),  # no op
        ({"t": "nope", "id": "c1"}, "bad_frame", "c1"),
        ({"t": "sync", "since": "3"}, "bad_frame", None),
        ({"t": "sync", "since": -1, "id": "q"}, "bad_frame", "q"),
    ],
)
def test_malformed_frames_get_a_bad_frame_reply(frame, code, echo) -> None:
    action = SessionCore("player", None).receive(frame, 0.0)
    assert isinstance(action, Reply) and action.frame["code"] == code
    assert action.frame.get("id") == echo


def test_undecodable_frames_get_the_decoders_message() -> None:
    action = SessionCore("player", None).receive(BadFrame("not JSON: JSONDecodeError"), 0.0)
    assert action == Reply(protocol.error("bad_frame", "not JSON: JSONDecodeError"))


def test_a_second_hello_closes_and_later_frames_are_ignored() -> None:
    core = SessionCore("player", None)
    action = core.receive(protocol.hello("t", "r1"), 0.0)
    assert isinstance(action, ReplyAndClose) and action.code == protocol.CLOSE_MISUSE
    assert core.state is SessionState.CLOSING
    assert core.receive(protocol.cmd("c1", "damage"), 0.0) == Ignore()


def test_the_rate_limit_counts_every_frame_with_the_time_given() -> None:
    core = SessionCore("player", TokenBucket(RateSpec(2.0, 3)))
    actions = [core.receive(protocol.cmd(f"c{i}", "x"), 10.0) for i in range(5)]
    assert [type(a).__name__ for a in actions] == ["RunCommand"] * 3 + ["Reply"] * 2
    assert actions[3].frame == protocol.error("rate_limited", "too many commands; slow down", "c3")
    assert core.rate_limited == 2
    assert isinstance(core.receive({"t": "junk"}, 10.0), Reply)  # counts too: refused
    assert core.rate_limited == 3
    assert isinstance(core.receive(protocol.cmd("c9", "x"), 10.5), RunCommand)  # refilled 1


def test_shutting_down_refuses_work_with_internal() -> None:
    action = SessionCore("gm", None).receive(protocol.cmd("c1", "x"), 0.0, shutting_down=True)
    assert isinstance(action, Reply) and action.frame["code"] == "internal"
    assert action.frame["id"] == "c1"


def test_admin_sessions_have_no_room_to_sync() -> None:
    action = SessionCore("admin", None, has_room=False).receive(protocol.sync(0), 0.0)
    assert isinstance(action, Reply) and "admin" in action.frame["message"]


# --- the whole session, hello included, as a transition table ---------------


def _authenticating(hello: dict | None = None) -> SessionCore:
    core = SessionCore.awaiting_hello()
    assert core.start(True, 10.0, 1.0) == ReadHello(10.0)
    action = core.hello_received(hello or protocol.hello("tok", "r1", 3))
    assert isinstance(action, Authenticate)
    assert core.state is SessionState.AUTHENTICATING
    return core


def test_a_room_user_is_located_joined_and_opened() -> None:
    core = _authenticating()
    assert core.room_token(("r1", "u2")) == Locate("r1", "u2")
    assert core.state is SessionState.JOINING
    assert core.located("here") == JoinRoom("r1", "u2", 3)
    assert core.joined("player", None) == Opened("player")
    assert core.state is SessionState.OPEN
    assert isinstance(core.receive(protocol.sync(0), 0.0), RunSync)
    core.closed()
    assert core.state is SessionState.CLOSED


def test_a_join_is_tried_three_times_then_refused() -> None:
    core = _authenticating()
    core.room_token(("r1", "u2"))
    core.located("here")
    assert core.join_retry() == Locate("r1", "u2")
    core.located("here")
    assert core.join_retry() == Locate("r1", "u2")
    core.located("here")
    refused = core.join_retry()
    assert isinstance(refused, Refuse) and refused.refusal.close == 4401
    assert core.state is SessionState.CLOSING


def test_a_token_of_another_room_or_nobody_is_one_refusal() -> None:
    for found in (None, ("r2", "u2")):
        core = _authenticating()
        action = core.room_token(found)
        assert isinstance(action, Refuse) and action.failed
        assert (action.refusal.code, action.refusal.close) == ("unauthenticated", 4401)


def test_a_room_served_elsewhere_redirects_and_never_to_no_address() -> None:
    core = _authenticating()
    core.room_token(("r1", "u2"))
    assert core.located("elsewhere", "ws://b:1/") == RedirectTo("ws://b:1/")
    assert core.state is SessionState.CLOSING
    core = _authenticating()
    core.room_token(("r1", "u2"))
    action = core.located("elsewhere", "")
    assert isinstance(action, Refuse) and action.refusal.code == "internal"


def test_the_admin_token_opens_admin_sessions_only() -> None:
    core = _authenticating(protocol.hello("admin-tok"))
    assert core.admin_token(slot_free=True) == OpenAdmin()
    assert core.state is SessionState.OPEN and core.role == "admin"
    assert core.receive(protocol.sync(0), 0.0) == Reply(
        protocol.error("bad_frame", "admin sessions have no room to sync")
    )
    with_room = _authenticating(protocol.hello("admin-tok", "r1"))
    assert isinstance(with_room.admin_token(slot_free=True), Refuse)
    full = _authenticating(protocol.hello("admin-tok"))
    action = full.admin_token(slot_free=False)
    assert isinstance(action, Refuse) and action.refusal.close == 4429


def test_the_hello_phase_refusals() -> None:
    core = SessionCore.awaiting_hello()
    action = core.start(False, 10.0, 1.5)  # over its failed hellos: wait, then the door
    assert isinstance(action, Refuse) and action.wait == 1.5 and not action.failed
    assert action.refusal.close == protocol.CLOSE_POLICY
    core = SessionCore.awaiting_hello()
    core.start(True, 10.0, 1.0)
    assert core.hello_timed_out() == CloseNow(4408, "no hello in time")
    core = SessionCore.awaiting_hello()
    core.start(True, 10.0, 1.0)
    bad = core.hello_received(BadFrame("not JSON"))
    assert isinstance(bad, Refuse) and bad.refusal.close == 4400
    assert core.state is SessionState.CLOSING


def test_an_event_the_table_does_not_allow_is_caught_at_one_place() -> None:
    core = SessionCore.awaiting_hello()
    with pytest.raises(SessionMisuse, match="'joined' in state awaiting_hello"):
        core.joined("gm", None)
    opened = SessionCore("gm", None)
    with pytest.raises(SessionMisuse):
        opened.hello_received(protocol.hello("tok"))
    for state in SessionState:  # any state may end
        assert TRANSITIONS[(state, "closed")] is SessionState.CLOSED
