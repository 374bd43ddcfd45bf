"""Many clients at once: every mirror ends equal to the state a fresh client
receives, versions are contiguous, every ack's version carries its own
command, and a full scene is seen live by everyone (issue 3)."""

from __future__ import annotations

import asyncio
import contextlib
import random

from sync_server import Server
from tests.helpers.server import Client, Table, connect_admin, create_table, running_server


async def _gm_burst(gm: Client, t: Table, n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    futs = []
    for _ in range(n):
        cid = rng.choice(list(t.chars.values()))
        op, args = rng.choice(
            [
                ("damage", {"char": cid, "amount": rng.randint(0, 4)}),
                ("heal", {"char": cid, "amount": rng.randint(0, 4)}),
                ("advance_clock", {"seconds": rng.randint(1, 900)}),
                ("queue_rolls", {"rolls": [rng.randint(1, 20)]}),
            ]
        )
        futs.append(await gm.submit(op, args))
    return list(await asyncio.gather(*futs))


async def _player_burst(p: Client, cid: str, n: int) -> list[dict]:
    replies = []
    for i in range(n):
        op = (
            ("rest", {"char": cid, "kind": "short"}) if i % 2 == 0 else ("stop_rest", {"char": cid})
        )
        replies.append(await p.cmd(*op))
    return replies


async def test_concurrent_clients_converge_on_the_same_state(vtt_server: Server) -> None:
    t = await create_table(vtt_server.url)
    gm = await t.connect("gm")
    gm2 = await t.connect("gm", "json")  # the GM's second screen
    p1 = await t.connect("p1")
    p2 = await t.connect("p2", "json")
    obs = await t.connect("obs")
    obs_json = await t.connect("obs", "json")
    everyone = [gm, gm2, p1, p2, obs, obs_json]
    results = await asyncio.gather(
        _gm_burst(gm, t, 120, seed=1),
        _gm_burst(gm2, t, 60, seed=2),
        _player_burst(p1, t.chars["c_p1"], 20),
        _player_burst(p2, t.chars["c_p2"], 20),
    )
    acks = [r for rs in results for r in rs if r["t"] == "ack"]
    errors = [r for rs in results for r in rs if r["t"] == "error"]
    assert all(e["code"] in ("rule", "conflict") for e in errors), errors
    final = max(a["v"] for a in acks)
    assert sorted(a["v"] for a in acks) == list(range(7, final + 1))  # one version each
    for c in everyone:
        await c.wait_v(final)
    fresh = await t.connect("gm")
    assert fresh.welcome["v"] == final
    for c in everyone:
        assert c.v == final and c.gaps == []
        assert c.state == c.seen(fresh.state)
        assert [p["v"] for p in c.patches] == list(range(7, final + 1))
    by_v = {p["v"]: p for p in gm.patches}  # the GM sees every command's id
    for a in acks:
        assert by_v[a["v"]]["id"] == a["id"]
    assert all(p["id"] is None for p in obs.patches)  # an observer sends none (views)
    for c in (*everyone, fresh):
        await c.close()


async def test_rooms_are_independent(vtt_server: Server) -> None:
    a = await create_table(vtt_server.url, room="a")
    b = await create_table(vtt_server.url, room="b")
    ga, gb = await a.connect("gm"), await b.connect("gm")
    oa, ob = await a.connect("obs"), await b.connect("obs")
    await asyncio.gather(_gm_burst(ga, a, 40, seed=3), _gm_burst(gb, b, 10, seed=4))
    await oa.wait_v(46)
    await ob.wait_v(16)
    assert all(p["v"] <= 46 for p in oa.patches) and ob.v == 16
    assert oa.state["room"] == "a" and ob.state["room"] == "b"
    for c in (ga, gb, oa, ob):
        await c.close()


async def test_a_full_scene_is_seen_live_by_everyone(vtt_table: Table) -> None:
    """Damage to dying, first aid, then the clock through the hourly checks."""
    t = vtt_table
    gm, p1, p2 = await t.connect("gm"), await t.connect("p1"), await t.connect("p2", "json")
    obs = await t.connect("obs", "json")
    aline, bruno = t.chars["c_p1"], t.chars["c_p2"]
    await gm.ok("damage", {"char": aline, "amount": 35})
    assert gm.state["characters"][aline]["condition"] == "dying"
    await gm.ok("queue_rolls", {"rolls": [12]})  # Bruno's medicine check: 12 + 5 = 17 >= 15
    aid = await p2.ok("first_aid", {"char": bruno, "patient": aline})
    await gm.wait_v(aid["v"])
    assert gm.state["characters"][aline]["condition"] == "stable"
    # three hourly Constitution checks: 10 + 2 = 12 (stays), 9 + 2 = 11 (stays), 19 + 2 = 21 (wakes)
    await gm.ok("queue_rolls", {"rolls": [10, 9, 19]})
    clock = await gm.ok("advance_clock", {"seconds": 3 * 3600})
    for c in (gm, p1, p2, obs):
        await c.wait_v(clock["v"])
        me = c.state["characters"][aline]
        assert (me["condition"], me["pv"]) == ("conscious", 1)
        assert c.state["clock"] == 3 * 3600
    rolls = [e for p in obs.patches for e in p["events"] if e["kind"] == "roll"]
    assert [r["d20"] for r in rolls] == [12, 10, 9, 19]
    conditions = [
        (e["from"], e["to"]) for p in obs.patches for e in p["events"] if e["kind"] == "condition"
    ]
    assert conditions == [("conscious", "dying"), ("dying", "stable"), ("stable", "conscious")]
    for c in (gm, p1, p2, obs):
        await c.close()


async def test_fresh_tokens_open_sessions_at_once_while_rooms_churn(tmp_path) -> None:
    async with running_server(tmp_path, room_idle_unload_seconds=-1.0) as srv:
        await _fresh_tokens_while_rooms_churn(srv)


async def _fresh_tokens_while_rooms_churn(vtt_server: Server) -> None:
    """Tables created side by side (their writes group-committed together),
    every fresh token used at once, rooms deleted and re-created under the
    same ids, and idle rooms unloaded as fast as the loop allows: every
    hello with a token the server just handed out is welcomed."""
    stop = asyncio.Event()

    async def unloader() -> None:
        while not stop.is_set():
            await vtt_server.rooms.unload_idle()
            await asyncio.sleep(0)

    async def table_round(room: str, admin: Client) -> None:
        t = await create_table(vtt_server.url, room=room)
        sessions = await asyncio.gather(
            *(t.connect(who, proto) for who in t.tokens for proto in ("msgpack", "json"))
        )
        assert [s.user for s in sessions] == [t.users[w] for w in t.tokens for _ in "ab"]
        for s in sessions:
            await s.close()
        await admin.ok("delete_room", {"room": room})

    sweeping = asyncio.create_task(unloader())
    admin = await connect_admin(vtt_server.url)
    try:
        for _ in range(3):
            await asyncio.gather(*(table_round(f"churn{k}", admin) for k in range(6)))
    finally:
        stop.set()
        await admin.close()
        with contextlib.suppress(Exception):
            await sweeping
    assert sweeping.exception() is None  # the unloading never failed
