"""Commands: patches then ack, idempotent ids, `expect`, error order, undo,
user and token commands, admin commands (docs/protocol.md, "cmd -> patch";
docs/operations.md, "Operations")."""

from __future__ import annotations

import asyncio
import copy

from sync_server import Server
from sync_server.testing.server import room_ops
from tests.helpers.server import (
    Client,
    Table,
    connect,
    connect_admin,
    create_table,
    hello_refused,
    on_both_transports,
)

pytestmark = on_both_transports  # issue 22: the fast transport keeps the protocol


def char(c: Client, cid: str) -> dict:
    return c.state["characters"][cid]


async def test_patch_reaches_everyone_before_the_senders_ack(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    p1 = await vtt_table.connect("p1")
    obs = await vtt_table.connect("obs", "json")
    cid = vtt_table.chars["c_p1"]
    ack = await gm.ok("damage", {"char": cid, "amount": 5}, id="hit-1")
    kinds = [f["t"] for f in gm.frames]
    assert kinds[-2:] == ["patch", "ack"]
    patch = gm.frames[-2]
    assert patch["v"] == ack["v"] == 7
    assert (patch["by"], patch["id"]) == (vtt_table.users["gm"], "hit-1")
    assert isinstance(patch["events"], list)
    for c in (p1, obs):
        await c.wait_v(7)
        # The same patch, but for what the GM alone may do next (undo v7),
        # and the id is the sender's (views).
        assert room_ops({**c.patches[-1], "id": "x"}) == room_ops({**patch, "id": "x"})
        assert c.patches[-1]["id"] is None
        assert char(c, cid)["pe"] == 10
        assert not any(f["t"] == "ack" for f in c.frames)  # acks go to the sender only
    for c in (gm, p1, obs):
        await c.close()


async def test_retry_with_same_id_applies_once_and_answers_the_first_ack(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    cid = vtt_table.chars["c_npc"]
    first = await gm.ok("damage", {"char": cid, "amount": 2}, id="retry-me")
    again = await gm.cmd("damage", {"char": cid, "amount": 2}, id="retry-me")
    assert again == {**first, "dup": True}
    assert gm.v == first["v"]
    # a new connection of the same user (a retry after reconnecting)
    gm2 = await vtt_table.connect("gm")
    third = await gm2.cmd("damage", {"char": cid, "amount": 2}, id="retry-me")
    assert third == {**first, "dup": True}
    assert char(gm2, cid)["pe"] == 13  # damaged once
    assert gm2.welcome["v"] == first["v"]
    # ids are per user: the same id from another user is another command
    p1 = await vtt_table.connect("p1")
    r = await p1.cmd("rest", {"char": vtt_table.chars["c_p1"], "kind": "short"}, id="retry-me")
    assert r["t"] == "ack" and "dup" not in r
    for c in (gm, gm2, p1):
        await c.close()


async def test_a_refused_command_is_not_remembered(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    p1 = await vtt_table.connect("p1")
    cid = vtt_table.chars["c_p1"]
    refused = await p1.cmd("stabilize", {"char": cid}, id="s-1")
    assert refused["code"] == "rule"  # not dying
    await gm.ok("damage", {"char": cid, "amount": 35})  # 15 PE then 20 PV: dying
    assert char(gm, cid)["condition"] == "dying"
    again = await p1.cmd("stabilize", {"char": cid}, id="s-1")
    assert again["t"] == "ack" and "dup" not in again
    await p1.wait_v(again["v"])
    assert char(p1, cid)["condition"] == "stable"
    await gm.close()
    await p1.close()


async def test_expect(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    p1 = await vtt_table.connect("p1")
    cid = vtt_table.chars["c_p1"]
    ok = await gm.cmd("damage", {"char": cid, "amount": 1}, id="e-1", expect=6)
    assert ok["t"] == "ack" and ok["v"] == 7
    stale = await gm.cmd("damage", {"char": cid, "amount": 1}, id="e-2", expect=6)
    assert stale["code"] == "conflict" and stale["id"] == "e-2"
    assert gm.v == 7
    # dedup comes before expect: the retry of e-1 with its old expect is a dup
    dup = await gm.cmd("damage", {"char": cid, "amount": 1}, id="e-1", expect=6)
    assert dup["dup"] is True and dup["v"] == 7
    # error order: forbidden before conflict, invalid_args before both
    forbidden = await p1.cmd("damage", {"char": cid, "amount": 1}, expect=0)
    assert forbidden["code"] == "forbidden"
    bad = await gm.cmd("damage", {"char": cid, "amount": 1}, expect="7")
    assert bad["code"] == "invalid_args"
    rule_and_stale = await p1.cmd("stabilize", {"char": cid}, expect=0)  # not dying AND stale
    assert rule_and_stale["code"] == "conflict"
    await gm.close()
    await p1.close()


async def test_every_accepted_command_makes_one_version_even_without_change(
    vtt_table: Table,
) -> None:
    gm = await vtt_table.connect("gm")
    a = await gm.ok("damage", {"char": vtt_table.chars["c_npc"], "amount": 0})
    assert a["v"] == 7
    assert gm.frames[-2]["t"] == "patch" and gm.frames[-2]["v"] == 7
    await gm.close()


async def test_undo_walks_back_and_restores_state_exactly(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    obs = await vtt_table.connect("obs")
    cid, npc = vtt_table.chars["c_p1"], vtt_table.chars["c_npc"]
    s0 = copy.deepcopy(gm.state)
    await gm.ok("queue_rolls", {"rolls": [3, 17]})
    s1 = copy.deepcopy(gm.state)
    await gm.ok("damage", {"char": cid, "amount": 40})  # dying
    s2 = copy.deepcopy(gm.state)
    fa = await gm.ok("first_aid", {"char": npc, "patient": cid})  # consumes the queued 3: fails
    assert gm.state["queued_rolls"] == [17]
    u1 = await gm.ok("undo")
    assert u1["result"]["undone"] == fa["v"]
    assert gm.state == s2  # the dice queue included
    await gm.ok("undo")
    assert gm.state == s1
    await gm.ok("undo")
    assert gm.state == s0
    await obs.wait_v(gm.v)
    assert obs.state == obs.seen(s0)
    assert obs.patches[-1]["events"][0]["kind"] == "undo"
    await gm.close()
    await obs.close()


async def test_undo_skips_user_commands_and_is_the_gms(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    p1 = await vtt_table.connect("p1")
    cid = vtt_table.chars["c_p1"]
    hit = await gm.ok("damage", {"char": cid, "amount": 3})
    added = await gm.ok("add_user", {"name": "Late", "role": "player"})
    new_user = added["result"]["user"]
    u = await gm.ok("undo")
    assert u["result"]["undone"] == hit["v"]
    assert new_user in gm.state["users"]  # the user command was not undone
    assert char(gm, cid)["pe"] == 15
    assert (await p1.cmd("undo"))["code"] == "forbidden"
    assert (await gm.cmd("undo", {"steps": 2}))["code"] == "invalid_args"
    await gm.close()
    await p1.close()


async def test_undo_in_a_fresh_room_is_a_conflict(vtt_server: Server) -> None:
    admin = await connect_admin(vtt_server.url)
    res = (await admin.ok("create_room", {"room": "fresh", "name": "Fresh"}))["result"]
    gm = await connect(vtt_server.url, res["gm_token"], "fresh")
    assert gm.welcome["v"] == 0
    assert (await gm.cmd("undo"))["code"] == "conflict"
    await gm.close()
    await admin.close()


async def test_add_user_token_goes_to_the_gm_ack_only(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    obs = await vtt_table.connect("obs", "json")
    ack = await gm.ok("add_user", {"name": "Nina", "role": "player"}, id="add-nina")
    token = ack["result"]["token"]
    assert isinstance(token, str) and len(token) >= 40
    await obs.wait_v(ack["v"])
    assert token not in repr(obs.frames)
    assert token not in repr([f for f in gm.frames if f["t"] != "ack"])
    dup = await gm.cmd("add_user", {"name": "Nina", "role": "player"}, id="add-nina")
    assert dup["dup"] is True and dup["result"]["token"] == token
    nina = await connect(vtt_table.url, token, "r1")
    assert (nina.user, nina.role) == (ack["result"]["user"], "player")
    for c in (gm, obs, nina):
        await c.close()


async def test_rotate_token_closes_sessions_4403_and_the_old_token_stops_working(
    vtt_table: Table,
) -> None:
    gm = await vtt_table.connect("gm")
    p1a = await vtt_table.connect("p1")
    p1b = await vtt_table.connect("p1", "json")
    p2 = await vtt_table.connect("p2")
    ack = await gm.ok("rotate_token", {"user": vtt_table.users["p1"]})
    new = ack["result"]["token"]
    assert (await p1a.closed())[0] == 4403
    assert (await p1b.closed())[0] == 4403
    frame, code = await hello_refused(
        vtt_table.url, {"t": "hello", "proto": 1, "token": vtt_table.tokens["p1"], "room": "r1"}
    )
    assert (frame["code"], code) == ("unauthenticated", 4401)
    p1c = await connect(vtt_table.url, new, "r1")
    assert p1c.user == vtt_table.users["p1"]
    # others are untouched
    ok = await gm.ok("damage", {"char": vtt_table.chars["c_p2"], "amount": 1})
    await p2.wait_v(ok["v"])
    for c in (gm, p1c, p2):
        await c.close()


async def test_gm_rotating_its_own_token_gets_the_ack_then_4403(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    ack = await gm.ok("rotate_token", {"user": vtt_table.users["gm"]})
    assert (await gm.closed())[0] == 4403
    gm2 = await connect(vtt_table.url, ack["result"]["token"], "r1")
    assert gm2.role == "gm"
    await gm2.close()


async def test_remove_user_closes_4403_and_frees_characters(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    p1 = await vtt_table.connect("p1")
    await gm.ok("remove_user", {"user": vtt_table.users["p1"]})
    assert (await p1.closed())[0] == 4403
    assert vtt_table.users["p1"] not in gm.state["users"]
    assert char(gm, vtt_table.chars["c_p1"])["owner"] is None
    frame, code = await hello_refused(
        vtt_table.url, {"t": "hello", "proto": 1, "token": vtt_table.tokens["p1"], "room": "r1"}
    )
    assert (frame["code"], code) == ("unauthenticated", 4401)
    await gm.close()


async def test_admin_commands(vtt_server: Server) -> None:
    admin = await connect_admin(vtt_server.url, proto="json")
    a = await admin.cmd("create_room", {"room": "r9", "name": "Nine"}, id="mk-9")
    assert a["t"] == "ack" and "v" not in a
    assert set(a["result"]) == {"room", "user", "gm_token"}
    dup = await admin.cmd("create_room", {"room": "r9", "name": "Nine"}, id="mk-9")
    assert dup["dup"] is True and dup["result"] == a["result"]
    assert (await admin.cmd("create_room", {"room": "r9", "name": "Again"}))["code"] == "conflict"
    assert (await admin.cmd("create_room", {"room": "no/slash", "name": "x"}))[
        "code"
    ] == "invalid_args"
    assert (await admin.cmd("create_room", {"room": "r10"}))["code"] == "invalid_args"
    assert (await admin.cmd("create_room", {"room": "r10", "name": "x", "extra": 1}))[
        "code"
    ] == "invalid_args"
    assert (await admin.cmd("delete_room", {"room": "ghost"}))["code"] == "not_found"
    assert (await admin.cmd("explode", {}))["code"] == "unknown_op"
    assert (await admin.cmd("damage", {"char": "c1", "amount": 1}))["code"] == "forbidden"
    gm = await connect(vtt_server.url, a["result"]["gm_token"], "r9")
    assert gm.state["users"][a["result"]["user"]]["role"] == "gm"
    assert (await gm.cmd("create_room", {"room": "r11", "name": "x"}))["code"] == "forbidden"
    assert (await gm.cmd("delete_room", {"room": "r9"}))["code"] == "forbidden"
    d = await admin.ok("delete_room", {"room": "r9"})
    assert d["result"] == {"room": "r9"} and "v" not in d
    assert (await gm.closed())[0] == 4404
    frame, code = await hello_refused(
        vtt_server.url,
        {"t": "hello", "proto": 1, "token": a["result"]["gm_token"], "room": "r9"},
    )
    assert (frame["code"], code) == ("unauthenticated", 4401)
    # the id can be created again, from scratch
    again = await admin.ok("create_room", {"room": "r9", "name": "Nine bis"})
    gm = await connect(vtt_server.url, again["result"]["gm_token"], "r9")
    assert gm.welcome["v"] == 0 and gm.state["name"] == "Nine bis"
    await gm.close()
    await admin.close()


async def test_delete_room_lets_queued_commands_finish(vtt_server: Server) -> None:
    table = await create_table(vtt_server.url, room="doomed")
    gm = await table.connect("gm")
    admin = await connect_admin(vtt_server.url)
    futs = [
        await gm.submit("damage", {"char": table.chars["c_npc"], "amount": 0}) for _ in range(20)
    ]
    await admin.ok("delete_room", {"room": "doomed"})
    replies = await asyncio.gather(*futs, return_exceptions=True)
    acked = [r for r in replies if isinstance(r, dict) and r.get("t") == "ack"]
    # every reply received is an ack or a not_found for a command after the delete
    for r in replies:
        if isinstance(r, dict):
            assert r["t"] == "ack" or r["code"] == "not_found"
    assert [a["v"] for a in acked] == list(range(7, 7 + len(acked)))
    assert (await gm.closed())[0] == 4404
    await admin.close()


async def test_L1_next_check_reaches_each_viewer_in_the_patches(vtt_table: Table) -> None:
    """L1: a stable character's `next_check` (when and which of its hourly
    checks comes next) is in the state each viewer sees it in full, and the
    patches keep it current: the mirrors equal a fresh welcome's view."""
    gm = await vtt_table.connect("gm")
    p1 = await vtt_table.connect("p1")
    obs = await vtt_table.connect("obs", "json")
    cid, npc = vtt_table.chars["c_p1"], vtt_table.chars["c_npc"]
    await gm.ok("update_character", {"char": npc, "set": {"shown": "status"}})
    await gm.ok("advance_clock", {"seconds": 100})
    for who in (cid, npc):
        await gm.ok("damage", {"char": who, "amount": 1000})
        await gm.ok("heal", {"char": who, "amount": 0, "stabilize": True})  # stable at 100
    first = {"at": 100 + 3600, "n": 1, "of": 8}
    await gm.ok("queue_rolls", {"rolls": [12, 12]})  # Con +2: 14, both stay stable
    ack = await gm.ok("advance_clock", {"seconds": 3600})
    for c in (gm, p1, obs):
        await c.wait_v(ack["v"])
        assert char(c, cid)["next_check"] == {**first, "at": 100 + 7200, "n": 2}
        assert c.state == c.seen(gm.state)
    assert char(gm, npc)["next_check"] == {**first, "at": 100 + 7200, "n": 2}
    assert "next_check" not in char(p1, npc) and "next_check" not in char(obs, npc)  # status
    fresh = await vtt_table.connect("p1")
    assert fresh.state == p1.state
    for c in (gm, p1, obs, fresh):
        await c.close()
