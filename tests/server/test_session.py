"""Sessions: hello/welcome, admin sessions, refusals and their close codes,
hostile frames, both subprotocols (docs/protocol.md, "Connecting" and
"hello -> welcome")."""

from __future__ import annotations

import asyncio
import json

import msgpack
import pytest

from sync_server import Server
from sync_server.core.limits import MAX_FRAME_BYTES
from sync_server.testing.server import without_affordances
from tests.helpers.server import (
    ADMIN_TOKEN,
    WAIT,
    Table,
    connect,
    connect_admin,
    create_table,
    hello_refused,
    open_ws,
    running_server,
)


@pytest.mark.parametrize("proto", ["msgpack", "json"])
async def test_welcome_carries_state_user_role_and_version(vtt_table: Table, proto: str) -> None:
    gm = await vtt_table.connect("gm", proto)
    w = gm.welcome
    assert w["t"] == "welcome" and w["room"] == "r1"
    assert (w["user"], w["role"]) == (vtt_table.users["gm"], "gm")
    assert w["v"] == 6  # 3 add_user + 3 add_character
    assert set(w["state"]["characters"]) == set(vtt_table.chars.values())
    assert w["state"]["users"][vtt_table.users["p1"]] == {"name": "Paul", "role": "player"}
    assert (
        gm.ws.subprotocol == {"msgpack": "vtt-sync.msgpack.v1", "json": "vtt-sync.json.v1"}[proto]
    )
    for who, role in (("p1", "player"), ("obs", "observer")):
        c = await vtt_table.connect(who)
        assert c.role == role
        await c.close()
    await gm.close()


async def test_no_subprotocol_means_msgpack(vtt_table: Table) -> None:
    ws = await open_ws(vtt_table.url, proto="")
    assert ws.subprotocol is None
    hello = {"t": "hello", "proto": 1, "token": vtt_table.tokens["p1"], "room": "r1"}
    await ws.send(msgpack.packb(hello))
    async with asyncio.timeout(WAIT):
        welcome = msgpack.unpackb(await ws.recv())
    assert welcome["t"] == "welcome" and welcome["role"] == "player"
    await ws.close()


async def test_admin_welcome(vtt_server: Server) -> None:
    admin = await connect_admin(vtt_server.url)
    assert admin.welcome == {"t": "welcome", "user": "admin", "role": "admin"}
    await admin.close()


@pytest.mark.parametrize(
    "hello",
    [
        {"t": "hello", "proto": 1, "token": "nope", "room": "r1"},
        {"t": "hello", "proto": 1, "token": "", "room": "r1"},
        {"t": "hello", "proto": 1, "room": "r1"},
        {"t": "hello", "proto": 1, "token": 12, "room": "r1"},
        {"t": "hello", "proto": 1, "token": ADMIN_TOKEN, "room": "r1"},  # admin opens no room
    ],
)
async def test_bad_token_is_unauthenticated_4401(vtt_table: Table, hello: dict) -> None:
    frame, code = await hello_refused(vtt_table.url, hello)
    assert frame is not None and frame["t"] == "error" and frame["code"] == "unauthenticated"
    assert code == 4401


async def test_token_of_one_room_does_not_open_another(vtt_server: Server) -> None:
    a = await create_table(vtt_server.url, room="a")
    await create_table(vtt_server.url, room="b")
    for room in ("b", "nowhere"):
        hello = {"t": "hello", "proto": 1, "token": a.tokens["gm"], "room": room}
        frame, code = await hello_refused(vtt_server.url, hello)
        assert (frame["code"], code) == ("unauthenticated", 4401)


@pytest.mark.parametrize(
    "first",
    [
        {"t": "cmd", "id": "c1", "op": "combat_end", "args": {}},
        {"t": "hello", "proto": 2, "token": "x", "room": "r1"},
        {"t": "hello", "proto": "1", "token": "x", "room": "r1"},
        {"proto": 1},
        b"\xc1\xc1 not msgpack",
        "a text frame",
    ],
)
async def test_first_frame_must_be_a_valid_hello_4400(vtt_table: Table, first: object) -> None:
    frame, code = await hello_refused(vtt_table.url, first)
    assert frame is not None and frame["code"] == "bad_frame"
    assert code == 4400


async def test_second_hello_closes_4400(vtt_table: Table) -> None:
    p1 = await vtt_table.connect("p1")
    await p1.send({"t": "hello", "proto": 1, "token": vtt_table.tokens["p1"], "room": "r1"})
    code, _ = await p1.closed()
    assert code == 4400
    assert any(f.get("code") == "bad_frame" for f in p1.frames)


async def test_no_hello_in_time_closes_4408(tmp_path) -> None:
    async with running_server(tmp_path, hello_timeout=0.3) as srv:
        ws = await open_ws(srv.url)
        async with asyncio.timeout(WAIT):
            await ws.wait_closed()
        assert ws.close_code == 4408


async def test_frame_over_64_kib_closes_1009(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    big = {"t": "cmd", "id": "big", "op": "update_room", "args": {"name": "x" * MAX_FRAME_BYTES}}
    await gm.send(big)
    code, _ = await gm.closed()
    assert code == 1009


async def test_a_frame_just_under_the_limit_is_not_closed(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    reply = await gm.cmd("update_room", {"name": "x" * (MAX_FRAME_BYTES - 200)})
    assert reply["code"] == "invalid_args"  # the rules bound names; the frame itself was fine
    await gm.close()


@pytest.mark.parametrize(
    ("proto", "data", "code"),
    [
        ("msgpack", b"\xc1", "bad_frame"),
        ("msgpack", "a text frame on a msgpack connection", "bad_frame"),
        ("msgpack", msgpack.packb([1, 2, 3]), "bad_frame"),
        ("msgpack", msgpack.packb({"op": "damage"}), "bad_frame"),
        ("msgpack", msgpack.packb({"t": "teleport"}), "bad_frame"),
        ("msgpack", msgpack.packb({"t": "cmd", "op": "combat_end"}), "bad_frame"),  # no id
        ("msgpack", msgpack.packb({1: 2}), "bad_frame"),
        (
            "msgpack",
            msgpack.packb({"t": "cmd", "id": "x", "op": "damage", "args": {"amount": b"\x01"}}),
            "bad_frame",
        ),
        (
            "msgpack",
            msgpack.packb({"t": "cmd", "id": "x", "op": "heal", "args": {"amount": float("nan")}}),
            "bad_frame",
        ),
        ("json", '{"t": "cmd", "id": "x", "op": "damage", "args": {"amount": NaN}}', "bad_frame"),
        (
            "json",
            '{"t": "cmd", "id": "x", "op": "damage", "args": {"amount": Infinity}}',
            "bad_frame",
        ),
        ("json", '{"t": "cmd", "id": "x", "op": "damage", "args": {"amount": 1e999}}', "bad_frame"),
        (
            "json",
            '{"t": "cmd", "id": "x", "op": "damage", "args": {"amount": ' + str(2**70) + "}}",
            "bad_frame",
        ),
        ("json", "[" * 5000 + "]" * 5000, "bad_frame"),
        ("json", msgpack.packb({"t": "sync", "since": 0}), "bad_frame"),  # binary on json
        ("json", '{"t": "sync", "since": "zero"}', "bad_frame"),
        ("json", '{"t": "cmd", "id": "x", "op": "teleport", "args": {}}', "unknown_op"),
        ("json", '{"t": "cmd", "id": "x", "op": ["damage"], "args": {}}', "unknown_op"),
        ("json", '{"t": "cmd", "id": "x", "op": "damage", "args": []}', "invalid_args"),
        (
            "json",
            '{"t": "cmd", "id": "x", "op": "damage", "args": {"char": "zz", "amount": 1}}',
            "not_found",
        ),
    ],
)
async def test_hostile_frames_get_an_error_and_keep_the_connection(
    vtt_table: Table, proto: str, data: bytes | str, code: str
) -> None:
    gm = await vtt_table.connect("gm", proto)
    v = gm.v
    await gm.send_raw(data)
    async with asyncio.timeout(WAIT):
        while True:
            errors = [f for f in gm.frames if f.get("t") == "error"]
            if errors:
                break
            await asyncio.sleep(0.01)
    assert errors[0]["code"] == code, errors[0]
    assert isinstance(errors[0]["message"], str) and errors[0]["message"]
    # the connection still works and the room did not change
    ack = await gm.cmd("update_room", {"name": "still here"})
    assert ack["t"] == "ack" and ack["v"] == v + 1
    await gm.close()


async def test_json_and_msgpack_clients_see_the_same_patches(vtt_table: Table) -> None:
    j = await vtt_table.connect("obs", "json")
    m = await vtt_table.connect("p1", "msgpack")
    gm = await vtt_table.connect("gm")
    ack = await gm.ok("damage", {"char": vtt_table.chars["c_p1"], "amount": 4})
    await j.wait_v(ack["v"])
    await m.wait_v(ack["v"])
    assert j.patches[-1] == m.patches[-1]
    # The same room; what each may do differs (an observer nothing, p1 its own).
    assert json.loads(json.dumps(without_affordances(j.state))) == without_affordances(m.state)
    for c in (j, m, gm):
        await c.close()


async def test_unknown_room_with_valid_shape_is_4401(vtt_server: Server) -> None:
    frame, code = await hello_refused(
        vtt_server.url, {"t": "hello", "proto": 1, "token": "t" * 43, "room": "ghost"}
    )
    assert (frame["code"], code) == ("unauthenticated", 4401)


async def test_connect_helper_reports_refusal(vtt_table: Table) -> None:
    with pytest.raises(Exception, match="unauthenticated"):
        await connect(vtt_table.url, "bad-token", "r1")


async def test_no_token_in_any_log_line(tmp_path, caplog) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    async with running_server(tmp_path) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm", "json")
        new = (await gm.ok("add_user", {"name": "Eve", "role": "player"}))["result"]["token"]
        await gm.ok("rotate_token", {"user": t.users["p2"]})
        await hello_refused(
            srv.url, {"t": "hello", "proto": 1, "token": "wrong-" + new, "room": "r1"}
        )
        await gm.close()
    # the server's records (the test's own websockets client logs what it sends)
    text = "\n".join(
        r.getMessage() for r in caplog.records if not r.name.startswith("websockets.client")
    )
    assert caplog.records  # the capture worked
    for token in [*t.tokens.values(), new, ADMIN_TOKEN]:
        assert token[:12] not in text  # not even a truncated piece of it


def test_new_tokens_never_start_with_a_dash() -> None:
    """A token starting with "-" reads as an option on a command line."""
    from sync_server.core.auth import new_token

    assert not any(new_token().startswith("-") for _ in range(2000))
