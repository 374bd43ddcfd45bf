"""Issue 22: a room keeps current the affordances of the viewers who are
connected, not of every registered user. A player's class is worked out
when they are shown the room (a welcome) and forgotten when their last
session leaves; the GMs' one class while any GM is connected. What a
client is shown stays exact throughout: each mirror equals a fresh
`rules.affordances` of the GM's state (RawClient.seen), and with
check_invariants (every server test) the room core compares every kept
class with a fresh computation at every command."""

from __future__ import annotations

import copy

from sync_server.core.afford import AFFORDANCES
from sync_server.testing.server import connect
from tests.helpers.server import create_table, running_server


def known(srv, room: str = "r1") -> set:
    afford = srv.rooms.hosts[room].core.afford
    assert afford is not None
    return set(afford.kept)


async def test_only_connected_viewers_affordances_are_kept_current(tmp_path) -> None:
    async with running_server(tmp_path, rate=None) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        p1 = await t.connect("p1")
        host = srv.rooms.hosts["r1"]
        await host.barrier()
        # p2 is a registered player, not connected: nothing is worked out for them.
        assert known(srv) == {"gm", ("player", t.users["p1"])}

        await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 60})  # p1's falls
        await p1.wait_v(gm.v)
        assert p1.state == p1.seen(gm.state)
        assert AFFORDANCES in p1.state

        await p1.close()
        await host.barrier()
        assert known(srv) == {"gm"}  # their last session left

        await gm.ok("heal", {"char": t.chars["c_p1"], "amount": 5, "stabilize": True})
        again = await t.connect("p1")  # shown the room again: worked out, whole
        await host.barrier()
        assert known(srv) == {"gm", ("player", t.users["p1"])}
        assert again.state == again.seen(gm.state)
        await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 100})
        await again.wait_v(gm.v)
        assert again.state == again.seen(gm.state)  # and kept current since
        await again.close()
        await gm.close()


async def test_a_class_stays_while_any_of_its_sessions_is_open(tmp_path) -> None:
    """Two screens of one player; two GMs (one class): closing one keeps it."""
    async with running_server(tmp_path, rate=None) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        second_gm_token = (await gm.ok("add_user", {"name": "Co-MJ", "role": "gm"}))["result"][
            "token"
        ]
        t.tokens["gm2"] = second_gm_token
        gm2 = await t.connect("gm2")
        a, b = await t.connect("p1"), await t.connect("p1")
        host = srv.rooms.hosts["r1"]
        await a.close()
        await gm.close()
        await host.barrier()
        assert known(srv) == {"gm", ("player", t.users["p1"])}
        await gm2.ok("damage", {"char": t.chars["c_p1"], "amount": 60})
        await b.wait_v(gm2.v)
        assert b.state == b.seen(gm2.state)
        await b.close()
        await gm2.close()
        await host.barrier()
        assert known(srv) == set()


async def test_a_resume_across_versions_made_while_the_class_was_forgotten(tmp_path) -> None:
    """p1 leaves (its class forgotten), the GM changes what p1 may do, p1
    resumes with `since` from memory: the last patch sets p1's affordances
    whole (those patches carried no ops on them); with `since` at the
    room's version, the class is simply kept current again."""
    async with running_server(tmp_path, rate=None) as srv:
        t = await create_table(srv.url)
        gm, p1 = await t.connect("gm"), await t.connect("p1")
        await gm.ok("advance_clock", {"seconds": 6})
        await p1.wait_v(gm.v)
        held, since = copy.deepcopy(p1.state), p1.v
        await p1.close()
        await srv.rooms.hosts["r1"].barrier()
        await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 60})  # p1 may stabilize
        await gm.ok("damage", {"char": t.chars["c_p2"], "amount": 1})
        back = await connect(srv.url, t.tokens["p1"], "r1", since=since, base=held)
        assert "patches" in back.welcome and len(back.welcome["patches"]) == 2
        assert back.state == back.seen(gm.state)
        held, since = copy.deepcopy(back.state), back.v
        await back.close()
        await srv.rooms.hosts["r1"].barrier()
        again = await connect(srv.url, t.tokens["p1"], "r1", since=since, base=held)
        assert again.welcome["patches"] == []
        await gm.ok("heal", {"char": t.chars["c_p1"], "amount": 5, "stabilize": True})
        await again.wait_v(gm.v)
        assert again.state == again.seen(gm.state)
        await again.close()
        await gm.close()
