"""The Python client against the real server: the mirror equals the server's
state, reconnection after a restart on the same data directory, retries that
do not apply twice, final close codes."""

from __future__ import annotations

from typing import Any

import pytest

from client_stub import AccessRevoked, Client, Forbidden, RuleError, Unauthenticated
from tests.helpers.live_table import ROOM, LiveTable

pytestmark = pytest.mark.timeout(60)


def client(t: LiveTable, key: str, **kw: Any) -> Client:
    kw.setdefault("backoff_initial", 0.05)
    kw.setdefault("backoff_max", 0.5)
    return Client(t.url, t.token(key), ROOM, **kw)


async def test_mirror_equals_server_and_fresh_client(table: LiveTable) -> None:
    async with client(table, "gm") as gm, client(table, "p1", proto="json") as p1:
        aline = next(c for c, v in gm.state["characters"].items() if v["name"] == "Aline")
        bast = next(c for c, v in gm.state["characters"].items() if v["name"] == "Bastien")
        await gm.command("damage", char=aline, amount=35)  # PE then PV: dying
        await gm.command("first_aid", char=bast, patient=aline, roll=2)  # fails, recorded
        await p1.command("stabilize", char=aline)
        await gm.command("combat_start", order=[bast, aline])
        await gm.command("end_turn", char=bast, round=1)
        await gm.command("combat_end")
        await gm.command("queue_rolls", rolls=[15])  # the +1 h Constitution check: stays
        await gm.command("advance_clock", seconds=3600)
        await gm.command("rest", char=bast, kind="short")
        v, state = await table.state()
        await p1.wait_version(v, timeout=5)
        async with client(table, "obs") as fresh:
            assert gm.version == p1.version == fresh.version == v
            assert gm.state == state
            assert p1.state == table.seen("p1", state) and fresh.state == table.seen("obs", state)
        assert gm.state["characters"][aline]["condition"] == "stable"
        assert gm.state["clock"] == 3600  # one end_turn inside round 1: no time


async def test_refusals_carry_code_and_message(table: LiveTable) -> None:
    async with client(table, "p1") as p1:
        aline = next(c for c, v in p1.state["characters"].items() if v["name"] == "Aline")
        with pytest.raises(Forbidden) as info:
            await p1.command("damage", char=aline, amount=1)
        assert info.value.code == "forbidden" and info.value.message
        with pytest.raises(RuleError):
            await p1.command("stabilize", char=aline)  # conscious: nothing to stabilize
        v, _ = await table.state()
        assert p1.version == v  # refused commands make no version


async def test_reconnects_after_server_restart_and_resumes(table: LiveTable) -> None:
    async with client(table, "gm") as gm:
        events: list[dict[str, Any]] = []
        gm.on_event(events.append)
        chars = list(gm.state["characters"])
        await gm.command("damage", char=chars[0], amount=2)
        await table.restart()
        # a command issued across the restart waits, is sent after the welcome
        ack = await gm.command("damage", char=chars[1], amount=3, timeout=20)
        assert gm.connections >= 2
        v, state = await table.state()
        assert ack["v"] == v and gm.version == v and gm.state == state
        async with client(table, "p2") as fresh:
            assert fresh.state == table.seen("p2", gm.state)
        assert [e["kind"] for e in events].count("damage") == 2


async def test_lost_ack_retry_is_not_applied_twice(table: LiveTable) -> None:
    async with client(table, "gm") as gm:
        char = next(iter(gm.state["characters"]))
        pe = gm.state["characters"][char]["pe"]
        original = gm._handle
        lost: list[str] = []

        def lossy(frame: dict[str, Any]) -> None:
            if frame.get("t") == "ack" and not lost:
                lost.append(frame["id"])  # the connection dies before the ack is read
                assert gm._ws is not None
                gm._ws.transport.abort()
                return
            original(frame)

        gm._handle = lossy  # type: ignore[method-assign]
        v0, _ = await table.state()
        ack = await gm.command("damage", char=char, amount=4, timeout=15)
        assert ack["id"] == lost[0] and ack.get("dup") is True
        v, state = await table.state()
        assert v == v0 + 1  # one version, one application
        assert state["characters"][char]["pe"] == pe - 4
        assert gm.state == state and gm.connections == 2


async def test_bad_token_is_final_and_not_echoed(table: LiveTable) -> None:
    c = Client(table.url, "not-a-token-xyz", ROOM, backoff_initial=0.05)
    with pytest.raises(Unauthenticated) as info:
        await c.connect(timeout=10)
    assert info.value.close_code == 4401 and "not-a-token-xyz" not in str(info.value)


async def test_rotated_token_closes_with_4403(table: LiveTable) -> None:
    async with client(table, "gm") as gm, client(table, "p3") as p3:
        ack = await gm.command("rotate_token", user=table.user("p3"))
        assert ack["result"]["token"]
        with pytest.raises(AccessRevoked):
            await p3.wait_closed()
        assert p3.closed
