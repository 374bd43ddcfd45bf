"""Limits: per-connection rate limit, slow consumers (1013), connections
per user and per room (docs/protocol.md, "Limits"; issue 5)."""

from __future__ import annotations

import asyncio
import copy
import socket

import msgpack
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from sync_server.core.limits import PLAYER_BURST
from sync_server.core.ratelimit import RateSpec, TokenBucket, reply_cost
from sync_server.wire.codec import MSGPACK, packb
from tests.helpers.server import (
    SHEET,
    WAIT,
    Table,
    create_table,
    hello_refused,
    on_both_transports,
    running_server,
)

pytestmark = on_both_transports  # issue 22: the fast transport keeps the protocol


def test_token_bucket_allows_the_burst_then_the_rate() -> None:
    b = TokenBucket(RateSpec(20, 40))
    assert sum(b.allow(0.0) for _ in range(100)) == 40
    assert not b.allow(0.01)
    assert sum(b.allow(1.0) for _ in range(100)) == 20  # a second refills 20
    assert RateSpec.parse("20") == RateSpec(20, 40)
    assert RateSpec.parse("5/7") == RateSpec(5, 7)
    assert RateSpec.parse("none") is None


async def test_players_are_rate_limited_not_disconnected_gms_are_not(vtt_table: Table) -> None:
    p1 = await vtt_table.connect("p1")
    gm = await vtt_table.connect("gm")
    cid = vtt_table.chars["c_p1"]
    futs = [await p1.submit("stop_rest", {"char": cid}) for _ in range(80)]
    replies = await asyncio.gather(*futs)
    limited = [r for r in replies if r.get("code") == "rate_limited"]
    # The burst (40) less what the hello cost (1, and its welcome's bytes),
    # then 20/s: most of the rest is refused.
    budget = int(PLAYER_BURST - 1 - reply_cost(len(packb(p1.welcome))))
    assert 80 - budget - 20 <= len(limited) <= 80 - budget
    assert all(r["message"] for r in limited)
    assert [r["code"] for r in replies[:budget]] == ["rule"] * budget  # the burst went through
    # the GM, meanwhile, is not limited at all
    gm_replies = await asyncio.gather(
        *[await gm.submit("damage", {"char": cid, "amount": 0}) for _ in range(100)]
    )
    assert all(r["t"] == "ack" for r in gm_replies)
    # the player's connection still works once the bucket refills
    async with asyncio.timeout(WAIT):
        while (await p1.cmd("stop_rest", {"char": cid}))["code"] == "rate_limited":
            await asyncio.sleep(0.05)
    await p1.close()
    await gm.close()


async def test_rates_are_server_options(tmp_path) -> None:
    # The GM's bucket is per user: create_table's hello and six commands
    # (about 8 of the 12) and this hello come out of the same burst.
    async with running_server(tmp_path, rate=None, gm_rate=RateSpec(1, 12)) as srv:
        t = await create_table(srv.url)
        gm, p1 = await t.connect("gm"), await t.connect("p1")
        gm_r = await asyncio.gather(*[await gm.submit("combat_end") for _ in range(20)])
        p1_r = await asyncio.gather(
            *[await p1.submit("stop_rest", {"char": t.chars["c_p1"]}) for _ in range(60)]
        )
        assert sum(r.get("code") == "rate_limited" for r in gm_r) >= 10
        assert not any(r.get("code") == "rate_limited" for r in p1_r)
        await gm.close()
        await p1.close()


async def test_connections_per_user_and_room_are_bounded(tmp_path) -> None:
    async with running_server(
        tmp_path, max_connections_per_user=2, max_connections_per_room=4
    ) as srv:
        t = await create_table(srv.url)
        p1a, p1b = await t.connect("p1"), await t.connect("p1")
        hello = {"t": "hello", "proto": 1, "token": t.tokens["p1"], "room": "r1"}
        frame, code = await hello_refused(srv.url, hello)
        assert (frame["code"], code) == ("rate_limited", 4429)
        gm, obs = await t.connect("gm"), await t.connect("obs")
        frame, code = await hello_refused(srv.url, {**hello, "token": t.tokens["p2"]})
        assert code == 4429  # the room is full
        await p1b.close()
        again = await t.connect("p1")  # a slot is free again
        for c in (p1a, again, gm, obs):
            await c.close()


async def test_a_slow_reader_is_closed_1013_without_delaying_others(tmp_path) -> None:
    async with running_server(tmp_path, outbox_max_bytes=256 * 1024) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        for i in range(24):  # a state of ~20 KB, so each snapshot is big
            await gm.ok("add_character", {**SHEET, "name": f"{i:02d}" + "n" * 98})
        p1 = await t.connect("p1")
        # the slow client: a GM screen with a tiny receive buffer that stops reading
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", srv.port))
        slow = await ws_connect(
            srv.url, sock=sock, subprotocols=[MSGPACK], max_queue=1, max_size=None
        )
        await slow.send(
            msgpack.packb({"t": "hello", "proto": 1, "token": t.tokens["gm"], "room": "r1"})
        )
        welcome = msgpack.unpackb(await slow.recv())
        held_v, held = welcome["v"], copy.deepcopy(welcome["state"])
        for _ in range(400):
            await slow.send(msgpack.packb({"t": "sync", "since": 10**9}))  # a snapshot each
        async with asyncio.timeout(WAIT):
            while srv.metrics.slow_closes._value.get() < 1:
                await asyncio.sleep(0.02)
        # others are served promptly while the slow one is stuck
        async with asyncio.timeout(2):
            ack = await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 1})
            await p1.wait_v(ack["v"])
        # the slow client reads on: what was sent, then the 1013 close
        async with asyncio.timeout(WAIT):
            try:
                while True:
                    await slow.recv()
            except ConnectionClosed:
                pass
        assert slow.close_code == 1013
        # and it can resume with since
        back = await t.connect("gm", since=held_v, base=held)
        assert back.state == gm.state
        for c in (gm, p1, back):
            await c.close()


def test_every_limit_has_one_home_a_limits_field_or_a_stated_fixed_kind() -> None:
    """Each constant of sync_server/core/limits.py is either the default of
    a `Limits` field (a server reads it from its `Limits`) or listed in
    `FIXED` with the reason it is the same for every server; none both."""
    import ast
    from pathlib import Path

    from sync_server.core import limits

    tree = ast.parse(Path(limits.__file__).read_text(encoding="utf-8"))
    derived = {"FIXED", "LIMIT_FIELDS"}
    constants = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id.isupper() and target.id not in derived
    } | {  # re-exported from the wire and the catalog (`X as X`)
        alias.asname
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname is not None and alias.asname == alias.name
    }
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Limits"]
    defaults = {
        n.value.id
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.value, ast.Name)
    }
    assert not defaults & set(limits.FIXED), defaults & set(limits.FIXED)
    assert constants - defaults - set(limits.FIXED) == set()
    assert set(limits.FIXED) <= constants  # nothing listed that is gone


async def test_the_server_reads_its_recent_tokens_bound_from_its_limits(tmp_path) -> None:
    from sync_server.core.limits import Limits

    async with running_server(tmp_path, limits=Limits(max_recent_tokens=3)) as srv:
        assert srv.tokens.max_items == 3
