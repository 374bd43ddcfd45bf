"""Held subscribers' snapshots beside the room's queue (issue 36, big
rooms): a command waits for one snapshot at most, not for every player a
patch before it held back, and a held player's snapshot is rendered once,
at the version of its turn. Every mirror still equals a fresh hello."""

from __future__ import annotations

import asyncio
from collections import deque
from types import SimpleNamespace
from typing import Any

from rules.testing import SHEET
from sync_server.hosting.room_host import RoomHost
from sync_server.hosting.work import Resync
from tests.helpers.server import connect, create_table, running_server


def _order(stale: list[str], items: list[str], turn: bool) -> list[str]:
    """What `RoomHost._next` takes, in order, until both are empty (each
    snapshot taken out of the held set as `_resync` does)."""
    host: Any = SimpleNamespace(
        _stale=dict.fromkeys(stale), _items=deque(items), _snapshot_turn=turn
    )
    taken = []
    while host._stale or host._items:
        item = RoomHost._next(host)
        if isinstance(item, Resync):
            del host._stale[item.sink]
            taken.append(f"snapshot {item.sink}")
        else:
            taken.append(item)
    return taken


def test_a_command_waits_for_one_snapshot_at_most() -> None:
    # After the century (an item), 3 players held; the undo and a heal queued.
    assert _order(["p1", "p2", "p3"], ["undo", "heal"], turn=True) == [
        "snapshot p1",
        "undo",
        "snapshot p2",
        "heal",
        "snapshot p3",
    ]
    # Right after a snapshot, the queue goes first; with no item, snapshots.
    assert _order(["p1", "p2"], ["undo"], turn=False) == ["undo", "snapshot p1", "snapshot p2"]
    assert _order(["p1", "p2"], [], turn=False) == ["snapshot p1", "snapshot p2"]


async def test_pipelined_commands_over_the_cap_keep_every_mirror_whole(tmp_path) -> None:
    """Eight players each owning a character, the cap of views at 2: a
    combat start holds most of them back; the GM's next commands are sent
    without waiting, so they pass the held players' snapshots. Each player
    gets contiguous patches or a snapshot that covers them, never a gap,
    at most one snapshot per hold, and ends equal to a fresh hello."""
    caps = {"max_view_classes_per_patch": 2, "max_stored_views_per_version": 2}
    async with running_server(tmp_path, rate=None, **caps) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        players = []
        for i in range(8):
            user = (await gm.ok("add_user", {"name": f"P{i}", "role": "player"}))["result"]
            args = {**SHEET, "name": f"Hero{i}", "owner": user["user"], "shown": "full"}
            char = (await gm.ok("add_character", args))["result"]["char"]
            players.append((await connect(srv.url, user["token"], t.room), char, user["token"]))
        order = [char for _, char, _ in players]
        for _ in range(3):
            sent = [await gm.submit("combat_start", {"order": order})]
            sent.append(await gm.submit("end_turn", {"char": order[0]}))
            sent.append(await gm.submit("advance_clock", {"seconds": 600}))
            sent.append(await gm.submit("undo", {}))
            sent.append(await gm.submit("combat_end", {}))
            for fut in sent:
                async with asyncio.timeout(10):
                    assert (await fut)["t"] == "ack"
        last = (await gm.ok("update_room", {"name": "after"}))["v"]
        snapshots = 0
        for c, _, token in players:
            await c.wait_v(last)
            assert c.gaps == [], c.user
            got = [f["v"] for f in c.frames if f["t"] == "snapshot"]
            assert got == sorted(set(got)), c.user  # each version at most once, in order
            snapshots += len(got)
            fresh = await connect(srv.url, token, t.room)
            try:
                assert c.state == fresh.state, c.user
            finally:
                await fresh.close()
            assert c.state == c.seen(gm.state), c.user
        assert snapshots  # the cap held some back: the path under test ran
        await gm.close()
        for c, _, _ in players:
            await c.close()
