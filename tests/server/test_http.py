"""Plain HTTP on the WebSocket port: /healthz, /metrics, the page and its
files, nothing else (docs/protocol.md, "Connecting")."""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest
from websockets.exceptions import InvalidStatus

from sync_server import Server, __version__
from sync_server.hosting.config import WEB_PACKAGE
from sync_server.hosting.web import web_files
from sync_server.observe.metrics import Metrics
from tests.helpers.server import Table, open_ws, running_server


def _get(url: str | urllib.request.Request) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


async def get(url: str) -> tuple[int, str, bytes]:
    return await asyncio.to_thread(_get, url)


async def test_healthz_counts_rooms_and_connections(vtt_table: Table, vtt_server: Server) -> None:
    gm = await vtt_table.connect("gm")
    obs = await vtt_table.connect("obs")
    status, ctype, body = await get(vtt_server.http_url + "/healthz")
    assert status == 200 and ctype.startswith("application/json")
    assert json.loads(body) == {
        "status": "ok",
        "version": __version__,
        "rooms": 1,
        "connections": 2,
    }
    await gm.close()
    await obs.close()


async def test_metrics_are_prometheus_text(vtt_table: Table, vtt_server: Server) -> None:
    gm = await vtt_table.connect("gm")
    await gm.ok("damage", {"char": vtt_table.chars["c_p1"], "amount": 1})
    await gm.cmd("explode", {})
    status, ctype, body = await get(vtt_server.http_url + "/metrics")
    text = body.decode()
    assert status == 200 and ctype.startswith("text/plain")
    assert 'vtt_commands_total{outcome="ok"}' in text  # the table's setup too
    assert 'vtt_commands_total{outcome="unknown_op"} 1.0' in text
    assert "vtt_command_seconds_bucket" in text
    assert "vtt_patches_total" in text and "vtt_connections 1.0" in text
    assert "vtt_rooms 1.0" in text
    await gm.close()


async def test_op_metrics_are_the_admins(vtt_table: Table, vtt_server: Server) -> None:
    """Issue 19: counts by op tell a watcher what each version was (an empty
    patch too): public /metrics has none; /admin/metrics, behind the admin
    token, has them."""
    gm = await vtt_table.connect("gm")
    await gm.ok("damage", {"char": vtt_table.chars["c_p1"], "amount": 1})
    await gm.ok("queue_rolls", {"rolls": [3]})
    _, _, body = await get(vtt_server.http_url + "/metrics")
    assert b"damage" not in body and b"queue_rolls" not in body and b'op="' not in body
    url = vtt_server.http_url + "/admin/metrics"
    status, _, _ = await get(url)
    assert status == 401
    auth = {"Authorization": f"Bearer {vtt_server.admin_token}"}
    status, ctype, body = await asyncio.to_thread(_get, urllib.request.Request(url, headers=auth))
    text = body.decode()
    assert status == 200 and ctype.startswith("text/plain")
    assert 'vtt_op_commands_total{op="damage",outcome="ok"} 1.0' in text
    assert 'vtt_op_commands_total{op="queue_rolls",outcome="ok"} 1.0' in text
    assert 'vtt_commands_total{outcome="ok"}' in text
    await gm.close()


async def test_each_server_has_its_own_registry(tmp_path, vtt_server: Server) -> None:
    async with running_server(tmp_path / "other") as other:
        assert other.metrics.registry is not vtt_server.metrics.registry
        _, _, body = await get(other.http_url + "/metrics")
        assert b"vtt_rooms 0.0" in body


async def test_the_page_and_its_files(vtt_server: Server) -> None:
    status, ctype, body = await get(vtt_server.http_url + "/")
    assert status == 200 and ctype.startswith("text/html")
    assert b"<html" in body.lower() or b"<!doctype html" in body.lower()
    files = web_files(WEB_PACKAGE)  # package data, as an installed server reads it
    assert body == (files / "index.html").read_bytes()
    served = 0
    for path in files.iterdir():
        if path.is_file() and not path.name.startswith(".") and not path.name.endswith(".py"):
            status, _, body = await get(f"{vtt_server.http_url}/{path.name}")
            assert status == 200 and body == path.read_bytes(), path.name
            served += 1
    assert served >= 4  # the page, its script and style, the JS client
    status, _, _ = await get(f"{vtt_server.http_url}/__init__.py")
    assert status == 404  # the package marker is not the page's


async def test_placeholder_when_the_page_is_absent_and_whitelist(tmp_path) -> None:
    web = tmp_path / "web"
    web.mkdir()
    (web / "app.js").write_text("export const x = 1;\n")
    (tmp_path / "secret.txt").write_text("do not serve")
    async with running_server(tmp_path / "data", web=web) as srv:
        status, ctype, body = await get(srv.http_url + "/")
        assert status == 200 and b"vtt-sync" in body
        status, ctype, body = await get(srv.http_url + "/app.js")
        assert status == 200 and ctype.startswith("text/javascript")
        for bad in ("/secret.txt", "/../secret.txt", "/%2e%2e/secret.txt", "/web/app.js", "/nope"):
            status, _, body = await get(srv.http_url + bad)
            assert status == 404, bad
            assert b"do not serve" not in body


def test_hot_path_counts_are_folded_at_each_scrape() -> None:
    """Commands, patches and frames are counted in plain ints and folded
    into the Prometheus counters by render(): same series, counted once."""
    m = Metrics()
    m.command("damage", "ok", 0.002)
    m.command("damage", "ok", 0.003)
    m.command("no such op", "unknown_op", 0.001)
    m.patch()
    m.frames(3)
    for _ in range(2):  # a second scrape must not count anything twice
        text = m.render_admin().decode()
        assert 'vtt_op_commands_total{op="damage",outcome="ok"} 2.0' in text
        assert 'vtt_op_commands_total{op="other",outcome="unknown_op"} 1.0' in text
        assert 'vtt_commands_total{outcome="ok"} 2.0' in text
        assert "vtt_patches_total 1.0" in text
        assert "vtt_frames_sent_total 3.0" in text
        assert "vtt_command_seconds_count 3.0" in text
    m.frames(1)
    assert "vtt_frames_sent_total 4.0" in m.render().decode()


# --- methods, CORS, draining ----------------------------------------------------


def _request(
    url: str, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One raw request (any method), read to the end."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


async def request(url: str, method: str, path: str, **headers: str):
    return await asyncio.to_thread(_request, url, method, path, headers)


async def test_head_is_get_without_a_body(vtt_server: Server) -> None:
    for path in ("/healthz", "/", "/vtt-sync-client.js", "/nope"):
        g_status, g_headers, g_body = await request(vtt_server.http_url, "GET", path)
        h_status, h_headers, h_body = await request(vtt_server.http_url, "HEAD", path)
        assert h_status == g_status and h_body == b"", path
        assert h_headers["content-type"] == g_headers["content-type"]
        assert int(h_headers["content-length"]) == len(g_body) > 0


async def test_options_and_other_methods(vtt_server: Server) -> None:
    status, headers, body = await request(vtt_server.http_url, "OPTIONS", "/")
    assert status == 204 and body == b""
    assert headers["allow"] == "GET, HEAD, OPTIONS"
    assert "access-control-allow-origin" not in headers  # no origin configured
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, headers, body = await request(vtt_server.http_url, method, "/healthz")
        assert status == 405, method
        assert headers["allow"] == "GET, HEAD, OPTIONS"
        assert method.encode() in body


async def test_cors_for_configured_origins_only(tmp_path) -> None:
    foundry = "https://foundry.example:30000"
    async with running_server(tmp_path / "data", allowed_origins={foundry}) as srv:
        _, headers, body = await request(srv.http_url, "GET", "/vtt-sync-client.js", Origin=foundry)
        assert headers["access-control-allow-origin"] == foundry
        assert headers["vary"] == "Origin" and b"VttSyncClient" in body
        _, headers, _ = await request(
            srv.http_url, "GET", "/vtt-sync-client.js", Origin="https://evil.example"
        )
        assert "access-control-allow-origin" not in headers
        status, headers, _ = await request(
            srv.http_url,
            "OPTIONS",
            "/vtt-sync-client.js",
            Origin=foundry,
            **{"Access-Control-Request-Method": "GET"},
        )
        assert status == 204 and headers["access-control-allow-origin"] == foundry
        assert "GET" in headers["access-control-allow-methods"]
        # the same list opens the WebSocket to a page of that origin
        ws = await open_ws(srv.url, origin=foundry)
        await ws.close()
        with pytest.raises(InvalidStatus):
            await open_ws(srv.url, origin="https://evil.example")


async def test_healthz_answers_503_while_draining(vtt_server: Server) -> None:
    vtt_server.draining = True
    status, _, body = await get(vtt_server.http_url + "/healthz")
    assert status == 503 and json.loads(body)["status"] == "draining"
    vtt_server.draining = False
    status, _, _ = await get(vtt_server.http_url + "/healthz")
    assert status == 200
