"""Every operation's role rule, through the server: who may, who gets
`forbidden` (docs/operations.md, "Operations"). The rules engine decides; these
tests prove the server hands it the right actor for every session."""

from __future__ import annotations

from typing import Any

import pytest

from sync_server import Server
from tests.helpers.server import SHEET, Table, connect_admin, create_table, running_server

# (op, args builder, who may): "G" GM only, "O" GM or the owner of `char`
# (c_p1, owned by p1), "U" untend: GM or owner of the patient or its
# healer, "A" admin only.
ROLE_TABLE: list[tuple[str, Any, str]] = [
    ("update_room", lambda t: {"name": "Renamed table"}, "G"),
    ("add_user", lambda t: {"name": "Extra", "role": "player"}, "G"),
    ("remove_user", lambda t: {"user": t.users["obs"]}, "G"),
    ("rotate_token", lambda t: {"user": t.users["obs"]}, "G"),
    ("add_character", lambda t: {**SHEET, "name": "Newcomer"}, "G"),
    ("update_character", lambda t: {"char": t.chars["c_p1"], "set": {"name": "Alina"}}, "G"),
    ("remove_character", lambda t: {"char": t.chars["c_npc"]}, "G"),
    ("combat_start", lambda t: {"order": [t.chars["c_p1"], t.chars["c_p2"]]}, "G"),
    ("combat_end", lambda t: {}, "G"),
    ("set_order", lambda t: {"order": [t.chars["c_p2"], t.chars["c_p1"]]}, "G"),
    ("roll_initiative", lambda t: {"chars": [t.chars["c_p1"], t.chars["c_p2"]]}, "G"),
    ("advance_clock", lambda t: {"seconds": 60}, "G"),
    ("damage", lambda t: {"char": t.chars["c_p1"], "amount": 1}, "G"),
    ("heal", lambda t: {"char": t.chars["c_p1"], "amount": 1}, "G"),
    ("ability_damage", lambda t: {"char": t.chars["c_p1"], "ability": "str", "amount": 1}, "G"),
    ("ability_restore", lambda t: {"char": t.chars["c_p1"], "ability": "str", "amount": 1}, "G"),
    ("queue_rolls", lambda t: {"rolls": [10, 11]}, "G"),
    ("undo", lambda t: {}, "G"),
    ("end_turn", lambda t: {"char": t.chars["c_p1"]}, "O"),
    ("first_aid", lambda t: {"char": t.chars["c_p1"], "patient": t.chars["c_p2"]}, "O"),
    ("stabilize", lambda t: {"char": t.chars["c_p1"]}, "O"),
    ("stay_in_fight", lambda t: {"char": t.chars["c_p1"]}, "O"),
    ("tend", lambda t: {"char": t.chars["c_p1"], "patient": t.chars["c_p2"]}, "O"),
    ("rest", lambda t: {"char": t.chars["c_p1"], "kind": "short"}, "O"),
    ("stop_rest", lambda t: {"char": t.chars["c_p1"]}, "O"),
    ("untend", lambda t: {"patient": t.chars["c_p1"]}, "U"),
    ("create_room", lambda t: {"room": "other", "name": "Other"}, "A"),
    ("delete_room", lambda t: {"room": t.room}, "A"),
    ("reissue_gm_link", lambda t: {"room": t.room}, "A"),
    (
        "import_room",
        lambda t: {"room": "imp", "upload": t.room, "part": 0, "parts": 2, "data": "{"},
        "A",
    ),
]

MAY = {  # who may send each kind of op (others get forbidden)
    "G": {"gm"},
    "O": {"gm", "p1"},
    "U": {"gm", "p1"},
    "A": {"admin"},
}


async def test_everyone_without_the_role_gets_forbidden(vtt_table: Table) -> None:
    clients = {who: await vtt_table.connect(who) for who in ("gm", "p1", "p2", "obs")}
    clients["admin"] = await connect_admin(vtt_table.url)
    v = clients["gm"].v
    failures = []
    for op, build, kind in ROLE_TABLE:
        for who, client in clients.items():
            if who in MAY[kind]:
                continue
            # (admin sessions have no room: room ops are forbidden there too)
            reply = await client.cmd(op, build(vtt_table))
            if reply.get("code") != "forbidden":
                failures.append((op, who, reply))
    assert not failures
    # nothing changed
    fresh = await vtt_table.connect("obs")
    assert fresh.welcome["v"] == v
    for c in (*clients.values(), fresh):
        await c.close()


async def test_players_may_not_supply_their_own_die(vtt_table: Table) -> None:
    p1 = await vtt_table.connect("p1")
    args = {"char": vtt_table.chars["c_p1"], "patient": vtt_table.chars["c_p2"], "roll": 20}
    assert (await p1.cmd("first_aid", args))["code"] == "forbidden"
    await p1.close()


async def test_player_cannot_act_for_anothers_character(vtt_table: Table) -> None:
    p2 = await vtt_table.connect("p2")
    for op, build, kind in ROLE_TABLE:
        if kind == "O":
            assert (await p2.cmd(op, build(vtt_table)))["code"] == "forbidden", op
    await p2.close()


@pytest.mark.parametrize(("op", "build", "kind"), ROLE_TABLE, ids=[r[0] for r in ROLE_TABLE])
async def test_those_with_the_role_are_not_forbidden(
    vtt_server: Server, op: str, build: Any, kind: str
) -> None:
    for who in sorted(MAY[kind]):
        table = await create_table(vtt_server.url, room=f"{op}-{who}")
        if who == "admin":
            client = await connect_admin(vtt_server.url)
        else:
            client = await table.connect(who)
        reply = await client.cmd(op, build(table))
        assert reply.get("code") != "forbidden", (op, who, reply)
        assert reply["t"] == "ack" or reply["code"] in ("rule", "conflict"), (op, who, reply)
        await client.close()


def test_the_role_table_covers_every_op() -> None:
    import rules

    ops = {op for op, _, _ in ROLE_TABLE}
    assert ops == set(rules.OPS) | set(rules.LOG_OPS) | set(rules.ADMIN_OPS)


async def test_an_observer_may_send_nothing_and_owns_no_character(tmp_path) -> None:
    """Issue 5: an observer sending anything -> forbidden, also for ops on the
    NPC the GM tried to give it (refused: an observer owns no character,
    docs/rules.md Refusals), and with a GM's `roll`. (No rate limit here:
    the observer sends ~50 commands at once.)"""
    async with running_server(tmp_path, rate=None) as srv:
        await _observer_may_send_nothing(await create_table(srv.url))


async def _observer_may_send_nothing(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    c = vtt_table.chars["c_npc"]
    given = await gm.cmd("update_character", {"char": c, "set": {"owner": vtt_table.users["obs"]}})
    assert given["code"] == "rule" and "is an observer and plays no character" in given["message"]
    v = gm.v
    failures = []
    for op, build, _kind in ROLE_TABLE:
        # One connection per op: the tries of all ops together exceed an
        # observer's rate-limit burst, which would answer rate_limited instead.
        obs = await vtt_table.connect("obs")
        tries = [build(vtt_table)]
        if "char" in tries[0]:
            tries.append({**tries[0], "char": c})  # acting for the NPC it was refused
        if op == "first_aid":
            tries.append({**tries[-1], "roll": 20})
        for args in tries:
            reply = await obs.cmd(op, args)
            if reply.get("code") != "forbidden":
                failures.append((op, args, reply))
        await obs.close()
    assert not failures
    fresh = await vtt_table.connect("obs")
    assert fresh.v == v
    for client in (gm, fresh):
        await client.close()


async def test_players_cannot_escalate_through_users_or_their_own_sheet(vtt_table: Table) -> None:
    p1 = await vtt_table.connect("p1")
    mine = vtt_table.chars["c_p1"]
    attempts = [
        ("add_user", {"name": "Me again", "role": "gm"}),
        ("rotate_token", {"user": vtt_table.users["gm"]}),
        ("remove_user", {"user": vtt_table.users["gm"]}),
        ("update_character", {"char": mine, "set": {"pv": 99, "pv_max": 99}}),
        ("update_character", {"char": vtt_table.chars["c_npc"], "set": {"owner": p1.user}}),
        ("heal", {"char": mine, "amount": 5, "stabilize": True}),
        ("queue_rolls", {"rolls": [20, 20, 20]}),
        ("first_aid", {"char": mine, "patient": mine, "roll": 20}),
        ("end_turn", {"char": vtt_table.chars["c_p2"]}),
        ("rest", {"char": vtt_table.chars["c_npc"], "kind": "night"}),
    ]
    for op, args in attempts:
        reply = await p1.cmd(op, args)
        assert reply.get("code") == "forbidden", (op, reply)
    await p1.close()
