"""Plain HTTP on the WebSocket port: /healthz, /metrics, the page and its
files, nothing else (PROTOCOL.md, Transport)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

from sync_server import Server
from sync_server.config import WEB_PACKAGE
from sync_server.metrics import Metrics
from sync_server.web import web_files
from tests.helpers.server import Table, running_server


def _get(url: str) -> tuple[int, str, bytes]:
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
    assert json.loads(body) == {"status": "ok", "rooms": 1, "connections": 2}
    await gm.close()
    await obs.close()


async def test_metrics_are_prometheus_text(vtt_table: Table, vtt_server: Server) -> None:
    gm = await vtt_table.connect("gm")
    await gm.ok("damage", {"char": vtt_table.chars["c_p1"], "amount": 1})
    await gm.cmd("explode", {})
    status, ctype, body = await get(vtt_server.http_url + "/metrics")
    text = body.decode()
    assert status == 200 and ctype.startswith("text/plain")
    assert 'vtt_commands_total{op="damage",outcome="ok"} 1.0' in text
    assert 'vtt_commands_total{op="other",outcome="unknown_op"} 1.0' in text
    assert "vtt_command_seconds_bucket" in text
    assert "vtt_patches_total" in text and "vtt_connections 1.0" in text
    assert "vtt_rooms 1.0" in text
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
        text = m.render().decode()
        assert 'vtt_commands_total{op="damage",outcome="ok"} 2.0' in text
        assert 'vtt_commands_total{op="other",outcome="unknown_op"} 1.0' in text
        assert "vtt_patches_total 1.0" in text
        assert "vtt_frames_sent_total 3.0" in text
        assert "vtt_command_seconds_count 3.0" in text
    m.frames(1)
    assert "vtt_frames_sent_total 4.0" in m.render().decode()
