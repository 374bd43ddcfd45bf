"""The HTTP door (docs/http.md): the same rooms as the WebSocket, over real
HTTP on port 0. Each op sent over HTTP does what it does over the
WebSocket (acks, patches, events, versions, views); a retry with the same
Idempotency-Key is one command, on either door; a player's stream and
reads never carry a hidden value; refusals get their HTTP status; the
allowance is the user's one; a slow stream reader is cut like a slow
WebSocket reader; curl drives it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from typing import Any

import pytest

import rules
from rules.engine import OPS
from sync_server.hosting import apidoc
from sync_server.testing.server import seen_by
from sync_server.wire import protocol
from tests.helpers.http import api, bearer, events, small_send_buffers
from tests.helpers.server import (
    ADMIN_TOKEN,
    REPO,
    SHEET,
    WAIT,
    Table,
    connect,
    connect_admin,
    create_table,
    running_server,
)
from tests.helpers.tour import tour
from tests.server.test_views import HIDDEN_MAXIMA, SECRET_NAME, STATUS_MAXIMA, secret_table


def http_url(ws_url: str) -> str:
    return "http" + ws_url[2:]


def commands(room: str) -> str:
    return f"/api/v1/rooms/{room}/commands"


async def users_room(url: str, room: str) -> dict[str, str]:
    """A room with a GM and the users of the rules' test table (Paul u2,
    Zoé u3, Olga u4), no character: the tour adds its own."""
    admin = await connect_admin(url, ADMIN_TOKEN)
    res = (await admin.ok("create_room", {"room": room, "name": "T", "gm_name": "Maya"}))["result"]
    await admin.close()
    tokens = {"gm": res["gm_token"]}
    gm = await connect(url, tokens["gm"], room)
    for key, name, role in (("p1", "Paul", "player"), ("p2", "Zoé", "player"),
                            ("obs", "Olga", "observer")):  # fmt: skip
        tokens[key] = (await gm.ok("add_user", {"name": name, "role": role}))["result"]["token"]
    await gm.close()
    return tokens


def scrub(value: Any) -> Any:
    """Tokens differ between two rooms; everything else must not."""
    if isinstance(value, dict):
        return {k: ("TOKEN" if k == "token" else scrub(v)) for k, v in value.items()}
    return value


def without_room_id(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k != "room"}


async def test_each_op_over_http_equals_the_same_op_over_the_websocket(tmp_path) -> None:
    steps = [(s.op, s.args) for s in tour()]
    assert {op for op, _ in steps} == set(OPS)  # every op of the op table
    steps.append(("undo", {}))  # and the server's own
    async with running_server(tmp_path) as srv:
        ws_tokens, web_tokens = await users_room(srv.url, "ws"), await users_room(srv.url, "web")
        gm, obs = (
            await connect(srv.url, ws_tokens["gm"], "ws"),
            await connect(srv.url, ws_tokens["obs"], "ws"),
        )
        async with api(srv.http_url) as c, events(c, "web", web_tokens["obs"]) as stream:
            first = await stream.next()  # the observer's view, as its welcome's
            assert first.event == "snapshot" and first.id == obs.v
            assert without_room_id(first.data["state"]) == without_room_id(obs.state)
            for i, (op, args) in enumerate(steps):
                ws_ack = await gm.ok(op, args)
                r = await c.post(
                    commands("web"),
                    json={"op": op, "args": args},
                    headers=bearer(web_tokens["gm"], **{"Idempotency-Key": f"tour-{i}"}),
                )
                assert r.status_code == 200, (op, r.text)
                ack = r.json()
                assert ack["t"] == "ack" and ack["id"] == f"tour-{i}"
                assert ack["v"] == ws_ack["v"], op
                assert scrub(ack["result"]) == scrub(ws_ack["result"]), op
                await gm.wait_v(ws_ack["v"])
                mine = gm.patches[-1]
                assert (ack["patch"]["ops"], ack["patch"]["events"]) == (
                    mine["ops"],
                    mine["events"],
                ), op
                # the observer's stream carries what its WebSocket carries
                await obs.wait_v(ws_ack["v"])
                e = await stream.next()
                assert e.event == "patch" and e.id == ws_ack["v"]
                seen = obs.patches[-1]
                assert (e.data["ops"], e.data["events"]) == (seen["ops"], seen["events"]), op
            r = await c.get("/api/v1/rooms/web", headers=bearer(web_tokens["gm"]))
            view = r.json()
            assert (view["v"], view["user"], view["role"]) == (gm.v, "u1", "gm")
            assert without_room_id(view["state"]) == without_room_id(gm.state)
            r = await c.get("/api/v1/rooms/web", headers=bearer(web_tokens["obs"]))
            assert without_room_id(r.json()["state"]) == without_room_id(obs.state)
        await gm.close()
        await obs.close()


async def test_a_retry_with_the_same_key_is_one_command_on_either_door(vtt_table: Table) -> None:
    t = vtt_table
    async with api(http_url(t.url)) as c:
        headers = bearer(t.tokens["gm"], **{"Idempotency-Key": "deck-1"})
        body = {"op": "damage", "args": {"char": t.chars["c_p1"], "amount": 2}}
        first = await c.post(commands(t.room), json=body, headers=headers)
        again = await c.post(commands(t.room), json=body, headers=headers)
        assert first.status_code == again.status_code == 200
        one, two = first.json(), again.json()
        assert "dup" not in one and one["patch"]["v"] == one["v"]
        assert two["dup"] is True and two["v"] == one["v"] and "patch" not in two
        view = (await c.get(f"/api/v1/rooms/{t.room}", headers=bearer(t.tokens["gm"]))).json()
        assert view["v"] == one["v"]
        assert view["state"]["characters"][t.chars["c_p1"]]["pe"] == SHEET["pe_max"] - 2
        # the same id from the same user over the WebSocket: the same command
        gm = await t.connect("gm")
        reply = await gm.cmd("damage", body["args"], id="deck-1")
        assert reply["t"] == "ack" and reply["dup"] is True and reply["v"] == one["v"]
        assert gm.v == one["v"]
        await gm.close()


async def test_a_players_stream_and_reads_never_hold_a_hidden_value(tmp_path) -> None:
    async with running_server(tmp_path) as srv:
        t, ids = await secret_table(srv.url)
        secrets = [SECRET_NAME, ids["lich"], *STATUS_MAXIMA, *HIDDEN_MAXIMA]
        gm = await t.connect("gm")
        async with (
            api(srv.http_url) as c,
            events(c, t.room, t.tokens["p1"]) as p1,
            events(c, t.room, t.tokens["obs"]) as obs,
            events(c, t.room, t.tokens["gm"]) as gm_stream,
        ):
            steps = [
                ("damage", {"char": ids["npc"], "amount": sum(STATUS_MAXIMA)}),  # dying
                ("damage", {"char": ids["lich"], "amount": sum(HIDDEN_MAXIMA)}),
                ("combat_start", {"order": [ids["lich"], t.chars["c_p1"], ids["npc"]]}),
                ("end_turn", {"char": ids["lich"]}),
                ("damage", {"char": t.chars["c_p1"], "amount": 3}),
                ("undo", {}),
            ]
            for i, (op, args) in enumerate(steps):  # ids of our own: a random one may hold "c5"
                key = {"Idempotency-Key": f"step-{i}"}
                r = await c.post(commands(t.room), json={"op": op, "args": args},
                                 headers=bearer(t.tokens["gm"], **key))  # fmt: skip
                assert r.status_code == 200, r.text
            v = r.json()["v"]
            for stream in (p1, obs, gm_stream):
                await stream.until_v(v)
            room = f"/api/v1/rooms/{t.room}"
            reads = [
                (await c.get(room + path, headers=bearer(t.tokens[who]))).content
                for who in ("p1", "obs")
                for path in ("", "/history?limit=500")
            ]
            # a player's own command: the patch in its reply is its view
            mine = {"op": "end_turn", "args": {"char": t.chars["c_p1"]}}
            key = {"Idempotency-Key": "mine"}
            r = await c.post(commands(t.room), headers=bearer(t.tokens["p1"], **key), json=mine)
            assert r.status_code == 200, r.text
            reads.append(r.content)
            for raw in [bytes(p1.raw), bytes(obs.raw), *reads]:
                found = [s for s in secrets if str(s).encode() in raw]
                assert found == [], found
            # the search finds them where they are: in what the GM got
            assert [s for s in secrets if str(s).encode() in bytes(gm_stream.raw)] == secrets
        await gm.close()


async def test_refusals_get_their_http_status(vtt_table: Table) -> None:
    t = vtt_table
    path = commands(t.room)
    npc = t.chars["c_npc"]
    async with api(http_url(t.url)) as c:

        async def post(who: str | None, body: Any, **headers: str) -> tuple[int, dict[str, Any]]:
            h = bearer(t.tokens[who], **headers) if who else headers
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            r = await c.post(path, content=data, headers={"Content-Type": "application/json", **h})
            return r.status_code, r.json()

        damage = {"op": "damage", "args": {"char": npc, "amount": 1}}
        for headers in ({}, {"Authorization": "Bearer not-a-token-of-this-room"},
                        {"Authorization": f"Bearer {ADMIN_TOKEN}"},
                        {"Authorization": f"Basic {t.tokens['gm']}"}):  # fmt: skip
            status, err = await post(None, damage, **headers)
            assert (status, err["code"]) == (401, "unauthenticated"), headers
        r = await c.get("/api/v1/rooms/other", headers=bearer(t.tokens["gm"]))
        assert r.status_code == 401  # a token of another room: the same answer
        assert (await post("obs", damage))[0] == 403  # observers send nothing
        status, err = await post("p1", {"op": "rest", "args": {"char": npc, "kind": "short"}})
        assert (status, err["code"]) == (403, "forbidden")  # not the owner
        status, err = await post("gm", {"op": "damage", "args": {"char": "c99", "amount": 1}})
        assert (status, err["code"]) == (404, "not_found")
        status, err = await post("gm", {**damage, "expect": 1})
        assert (status, err["code"]) == (409, "conflict")
        status, err = await post("gm", {"op": "remove_user", "args": {"user": t.users["gm"]}})
        assert (status, err["code"]) == (409, "rule")  # the last GM
        assert (await post("gm", {"op": "nope"}))[1]["code"] == "unknown_op"
        assert (await post("gm", {"op": "damage", "args": {"char": npc}}))[0] == 400
        assert (await post("gm", b"{not json"))[1]["code"] == "bad_frame"
        assert (await post("gm", {"args": {}}))[1]["code"] == "bad_frame"
        assert (await post("gm", {"op": "create_room", "args": {}}))[0] == 403
        big = json.dumps({"op": "update_room", "args": {"name": "x" * 70_000}}).encode()
        assert (await post("gm", big))[0] == 413
        r = await c.get(f"/api/v1/rooms/{t.room}/nothing", headers=bearer(t.tokens["gm"]))
        assert (r.status_code, r.json()["code"]) == (404, "not_found")
        r = await c.delete(path, headers=bearer(t.tokens["gm"]))
        assert r.status_code == 405 and r.headers["allow"] == "POST, OPTIONS"
        r = await c.get(f"/api/v1/rooms/{t.room}/history?limit=0", headers=bearer(t.tokens["gm"]))
        assert r.status_code == 400
        # the room is unchanged by all of it
        r = await c.get(f"/api/v1/rooms/{t.room}", headers=bearer(t.tokens["gm"]))
        assert r.json()["state"]["characters"][npc]["pe"] == SHEET["pe_max"]


async def test_one_allowance_per_user_for_both_doors_and_429_with_retry_after(tmp_path) -> None:
    async with running_server(tmp_path, rate=protocol_rate("0.1/6")) as srv:
        t = await create_table(srv.url)
        p1 = await t.connect("p1")  # the hello takes one and what its welcome cost
        mine = {"char": t.chars["c_p1"], "kind": "short"}
        assert (await p1.cmd("rest", mine))["t"] == "ack"
        async with api(srv.http_url) as c:
            statuses = []
            for _ in range(6):
                r = await c.get(f"/api/v1/rooms/{t.room}", headers=bearer(t.tokens["p1"]))
                statuses.append(r.status_code)
            # what the WebSocket spent is missing from HTTP's share
            assert 1 <= statuses.count(200) <= 4 and statuses[-1] == 429, statuses
            assert r.json()["code"] == "rate_limited" and int(r.headers["retry-after"]) >= 1
            # and the other way round: the WebSocket session finds the bucket empty
            assert (await p1.cmd("stop_rest", {"char": mine["char"]}))["code"] == "rate_limited"
            # another user has their own
            r = await c.get(f"/api/v1/rooms/{t.room}", headers=bearer(t.tokens["p2"]))
            assert r.status_code == 200
        await p1.close()


def protocol_rate(text: str) -> Any:
    from sync_server.core.ratelimit import RateSpec

    return RateSpec.parse(text)


async def test_the_stream_resumes_from_last_event_id_or_gets_a_snapshot(vtt_table: Table) -> None:
    t = vtt_table
    gm = await t.connect("gm")
    start = gm.v
    for amount in (1, 2, 3):
        await gm.ok("damage", {"char": t.chars["c_npc"], "amount": amount})
    async with api(http_url(t.url)) as c:
        async with events(c, t.room, t.tokens["p2"], **{"Last-Event-ID": str(start)}) as s:
            got = [await s.next() for _ in range(3)]
            assert [(e.event, e.id) for e in got] == [("patch", start + i) for i in (1, 2, 3)]
            ack = await gm.ok("damage", {"char": t.chars["c_npc"], "amount": 4})
            assert (await s.next()).id == ack["v"]
        async with events(c, t.room, t.tokens["p2"], **{"Last-Event-ID": "99999"}) as s:
            snap = await s.next()  # ahead of the room: the state instead
            assert (snap.event, snap.id) == ("snapshot", ack["v"])
            assert snap.data["role"] == "player"
            assert snap.data["state"] == seen_by(gm.state, rules.Viewer(t.users["p2"], "player"))
        # removing the user ends their stream with the WebSocket's close code
        async with events(c, t.room, t.tokens["p2"]) as s:
            await s.next()
            await gm.ok("remove_user", {"user": t.users["p2"]})
            while (e := await s.next()).event != "close":
                pass
            assert e.data["code"] == protocol.CLOSE_REVOKED
            with pytest.raises(EOFError):
                await s.next()
    await gm.close()


async def test_a_slow_stream_reader_is_cut_like_a_slow_websocket_reader(tmp_path) -> None:
    async with running_server(tmp_path, outbox_max_bytes=64 * 1024) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        p1 = await t.connect("p1")
        # the slow reader: a tiny receive buffer, a request, then no reading at all
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", srv.port))
        request = (f"GET /api/v1/rooms/{t.room}/events HTTP/1.1\r\nHost: x\r\n"
                   f"Authorization: Bearer {t.tokens['gm']}\r\n\r\n")  # fmt: skip
        await asyncio.get_running_loop().sock_sendall(sock, request.encode())
        async with asyncio.timeout(WAIT):
            while srv.metrics.sse_streams._value.get() < 1:
                await asyncio.sleep(0.01)
        small_send_buffers(srv)
        name = "n" * 90  # and a number: a patch of ~200 bytes
        sent = 0
        async with asyncio.timeout(3 * WAIT):
            while srv.metrics.slow_closes._value.get() < 1:
                futs = [await gm.submit("update_room", {"name": f"{name}{i}"})
                        for i in range(sent, sent + 50)]  # fmt: skip
                sent += 50
                await asyncio.gather(*futs)
        # cut, and counted as one
        async with asyncio.timeout(WAIT):
            while srv.metrics.sse_streams._value.get() > 0:
                await asyncio.sleep(0.01)
        assert srv.api is not None and not srv.api.streams
        # others are served on, and the cut one resumes where it wants
        ack = await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 1})
        await p1.wait_v(ack["v"])
        sock.close()
        async with (
            api(srv.http_url) as c,
            events(c, t.room, t.tokens["gm"], **{"Last-Event-ID": str(ack["v"] - 1)}) as s,
        ):
            assert (await s.next()).id == ack["v"]
        await gm.close()
        await p1.close()


async def test_cors_preflight_and_refused_origins(tmp_path) -> None:
    async with running_server(tmp_path, allowed_origins=frozenset({"https://vtt.example"})) as srv:
        t = await create_table(srv.url)
        async with api(srv.http_url) as c:
            r = await c.options(
                commands(t.room),
                headers={"Origin": "https://vtt.example",
                         "Access-Control-Request-Method": "POST",
                         "Access-Control-Request-Headers": "authorization, idempotency-key"},
            )  # fmt: skip
            assert r.status_code == 204
            assert r.headers["access-control-allow-origin"] == "https://vtt.example"
            assert "Idempotency-Key" in r.headers["access-control-allow-headers"]
            r = await c.get(f"/api/v1/rooms/{t.room}", headers=bearer(
                t.tokens["gm"], Origin="https://vtt.example"))  # fmt: skip
            assert r.status_code == 200
            assert r.headers["access-control-allow-origin"] == "https://vtt.example"
            r = await c.get(f"/api/v1/rooms/{t.room}", headers=bearer(
                t.tokens["gm"], Origin="https://evil.example"))  # fmt: skip
            assert (r.status_code, r.json()["code"]) == (403, "forbidden")


async def test_the_documents_are_served_and_the_websocket_still_works(vtt_table: Table) -> None:
    t = vtt_table
    async with api(http_url(t.url)) as c:
        r = await c.get("/api/v1/openapi.json")
        assert r.status_code == 200 and r.content.decode() == apidoc.render("openapi.json")
        r = await c.get("/api/v1/asyncapi.json")
        assert r.status_code == 200 and r.json()["asyncapi"] == "3.0.0"
        r = await c.get("/healthz")  # the plain routes are websockets' as before
        assert r.status_code == 200
    gm = await t.connect("gm", "json")
    await gm.ok("damage", {"char": t.chars["c_npc"], "amount": 1})
    await gm.close()


async def test_logs_never_carry_the_token(vtt_table: Table, caplog) -> None:
    t = vtt_table
    caplog.set_level("DEBUG")
    async with api(http_url(t.url)) as c:
        await c.post(commands(t.room), json={"op": "damage", "args": {"char": t.chars["c_npc"],
                     "amount": 1}}, headers=bearer(t.tokens["gm"]))  # fmt: skip
        await c.get(f"/api/v1/rooms/{t.room}", headers=bearer("x" * 40))
    text = "\n".join(r.getMessage() + str(r.__dict__) for r in caplog.records)
    assert "POST /api/v1/rooms/r1/commands 200" in text
    assert t.tokens["gm"] not in text and "x" * 40 not in text


async def test_curl_drives_a_room(vtt_table: Table) -> None:
    curl = shutil.which("curl")
    assert curl, "curl is missing (scripts/install-test-deps installs it)"
    t = vtt_table
    url = http_url(t.url) + commands(t.room)
    body = json.dumps({"op": "damage", "args": {"char": t.chars["c_npc"], "amount": 2}})
    argv = [curl, "-sS", "-X", "POST", url, "-H", f"Authorization: Bearer {t.tokens['gm']}",
            "-H", "Content-Type: application/json", "-H", "Idempotency-Key: curl-1",
            "--data", body, "-w", "\n%{http_code}"]  # fmt: skip
    out = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=WAIT
    )
    reply, _, status = out.stdout.rpartition("\n")
    assert status == "200", out
    ack = json.loads(reply)
    assert ack["t"] == "ack" and ack["patch"]["events"][0]["kind"] == "damage"


async def test_the_table_bot_posts_the_rule_events_as_sentences(vtt_server, vtt_table) -> None:
    """docs/examples/table_bot.py, run as a tool would run it: it prints
    (no Discord needed) what the page's log says."""
    t = vtt_table
    env = {**os.environ, "PYTHONPATH": str(REPO), "VTT_URL": http_url(t.url) + "/",
           "VTT_ROOM": t.room, "VTT_TOKEN": t.tokens["obs"]}  # fmt: skip
    env.pop("DISCORD_WEBHOOK", None)
    bot = await asyncio.create_subprocess_exec(
        sys.executable, "-u", str(REPO / "docs" / "examples" / "table_bot.py"),
        env=env, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(WAIT):
            while vtt_server.metrics.sse_streams._value.get() < 1:
                await asyncio.sleep(0.02)  # polling for the bot's stream to open
        gm = await t.connect("gm")
        await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 40})
        await gm.ok("add_character", {**SHEET, "name": "Kira"})
        await gm.close()
        assert bot.stdout is not None
        lines = []
        async with asyncio.timeout(WAIT):
            while not any("Kira" in line for line in lines):
                lines.append((await bot.stdout.readline()).decode())
        assert any("Aline" in line and "dying" in line for line in lines), lines
    finally:
        bot.kill()
        await bot.wait()


async def test_a_deleted_room_ends_its_streams_with_4404(vtt_table: Table) -> None:
    t = vtt_table
    async with api(http_url(t.url)) as c, events(c, t.room, t.tokens["obs"]) as s:
        assert (await s.next()).event == "snapshot"
        admin = await connect_admin(t.url, ADMIN_TOKEN)
        await admin.ok("delete_room", {"room": t.room})
        await admin.close()
        e = await s.next()
        assert (e.event, e.data["code"]) == ("close", protocol.CLOSE_ROOM_DELETED)
        with pytest.raises(EOFError):
            await s.next()
        r = await c.get(f"/api/v1/rooms/{t.room}", headers=bearer(t.tokens["gm"]))
        assert r.status_code == 401


async def test_a_server_shutting_down_ends_its_streams_with_1001(tmp_path) -> None:
    async with running_server(tmp_path) as srv:
        t = await create_table(srv.url)
        async with api(srv.http_url) as c, events(c, t.room, t.tokens["p1"]) as s:
            assert (await s.next()).event == "snapshot"
            await srv.close()
            e = await s.next()
            assert (e.event, e.data["code"]) == ("close", protocol.CLOSE_SHUTDOWN)


async def test_bad_tokens_count_against_the_address_like_refused_hellos(tmp_path) -> None:
    async with running_server(tmp_path, hello_failure_rate=protocol_rate("0.01/2")) as srv:
        t = await create_table(srv.url)
        async with api(srv.http_url) as c:
            path = f"/api/v1/rooms/{t.room}"
            statuses = [(await c.get(path, headers=bearer("x" * 43))).status_code for _ in range(3)]
            assert statuses == [401, 401, 429]
            # the good token from that address waits too, as a hello would
            assert (await c.get(path, headers=bearer(t.tokens["gm"]))).status_code == 429
            # and so does a request for the API's document, which says so
            assert (await c.get("/api/v1/openapi.json")).status_code == 429
            described = apidoc.openapi()["paths"]["/api/v1/openapi.json"]["get"]["responses"]
            assert "429" in described


async def test_cluster_a_request_at_another_node_is_redirected_to_the_owner(
    tmp_path, pg_db
) -> None:
    from tests.server.test_cluster import node

    async with node(tmp_path, "a", pg_db) as a, node(tmp_path, "b", pg_db) as b:
        t = await create_table(a.url)  # a claims r1
        body = {"op": "damage", "args": {"char": t.chars["c_npc"], "amount": 1}}
        headers = bearer(t.tokens["gm"], **{"Idempotency-Key": "moved-1"})
        async with api(b.http_url) as c:
            r = await c.post(commands(t.room), json=body, headers=headers)
            assert r.status_code == 307
            assert r.headers["location"] == a.http_url + commands(t.room)
            assert r.json() == protocol.redirect(r.headers["location"])  # the WebSocket's frame
            # clients drop the token on a redirect to another origin: a tool
            # sends the same request again there itself (docs/http.md)
            r = await c.post(r.headers["location"], json=body, headers=headers)
            assert r.status_code == 200 and r.json()["v"] == 7  # applied once, by a
        assert set(b.rooms.hosts) == set()


async def test_the_door_reads_a_request_line_that_comes_in_pieces(vtt_server) -> None:
    """Both doors behind one socket, whatever the TCP segments: the API's
    requests go to h11, the others to websockets as before."""

    async def ask(request: bytes, cut: int) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", vtt_server.port)
        writer.write(request[:cut])
        await writer.drain()
        await asyncio.sleep(0.05)  # a second segment, not a timed assertion
        writer.write(request[cut:])
        async with asyncio.timeout(WAIT):
            answer = await reader.read()
        writer.close()
        return answer

    api_doc = b"GET /api/v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
    health = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    for cut in (1, 6, 12, len(api_doc) - 2):
        answer = await ask(api_doc, cut)
        assert answer.startswith(b"HTTP/1.1 200 ") and b'"openapi": "3.1.0"' in answer
    for cut in (1, 6, len(health) - 2):
        answer = await ask(health, cut)
        assert answer.startswith(b"HTTP/1.1 200 ") and b'"status": "ok"' in answer
