"""Trust at the borders (issue 19, items 4 and 5): races and identity, logs
and headers. Each test fails on the code before the issue."""

from __future__ import annotations

import asyncio
import io
import logging
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest

from sync_server.clock import FakeClock
from sync_server.cluster.leases import Leases, Owner
from sync_server.core.auth import hash_token
from sync_server.core.limits import FAILED_HELLO_BURST
from sync_server.observe.logs import TextFormatter, escape_text
from sync_server.storage.memory import MemoryStorage
from sync_server.testing.contracts import stored_patches
from sync_server.wire.protocol import (
    CLOSE_HELLO_TIMEOUT,
    CLOSE_INTERNAL,
    CLOSE_POLICY,
    CLOSE_REVOKED,
    CLOSE_UNAUTHENTICATED,
)
from tests.helpers.http import api, bearer, events
from tests.helpers.server import (
    Closed,
    connect,
    connect_admin,
    create_table,
    hello_refused,
    msgpack_frame,
    open_ws,
    running_server,
)

# --- 5. logs and headers ----------------------------------------------------------


def test_escape_text_keeps_a_line_one_line_and_the_terminal_alone() -> None:
    raw = "x\nFORGED\r\x1b[2J\x07\x9b31m\u2028\u202etail\u2066é\tok"
    out = escape_text(raw)
    assert out == "x\\nFORGED\\r\\x1b[2J\\x07\\x9b31m\\u2028\\u202etail\\u2066é\\tok"
    assert out.isprintable()


async def test_client_strings_in_text_logs_are_escaped(tmp_path: Path) -> None:
    """An op name (any observer sends one) and a close reason with newlines
    and ANSI escapes: the text log holds them escaped, on their own line."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    forged_op = "look\n2026-01-01 INFO sync_server: FORGED op\x1b[31m"
    forged_reason = "bye\n2026-01-01 INFO sync_server: FORGED close\x1b]0;pwned\x07"
    try:
        async with running_server(tmp_path / "data") as srv:
            t = await create_table(srv.url)
            obs = await t.connect("obs")
            reply = await obs.cmd(forged_op, {})
            assert reply["t"] == "error"
            await obs.ws.close(1000, forged_reason)
            await obs.closed()
            for _ in range(100):  # the server logs the close once it has seen it
                if "FORGED close" in stream.getvalue():
                    break
                await asyncio.sleep(0.02)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    text = stream.getvalue()
    assert "FORGED op" in text and "FORGED close" in text  # both were logged...
    assert "\x1b" not in text and "\x07" not in text  # ...escaped: no escape reaches a terminal
    assert not [line for line in text.splitlines() if "FORGED" in line.split(":", 1)[0]]
    assert not [line for line in text.splitlines() if line.startswith("2026-01-01")]
    assert "look\\n2026-01-01" in text and "bye\\n2026-01-01" in text


def _headers(url: str) -> dict[str, str]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return {k.lower(): v for k, v in r.headers.items()}


async def test_pages_get_a_csp_and_nosniff_and_the_admin_page_no_framing(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        base = srv.http_url
        for path in ("/", "/index.html", "/admin.html", "/app.js", "/style.css", "/healthz"):
            headers = await asyncio.to_thread(_headers, base + path)
            assert headers.get("x-content-type-options") == "nosniff", path
        for path in ("/", "/admin.html"):
            csp = (await asyncio.to_thread(_headers, base + path))["content-security-policy"]
            directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
            assert directives["default-src"] == "'self'"
            assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
            assert directives["object-src"] == "'none'"
            assert directives["base-uri"] == "'none'"
        admin_csp = (await asyncio.to_thread(_headers, base + "/admin.html"))[
            "content-security-policy"
        ]
        assert "frame-ancestors 'none'" in admin_csp
        headers = await asyncio.to_thread(_headers, base + "/admin.html")
        assert headers.get("x-frame-options") == "DENY"


# --- 4. races and identity ----------------------------------------------------------

BAD_HELLO = {"t": "hello", "proto": 1, "token": "x" * 43, "room": "r1"}


async def test_concurrent_bad_hellos_cannot_pass_the_failed_hello_limit(tmp_path: Path) -> None:
    """100 bad hellos at once from one address: each reserves one failed
    hello at its accept, so at most the burst are read, the rest wait and
    get `rate_limited` (1008); the allowance never goes below zero, so the
    address may try again a second later (before: all 100 were read, then
    their debt locked the address, and everyone behind its NAT, ~16 s)."""
    clock = FakeClock()
    async with running_server(tmp_path / "data", clock=clock) as srv:
        t = await create_table(srv.url)  # successful hellos cost nothing
        gm = await t.connect("gm")
        tasks = [asyncio.create_task(hello_refused(srv.url, BAD_HELLO)) for _ in range(100)]
        for _ in range(500):  # the hellos read fail at once; the others wait their penalty
            if sum(t.done() for t in tasks) >= FAILED_HELLO_BURST:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        # the penalty (1 s of the fake clock) passes; it refills 5 failed hellos too
        clock.advance(1.0)
        results = await asyncio.gather(*tasks)
        codes = Counter(code for _frame, code in results)
        assert codes[CLOSE_UNAUTHENTICATED] <= FAILED_HELLO_BURST, codes
        assert codes[CLOSE_UNAUTHENTICATED] + codes[CLOSE_POLICY] == 100, codes
        frame, code = await hello_refused(srv.url, BAD_HELLO)
        assert code == CLOSE_UNAUTHENTICATED, (frame, code)  # read, not turned away
        ok = await t.connect("p1")  # and an honest hello passes
        await ok.close()
        await gm.close()


async def test_a_hello_waiting_at_the_gate_has_one_deadline_not_two(tmp_path: Path) -> None:
    """Issue 19: the gate's wait for hellos in flight and the hello's read
    each had their own `hello_timeout`, so a hello could hold its
    connection twice as long. B waits at the gate 6 s (of 10) for A, then
    reads: 5 s later its one deadline is past and it is closed 4408."""
    clock = FakeClock()
    async with running_server(tmp_path / "data", clock=clock, hello_timeout=10.0) as srv:
        t = await create_table(srv.url)
        gate = srv._deps.hello_gate
        for _ in range(FAILED_HELLO_BURST - 1):  # the fake clock refills nothing
            await hello_refused(srv.url, BAD_HELLO)

        async def until_true(cond) -> None:
            async with asyncio.timeout(10):
                while not cond():
                    await asyncio.sleep(0.01)

        a = await open_ws(srv.url)  # takes the address's last failed hello
        await until_true(lambda: sum(gate._inflight.values()) == 1)
        b = await open_ws(srv.url)  # waits for A at the gate
        await until_true(lambda: gate._released)
        clock.advance(6.0)
        await a.send(
            msgpack_frame({"t": "hello", "proto": 1, "token": t.tokens["p1"], "room": "r1"})
        )
        await until_true(lambda: not gate._released)  # A's welcome let B in: B reads now
        clock.advance(5.0)
        async with asyncio.timeout(5):
            await b.wait_closed()
        assert b.close_code == CLOSE_HELLO_TIMEOUT
        assert a.close_code is None  # A, welcomed, stays
        await a.close()


@attrs.define
class PausedLookup:
    """A token lookup that stops once it has found `token`'s owner, until
    `go_on`: the window in which a rotation is stored."""

    real: Any
    token: str
    looked_up: asyncio.Event = attrs.Factory(asyncio.Event)
    go_on: asyncio.Event = attrs.Factory(asyncio.Event)

    async def __call__(self, digest: bytes) -> tuple[str, str] | None:
        found = await self.real(digest)
        if digest == hash_token(self.token) and not self.looked_up.is_set():
            self.looked_up.set()
            await self.go_on.wait()
        return found

    async def rotate_meanwhile(self, srv: Any, t: Any, gm: Any, unloaded: bool) -> str:
        """Once the lookup has paused: the GM rotates p1's token (and, if
        `unloaded`, leaves, and the room is unloaded); then the lookup goes
        on. The fresh token."""
        try:
            await self.looked_up.wait()
            fresh = (await gm.ok("rotate_token", {"user": t.users["p1"]}))["result"]["token"]
            if unloaded:
                await gm.close()
                for _ in range(500):  # once the server has seen the GM leave
                    if t.room in await srv.rooms.unload_idle():
                        break
                    await asyncio.sleep(0.01)
                assert t.room not in srv.rooms.hosts
        finally:
            self.go_on.set()
        return str(fresh)


@pytest.mark.parametrize("unloaded", [False, True], ids=["room-loaded", "room-reloaded"])
async def test_a_hello_authenticated_before_a_rotation_does_not_join_after_it(
    tmp_path: Path, unloaded: bool
) -> None:
    """p1's token is looked up, then the GM rotates it (stored), then the
    hello joins: it must be refused, not given the new epoch (the stolen
    token would keep a live session). Also when the room was unloaded and
    loaded again in between (the new host never saw the rotation)."""
    async with running_server(tmp_path / "data", room_idle_unload_seconds=-1.0) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        assert srv._deps is not None
        lookup = PausedLookup(srv._deps.find_token, t.tokens["p1"])
        srv._deps = attrs.evolve(srv._deps, find_token=lookup)
        stolen = asyncio.create_task(connect(srv.url, t.tokens["p1"], t.room))
        fresh = await lookup.rotate_meanwhile(srv, t, gm, unloaded)
        with pytest.raises(Closed, match="bad token or room"):
            await stolen
        p1 = await connect(srv.url, fresh, t.room)  # the new token joins
        await p1.close()
        if not unloaded:
            await gm.close()


@pytest.mark.parametrize("unloaded", [False, True], ids=["room-loaded", "room-reloaded"])
@pytest.mark.parametrize("door", ["events", "command"])
async def test_an_http_request_authenticated_before_a_rotation_opens_nothing_after_it(
    tmp_path: Path, unloaded: bool, door: str
) -> None:
    """The HTTP door as the WebSocket one (above): p1's token is looked up,
    the GM rotates it (stored), then the request goes on. An event stream
    carried no token hash, so it joined after the rotation with the new
    epoch (and a command ran under it); both are refused 401 now, also
    when the room was unloaded and loaded again in between."""
    async with running_server(tmp_path / "data", room_idle_unload_seconds=-1.0) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        lookup = PausedLookup(srv.api.deps.find_token, t.tokens["p1"])
        srv.api.deps = attrs.evolve(srv.api.deps, find_token=lookup)
        async with api(srv.http_url) as c:
            if door == "events":
                request = c.get(f"/api/v1/rooms/{t.room}/events", headers=bearer(t.tokens["p1"]))
            else:
                body = {"op": "rest", "args": {"char": t.chars["c_p1"], "kind": "night"}}
                url = f"/api/v1/rooms/{t.room}/commands"
                request = c.post(url, json=body, headers=bearer(t.tokens["p1"]))
            stolen = asyncio.create_task(request)
            fresh = await lookup.rotate_meanwhile(srv, t, gm, unloaded)
            response = await asyncio.wait_for(stolen, 10)
            assert response.status_code == 401, response.text
            async with events(c, t.room, fresh) as stream:  # the new token opens one
                assert (await stream.next()).event == "snapshot"
        host = await srv.rooms.get(t.room)
        rows = await stored_patches(srv.storage, t.room, 0, host.v)
        assert not [r for r in rows if r.frame()["by"] == t.users["p1"]]  # nothing ran as p1
        if not unloaded:
            await gm.close()


async def test_an_open_event_stream_is_closed_when_its_token_is_rotated(tmp_path: Path) -> None:
    """Like a WebSocket session (4403), a stream opened with a token that is
    then rotated ends: a `close` event, then the end of the stream."""
    async with running_server(tmp_path / "data") as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        async with api(srv.http_url) as c, events(c, t.room, t.tokens["p1"]) as stream:
            assert (await stream.next()).event == "snapshot"
            await gm.ok("rotate_token", {"user": t.users["p1"]})
            seen = await stream.next()
            while seen.event != "close":
                seen = await stream.next()
            assert seen.data["code"] == CLOSE_REVOKED
            with pytest.raises(EOFError):
                await stream.next()
        await gm.close()


class _NobodyServes(MemoryStorage):
    """A cluster backend whose every claim finds the room between nodes:
    an `Owner` with no node and no URL (released or expired between the
    claim's two statements, three times in a row)."""

    node_id = "n1"
    public_url = "ws://127.0.0.1:1/"
    lease_seconds = 10.0

    async def claim(self, room: str) -> Owner | None:
        return await self.owner(room)

    async def renew(self, rooms: Any) -> set[str]:
        return set()

    async def release(self, rooms: Any) -> None:
        return None

    async def owner(self, room: str) -> Owner | None:
        return Owner(room, None, None) if room in await self.room_ids() else None

    def claim_of(self, room: str) -> None:
        return None

    def held(self) -> dict[str, Any]:
        return {}

    def expired(self, now: float) -> set[str]:
        return set()


async def test_an_owner_with_no_url_is_no_redirect_to_nowhere(tmp_path: Path) -> None:
    """`claim` may find nobody with a URL serving the room: the hello gets
    `internal` (retry), never `redirect("")`."""
    storage = _NobodyServes()
    async with running_server(tmp_path / "data", storage=storage) as srv:
        assert isinstance(storage, Leases) and srv.rooms.cluster
        admin = await connect_admin(srv.url)
        made = await admin.ok("create_room", {"room": "r1", "name": "Between nodes"})
        await admin.close()
        hello = {"t": "hello", "proto": 1, "token": made["result"]["gm_token"], "room": "r1"}
        frame, code = await hello_refused(srv.url, hello)
        assert frame is not None and frame["t"] == "error", frame
        assert frame["code"] == "internal" and "retry" in frame["message"]
        assert code == CLOSE_INTERNAL
