"""The Python client's protocol corners against an in-process stand-in server
(tests/helpers/fake_server.py): lost patches, dropped connections, final close
codes, typed errors, both subprotocols."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from client_stub import Client, CommandError, NotFound, Unauthenticated
from client_stub.errors import FINAL_CLOSE_CODES, AccessRevoked, RoomDeleted
from tests.helpers.fake_server import FakeServer

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def fake() -> AsyncIterator[FakeServer]:
    srv = await FakeServer().start()
    srv.add_character("Aline")
    srv.add_character("Brom")
    yield srv
    await srv.stop()


def fast(srv: FakeServer, token: str | None = None, **kw: Any) -> Client:
    kw.setdefault("backoff_initial", 0.02)
    kw.setdefault("backoff_max", 0.2)
    return Client(srv.url, token or srv.gm_token, srv.room_id, **kw)


@pytest.mark.parametrize("proto", ["msgpack", "json"])
async def test_welcome_mirror_and_command(fake: FakeServer, proto: str) -> None:
    async with fast(fake, proto=proto) as c:
        assert c.state == fake.state and c.version == fake.version
        assert (c.user, c.role) == ("u1", "gm")
        ack = await c.command("damage", char="c1", amount=3)
        assert ack["t"] == "ack" and ack["v"] == fake.version
        # the ack resolves once the mirror holds its version
        assert c.version == ack["v"] and c.state == fake.state
        assert c.state["characters"]["c1"]["pe"] == 12


async def test_refusals_are_typed(fake: FakeServer) -> None:
    async with fast(fake) as c:
        with pytest.raises(NotFound) as info:
            await c.command("damage", {"char": "nobody", "amount": 1})
        assert info.value.code == "not_found" and "nobody" in info.value.message
        with pytest.raises(CommandError) as info:
            await c.command("damage", char="c1", amount=1, expect=0)
        assert info.value.code == "conflict"
        assert c.pending_commands == []


async def test_gap_triggers_sync(fake: FakeServer) -> None:
    async with fast(fake) as a, fast(fake, proto="json") as b:
        fake.drop_next_patch = 1  # nobody receives the next patch
        await a.command("damage", char="c1", amount=2)  # the ack reveals the gap
        await a.command("heal", char="c1", amount=1)
        await b.wait_version(fake.version, timeout=5)
        assert a.state == b.state == fake.state
        syncs = [f for f in fake.received if f.get("t") == "sync"]
        assert syncs, "a gap must send sync"


async def test_patches_iterator_and_callbacks(fake: FakeServer) -> None:
    async with fast(fake) as c:
        seen_patches: list[int] = []
        seen_events: list[str] = []
        c.on_patch(lambda p: seen_patches.append(p["v"]))
        c.on_event(lambda e: seen_events.append(e["kind"]))
        iterated: list[dict[str, Any]] = []

        async def consume() -> None:
            async for patch in c.patches():
                iterated.append(patch)
                if len(iterated) == 2:
                    return

        task = asyncio.create_task(consume())
        await asyncio.sleep(0)
        await c.command("damage", char="c1", amount=1)
        await c.command("damage", char="c2", amount=1)
        await asyncio.wait_for(task, 5)
        assert [p["v"] for p in iterated] == seen_patches == [fake.version - 1, fake.version]
        assert seen_events.count("damage") == 2


async def test_resume_with_since_after_drop(fake: FakeServer) -> None:
    async with fast(fake) as c:
        await c.command("damage", char="c1", amount=1)
        await fake.kill_connections()
        ack = await c.command("damage", char="c1", amount=1, timeout=5)
        assert c.connections == 2 and c.state == fake.state and ack["v"] == fake.version
        hellos = [f for f in fake.received if f.get("t") == "hello"]
        assert hellos[-1]["since"] == fake.version - 1
        assert "token" in hellos[-1]


async def test_lost_ack_is_retried_with_same_id_and_not_applied_twice(fake: FakeServer) -> None:
    async with fast(fake) as c:
        original = c._handle
        dropped: list[str] = []

        def lossy(frame: dict[str, Any]) -> None:
            if frame.get("t") == "ack" and not dropped:
                dropped.append(frame["id"])  # the ack is lost with the connection
                assert c._ws is not None
                c._ws.transport.abort()
                return
            original(frame)

        c._handle = lossy  # type: ignore[method-assign]
        before = fake.version
        ack = await c.command("damage", char="c1", amount=4, timeout=5)
        assert ack["id"] == dropped[0] and ack.get("dup") is True
        assert fake.version == before + 1  # applied once
        cmds = [f for f in fake.received if f.get("t") == "cmd"]
        assert [f["id"] for f in cmds] == [dropped[0], dropped[0]]
        assert c.state == fake.state and c.state["characters"]["c1"]["pe"] == 11


async def test_command_while_server_unreachable_waits_and_is_sent(fake: FakeServer) -> None:
    async with fast(fake) as c:
        port = fake.port
        await fake.stop()
        task = asyncio.create_task(c.command("damage", char="c1", amount=1, timeout=10))
        await asyncio.sleep(0.1)
        assert not task.done()
        fake.port = port
        await fake.start()
        ack = await task
        assert ack["v"] == fake.version and c.state == fake.state


async def test_bad_token_is_final(fake: FakeServer) -> None:
    c = fast(fake, token="wrong")
    with pytest.raises(Unauthenticated) as info:
        await c.connect(timeout=5)
    assert info.value.close_code == 4401
    assert "wrong" not in str(info.value)  # the token is never echoed


@pytest.mark.parametrize("code", [4403, 4404])
async def test_final_close_codes_stop_the_client(fake: FakeServer, code: int) -> None:
    async with fast(fake) as c:
        pending = asyncio.create_task(c.command("damage", char="c1", amount=1))
        await asyncio.sleep(0)
        await fake.kill_connections(code)
        with pytest.raises(FINAL_CLOSE_CODES[code]):
            await c.wait_closed()
        assert issubclass(FINAL_CLOSE_CODES[code], AccessRevoked | RoomDeleted)
        assert c.closed and not c.connected
        # the command was answered before the close, or fails with the final error
        try:
            await pending
        except FINAL_CLOSE_CODES[code]:
            pass
        with pytest.raises(FINAL_CLOSE_CODES[code]):
            await c.command("damage", char="c1", amount=1)


@pytest.mark.parametrize("code", [1001, 1011, 1013])
async def test_transient_close_codes_reconnect(fake: FakeServer, code: int) -> None:
    async with fast(fake) as c:
        statuses: list[str] = []
        c.on_status(lambda s, _d: statuses.append(s))
        await fake.kill_connections(code)
        await c.command("damage", char="c1", amount=1, timeout=5)
        assert c.connections == 2 and "disconnected" in statuses and statuses[-1] == "connected"


def test_repr_hides_token() -> None:
    c = Client("ws://127.0.0.1:1/", "s3cr3t-token", "r1")
    assert "s3cr3t" not in repr(c) and "s3cr3t" not in str(vars(c).get("url"))
