"""Behind a real reverse proxy, under a sub-path: Debian's nginx, run as a
subprocess with the configuration docs/deploy.md gives (its two blocks, the
upstream port replaced), in front of a server under /vtt/. The tracker page
in Chromium, the Python client, the CLI and the admin export all go through
it. Also: the page served over https:// by the server itself opens wss://.

Without nginx (or Chromium) these tests skip locally and FAIL in CI (CI set):
scripts/install-test-deps installs both."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client_stub import Client, tls_context
from tests.helpers.browser import in_ci
from tests.helpers.http import EventReader, api, bearer
from tests.helpers.live_table import ROOM, LiveTable
from tests.helpers.server import ADMIN_TOKEN, WAIT, running_server
from vtt_sync import main  # the whole command: client and admin

pytestmark = [pytest.mark.timeout(90), pytest.mark.asyncio(loop_scope="session")]

NGINX = "/usr/sbin/nginx"
DEPLOY_MD = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
PREFIX = "/vtt/"


def _require_nginx() -> None:
    if not os.access(NGINX, os.X_OK):
        reason = f"{NGINX} is missing (apt-get install nginx; scripts/install-test-deps)"
        if in_ci():
            pytest.fail(f"the proxy test cannot run in CI: {reason}")
        pytest.skip(reason)


def deploy_block(marker: str) -> str:
    """The ```nginx block of docs/deploy.md that starts with `# vtt-sync: MARKER`."""
    text = DEPLOY_MD.read_text(encoding="utf-8")
    for block in re.findall(r"```nginx\n(.*?)```", text, flags=re.S):
        if block.startswith(f"# vtt-sync: {marker}\n"):
            return block
    raise AssertionError(f"docs/deploy.md has no nginx block '# vtt-sync: {marker}'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def nginx(upstream_port: int, tmp: Path) -> Iterator[str]:
    """nginx in the foreground on a free port, the docs' blocks in its
    configuration; yields its base URL (http://127.0.0.1:PORT)."""
    _require_nginx()
    server_block = deploy_block("server").replace("127.0.0.1:8765", f"127.0.0.1:{upstream_port}")
    assert server_block != deploy_block("server"), "the docs' upstream is 127.0.0.1:8765"
    tmp.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):  # the free port may be taken between probe and bind
        port = free_port()
        conf = tmp / "nginx.conf"
        temp_paths = "\n".join(
            f"    {kind}_temp_path {tmp}/{kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        conf.write_text(
            f"""{"user root;" if os.geteuid() == 0 else ""}
worker_processes 1;
error_log {tmp}/error.log info;
pid {tmp}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log {tmp}/access.log;
{temp_paths}
{deploy_block("http")}
    server {{
        listen 127.0.0.1:{port};
{server_block}
    }}
}}
"""
        )
        proc = subprocess.Popen(
            [NGINX, "-p", str(tmp), "-c", str(conf), "-g", "daemon off;"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + WAIT
        up = False
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                up = True
                break
            time.sleep(0.02)  # polling for the port to open, not asserting time
        if up:
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=WAIT)
                if proc.poll() is None:
                    proc.kill()
            return
        proc.kill()
        out = proc.communicate(timeout=WAIT)[0].decode(errors="replace")
        log = (tmp / "error.log").read_text() if (tmp / "error.log").exists() else ""
        if "Address already in use" not in out + log or attempt == 2:
            raise AssertionError(f"nginx did not start:\n{out}\n{log}")


def http(url: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, headers=headers)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kw: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=WAIT) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


async def test_the_page_and_the_clients_through_nginx_under_a_sub_path(
    chromium: Any, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    async with LiveTable(tmp_path / "data") as table:
        with nginx(table.port, tmp_path / "nginx") as proxy:
            base = proxy + PREFIX
            # plain HTTP through the proxy: the prefix is stripped, /vtt redirects to /vtt/
            status, headers, _ = await asyncio.to_thread(http, proxy + "/vtt")
            assert status == 301 and headers["Location"].endswith("/vtt/")
            status, _, body = await asyncio.to_thread(http, base + "healthz")
            assert status == 200 and b'"status": "ok"' in body
            status, _, body = await asyncio.to_thread(http, base, "HEAD")
            assert status == 200 and body == b""
            # the page: its files and its WebSocket under /vtt/
            ctx = await chromium.new_context(viewport={"width": 1280, "height": 900})
            page = await ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{base}#room={ROOM}&token={table.token('gm')}")
            await expect(page.locator("#status")).to_have_attribute("data-status", "connected")
            assert await page.evaluate("window.vttClient.url") == f"ws{base[4:]}"
            # a click on the page reaches a Python client connected through the proxy
            async with Client(f"ws{base[4:]}", table.token("p2"), ROOM) as py:
                aline = '[data-char="c1"]'
                await page.fill(f"{aline} .amount", "3")
                await page.click(f'{aline} button[data-action="damage"]')
                await py.wait_for(lambda s: s["characters"]["c1"]["pe"] == 12, timeout=WAIT)
                v, state = await table.state()
                await py.wait_version(v, timeout=WAIT)
                assert py.state == table.seen("p2", state)
            assert errors == []
            await ctx.close()
            # the CLI and the admin export take the page's address
            code = await asyncio.to_thread(
                main,
                ["client", "state", "--url", base, f"--token={table.token('obs')}",
                 "--room", ROOM, "--compact"],
            )  # fmt: skip
            assert code == 0
            out = tmp_path / "demo.json"
            code = await asyncio.to_thread(
                main,
                ["admin", "export", ROOM, "--url", base, "--token", ADMIN_TOKEN,
                 "--out", str(out)],
            )  # fmt: skip
            assert code == 0 and '"room":"demo"' in out.read_text()


async def test_the_http_api_through_nginx_under_a_sub_path(tmp_path: Path) -> None:
    """Commands, reads and the event stream through the docs' nginx blocks:
    the body goes up, and the stream comes down as it happens (the docs'
    `proxy_buffering off`)."""
    async with LiveTable(tmp_path / "data") as table:
        with nginx(table.port, tmp_path / "nginx") as proxy:
            async with api(proxy + PREFIX.rstrip("/")) as c:
                path = f"/api/v1/rooms/{ROOM}/events"
                async with c.stream("GET", path, headers=bearer(table.token("p1"))) as r:
                    assert r.status_code == 200
                    stream = EventReader(r)
                    assert (await stream.next()).event == "snapshot"
                    body = {"op": "damage", "args": {"char": "c1", "amount": 1}}
                    key = {"Idempotency-Key": "px-1"}
                    sent = await c.post(
                        f"/api/v1/rooms/{ROOM}/commands",
                        json=body,
                        headers=bearer(table.token("gm"), **key),
                    )
                    assert sent.status_code == 200, sent.text
                    e = await stream.next()
                    assert (e.event, e.id) == ("patch", sent.json()["v"])
                view = await c.get(f"/api/v1/rooms/{ROOM}", headers=bearer(table.token("p1")))
                assert view.status_code == 200 and view.json()["v"] == sent.json()["v"]
                doc = await c.get("/api/v1/openapi.json")
                assert doc.status_code == 200 and doc.json()["openapi"].startswith("3.1")


async def test_a_page_served_over_https_opens_wss(chromium: Any, tmp_path: Path) -> None:
    from playwright.async_api import expect

    from tests.server.test_tls import make_cert

    if shutil.which("openssl") is None:
        pytest.skip("needs openssl")
    cert, key = make_cert(tmp_path / "certs", "page")
    async with running_server(tmp_path / "data", tls_cert=cert, tls_key=key) as srv:
        from sync_server.ops.demo import ensure_demo

        people = await ensure_demo(srv)
        ctx = await chromium.new_context(ignore_https_errors=True)
        page = await ctx.new_page()
        await page.goto(f"{srv.http_url}/#room=demo&token={people['gm']['token']}")
        await expect(page.locator("#status")).to_have_attribute("data-status", "connected")
        assert (await page.evaluate("window.vttClient.url")).startswith("wss://127.0.0.1:")
        async with Client(
            srv.url, people["p1"]["token"], "demo", ssl_context=tls_context(str(cert))
        ) as py:
            assert py.version == await page.evaluate("window.vttClient.version")
        await ctx.close()
