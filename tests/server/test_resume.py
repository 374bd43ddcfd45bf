"""Resuming: hello with `since` (patches or state) and `sync` (patches or
snapshot), from memory and from the stored log (docs/protocol.md,
"hello -> welcome" and "sync")."""

from __future__ import annotations

import copy

import pytest

from tests.helpers.server import Table, create_table, on_both_transports, running_server

pytestmark = on_both_transports  # issue 22: the fast transport keeps the protocol


async def _damage(gm, t: Table, n: int) -> int:
    ack = None
    for _ in range(n):
        ack = await gm.ok("damage", {"char": t.chars["c_npc"], "amount": 0})
    return ack["v"]


async def test_since_gets_the_missing_patches(vtt_table: Table) -> None:
    t = vtt_table
    gm = await t.connect("gm")
    obs = await t.connect("obs")
    held_v, held = obs.v, copy.deepcopy(obs.state)
    await obs.close()
    await gm.ok("advance_clock", {"seconds": 30})
    last = await _damage(gm, t, 3)
    back = await t.connect("obs", "json", since=held_v, base=held)
    assert "patches" in back.welcome and "state" not in back.welcome
    assert [p["v"] for p in back.welcome["patches"]] == list(range(held_v + 1, last + 1))
    assert back.welcome["patches"][0]["t"] == "patch"
    assert back.v == last and back.state == back.seen(gm.state)
    # since == v: an empty list of patches
    same = await t.connect("obs", since=last, base=gm.state)
    assert same.welcome["patches"] == []
    for c in (gm, back, same):
        await c.close()


async def test_since_ahead_of_the_room_gets_the_state(vtt_table: Table) -> None:
    c = await vtt_table.connect("p1", since=10_000)
    assert "state" in c.welcome and c.welcome["v"] == 6
    await c.close()


async def test_since_too_far_behind_gets_the_state(tmp_path) -> None:
    async with running_server(tmp_path, max_resume_patches=3) as srv:
        await _since_too_far_behind(await create_table(srv.url))


async def _since_too_far_behind(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    await _damage(gm, vtt_table, 4)
    c = await vtt_table.connect("p1", since=2, base={})
    assert "state" in c.welcome and c.state == c.seen(gm.state)
    await c.close()
    await gm.close()


async def test_sync_answers_patches_or_snapshot(vtt_table: Table) -> None:
    gm = await vtt_table.connect("gm")
    await _damage(gm, vtt_table, 2)
    reply = await gm.sync(gm.v - 2)
    assert reply["t"] == "patches" and [p["v"] for p in reply["patches"]] == [gm.v - 1, gm.v]
    snap = await gm.sync(gm.v + 5)
    assert snap["t"] == "snapshot" and snap["v"] == gm.v and snap["state"] == gm.state
    await gm.close()


@pytest.mark.parametrize("in_memory", [2, 500])
async def test_since_after_a_restart(tmp_path, in_memory) -> None:
    """After a restart, the recent patches are back in memory (read from the
    log at load) and `since` gets them; a gap older than what memory holds
    gets the state in one read, never a replay of the log row by row. A
    player or observer resuming over patches loaded from the log gets them
    too, as their views (stored with each version)."""
    data = tmp_path / "data"
    async with running_server(data, recent_patches_in_memory=in_memory) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        held_v, held = gm.v, copy.deepcopy(gm.state)
        obs = await t.connect("obs")
        obs_v, obs_held = obs.v, copy.deepcopy(obs.state)
        await obs.close()
        last = await _damage(gm, t, 5)
        expected = copy.deepcopy(gm.state)
        await gm.close()
    async with running_server(data, recent_patches_in_memory=in_memory) as srv:
        t.url = srv.url
        back = await t.connect("gm", since=held_v, base=held)
        assert back.state == expected
        reply = await back.sync(held_v)
        if in_memory >= last - held_v:
            assert [p["v"] for p in back.welcome["patches"]] == list(range(held_v + 1, last + 1))
            assert [p["v"] for p in reply["patches"]] == list(range(held_v + 1, last + 1))
        else:
            assert "patches" not in back.welcome and back.welcome["v"] == last
            assert reply["t"] == "snapshot" and reply["v"] == last
            assert reply["state"] == expected
        obs = await t.connect("obs", since=obs_v, base=obs_held)
        assert obs.state == obs.seen(expected)
        if in_memory >= last - obs_v:
            assert [p["v"] for p in obs.welcome["patches"]] == list(range(obs_v + 1, last + 1))
            assert any(p["events"] for p in obs.welcome["patches"])
        else:
            assert "patches" not in obs.welcome
        await back.close()
        await obs.close()


async def test_a_gap_is_filled_by_sync(vtt_table: Table) -> None:
    """A client that misses a patch asks `sync` and catches up (the helper
    does what a client must: on a gap, sync since its own version)."""
    gm = await vtt_table.connect("gm")
    obs = await vtt_table.connect("obs")
    before_v, before = obs.v, copy.deepcopy(obs.state)
    a = await gm.ok("damage", {"char": vtt_table.chars["c_p1"], "amount": 2})
    await obs.wait_v(a["v"])
    obs.v, obs.state = before_v, before  # as if patch a had been lost
    b = await gm.ok("damage", {"char": vtt_table.chars["c_p1"], "amount": 2})
    await obs.wait_v(b["v"])
    assert obs.gaps == [(before_v, b["v"])]
    assert obs.state == obs.seen(gm.state)
    await gm.close()
    await obs.close()
