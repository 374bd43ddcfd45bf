"""The built Foundry module in real headless Chromium, in an https page (a
stand-in of Foundry's globals, tests/foundry/page.html, served by
Playwright's router as https://foundry.test/), against a real vtt-sync
server with TLS (a self-signed certificate made here with openssl):

- mixed content: Chromium's WebSocket constructor throws SecurityError for
  ws:// from an https page (what the module's guard reports as final), and
  a ws:// server URL is refused before any connection, with one notice;
- wss:// with a certificate the browser does not trust: one notice naming
  the certificate, no "connected";
- the same certificate trusted (the context ignores certificate errors, as
  a browser where the GM accepted it): a bare host:port gets wss://, the
  indicator goes green inside the player list without covering it, and the
  sheet panel is drawn in an AppV1 window's content, staying there when a
  re-render passes only the inner form; hostile server text stays text.

Without Chromium or Playwright these tests skip locally and FAIL in CI."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sync_server.testing.server import create_table, running_server
from tests.helpers.browser import ARGS, CHROMIUM

pytestmark = [
    pytest.mark.timeout(120),
    # One worker runs the module: the build and its two Chromiums, once.
    pytest.mark.xdist_group("foundry-browser"),
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl"),
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ORIGIN = "https://foundry.test"
TYPES = {
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".css": "text/css",
    ".json": "application/json",
}


def make_cert(directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "server.crt", directory / "server.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=vtt-sync-test",
         "-keyout", str(key), "-out", str(cert),
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("foundry-build")
    subprocess.run(
        [sys.executable, str(REPO / "foundry" / "build.py"), "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return out / "vtt-sync"


@pytest_asyncio.fixture(loop_scope="session")
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    cert, key = make_cert(tmp_path / "certs")
    # The Foundry page's origin must be allowed (as a GM does with --allow-origin).
    async with running_server(
        tmp_path / "data", tls_cert=cert, tls_key=key, allowed_origins={ORIGIN}
    ) as srv:
        table = await create_table(srv.url, ssl=ssl.create_default_context(cafile=str(cert)))
        yield srv, table


# Chromium's Local Network Access checks block a public origin (the page's
# https://foundry.test) from reaching a loopback server (the test's): off in
# these browsers, which stand for a Foundry and a server on one network.
LNA_OFF = "--disable-features=LocalNetworkAccessChecks"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def browsers(pw: Any) -> AsyncIterator[dict[str, Any]]:
    """Two Chromiums: `plain` does not trust the self-signed certificate;
    `trusting` does (as a browser where the GM opened the server's https://
    page and accepted it: Playwright's ignore_https_errors does not reach
    WebSockets, the command-line switch does). Launched from the test
    process's Playwright (tests/helpers/browser.py), for this module only."""
    launch = pw.chromium.launch
    plain = await launch(executable_path=CHROMIUM, args=[*ARGS, LNA_OFF])
    trusting = await launch(
        executable_path=CHROMIUM, args=[*ARGS, LNA_OFF, "--ignore-certificate-errors"]
    )
    try:
        yield {"plain": plain, "trusting": trusting}
    finally:
        await plain.close()
        await trusting.close()


async def open_foundry(chromium: Any, built: Path, query: str) -> Any:
    """A page of the stand-in Foundry: in a new context of `chromium` (a
    browser), or a new page of `chromium` if it is a context (pages of one
    context share the origin's localStorage, as tabs of a browser do)."""
    ctx = await chromium.new_context() if hasattr(chromium, "new_context") else chromium
    page = await ctx.new_page()
    page.js_errors = []
    page.on("pageerror", lambda exc: page.js_errors.append(str(exc)))

    async def serve(route: Any) -> None:
        path = route.request.url.split(ORIGIN, 1)[1].split("?", 1)[0]
        if path in ("/", "/index.html"):
            await route.fulfill(body=(HERE / "page.html").read_text(), content_type="text/html")
            return
        file = built / path.removeprefix("/vtt-sync/")
        if path.startswith("/vtt-sync/") and file.is_file():
            kind = TYPES.get(file.suffix, "text/plain")
            await route.fulfill(body=file.read_bytes(), content_type=kind)
        else:
            await route.fulfill(status=404, body="")

    await ctx.route(f"{ORIGIN}/**", serve)
    await page.goto(f"{ORIGIN}/?{query}")
    await page.wait_for_function("window.booted === true")
    return page


async def notices(page: Any) -> list[str]:
    texts = "els => els.map(e => e.textContent)"
    return await page.eval_on_selector_all("#notifications li", texts)


async def test_mixed_content_is_refused_by_chromium_and_reported_once(
    chromium: Any, built: Path
) -> None:
    page = await open_foundry(chromium, built, "url=ws://vtt.test:8765&room=r1&token=t")
    try:
        # Chromium's own refusal, which the module's guard turns into a final report.
        name = await page.evaluate(
            "() => { try { new WebSocket('ws://vtt.test:8765/'); return 'none'; }"
            " catch (e) { return e.name; } }"
        )
        assert name == "SecurityError"
        guarded = await page.evaluate(
            """async () => {
              const { guardedWebSocket } = await import('/vtt-sync/scripts/connection.mjs');
              const seen = [];
              const G = guardedWebSocket(WebSocket, { configured: 'ws://vtt.test:8765/',
                onInsecure: (url, err) => seen.push(err.name) });
              try { new G('ws://vtt.test:8765/'); } catch (e) { seen.push('thrown'); }
              return seen;
            }"""
        )
        assert guarded == ["SecurityError", "thrown"]
        await page.wait_for_timeout(1500)
        texts = await notices(page)
        assert len(texts) == 1, texts
        assert "https, so the browser refuses to connect to ws://vtt.test:8765" in texts[0]
        assert "Put wss://vtt.test:8765 in the server URL setting" in texts[0]
        assert await page.get_attribute("#vtt-sync-indicator", "class") == "vtt-sync-dot failed"
        assert page.js_errors == []
    finally:
        await page.context.close()


async def test_wss_with_an_untrusted_certificate_is_reported_once_naming_the_certificate(
    browsers: dict[str, Any], built: Path, tls_server: tuple[Any, Any]
) -> None:
    srv, table = tls_server
    query = f"url={srv.url}&room={table.room}&token={table.tokens['gm']}"
    page = await open_foundry(browsers["plain"], built, query)
    page.console = []
    page.on("console", lambda m: page.console.append(m.text))
    try:
        await page.wait_for_selector("#notifications li", timeout=10_000)
        await page.wait_for_timeout(2500)  # retries happen meanwhile: still one notice
        texts = await notices(page)
        assert len(texts) == 1, texts
        assert "does not trust its certificate" in texts[0]
        assert "open https://127.0.0.1:" in texts[0]
        assert f"--allow-origin {ORIGIN}" in texts[0]
        shown = await page.get_attribute("#vtt-sync-indicator", "class") or ""
        assert "connected" not in shown.split()
        assert table.tokens["gm"] not in "".join(texts)
        # The cause, as Chromium saw it (a page's script cannot tell).
        assert any("ERR_CERT_AUTHORITY_INVALID" in c for c in page.console), page.console
    finally:
        await page.context.close()


async def test_trusted_wss_connects_from_a_bare_host_and_draws_indicator_and_panel(
    browsers: dict[str, Any], built: Path, tls_server: tuple[Any, Any]
) -> None:
    srv, table = tls_server
    bare = srv.url.removeprefix("wss://").rstrip("/")  # host:port, no scheme: wss:// from https
    query = f"url={bare}&room={table.room}&token={table.tokens['gm']}"
    page = await open_foundry(browsers["trusting"], built, query)
    try:
        try:
            await page.wait_for_selector("#vtt-sync-indicator.connected", timeout=10_000)
        except Exception:
            raise AssertionError(
                f"{await notices(page)} {await page.get_attribute('#vtt-sync-indicator', 'class')}"
                f" {await page.get_attribute('#vtt-sync-indicator', 'title')} {page.js_errors}"
            ) from None
        # The indicator is a line of the player list, not over it.
        box = await page.evaluate(
            """() => {
              const r = (e) => e.getBoundingClientRect();
              const ind = document.getElementById('vtt-sync-indicator');
              const overlaps = [...document.querySelectorAll('#players li')].some((li) => {
                const a = r(ind), b = r(li);
                return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
              });
              return { parent: ind.parentElement.id, overlaps, visible: r(ind).height > 0 };
            }"""
        )
        assert box == {"parent": "players", "overlaps": False, "visible": True}
        # An AppV1 sheet: the first render passes the whole window, a re-render only the form.
        placed = await page.evaluate(
            """async () => {
              const win = document.createElement('div');
              win.className = 'app window-app';
              win.innerHTML = '<header class="window-header">Aline</header>'
                + '<section class="window-content"><form class="sheet">v1</form></section>';
              document.body.append(win);
              const app = { actor: window.actor, element: [win] };  // jQuery-like
              Hooks.callAll('renderActorSheet', app, [win]);
              const form2 = document.createElement('form');
              form2.className = 'sheet'; form2.textContent = 'v2';
              win.querySelector('form').replaceWith(form2);           // Application#_replaceHTML
              Hooks.callAll('renderActorSheet', app, [form2]);
              const panels = win.querySelectorAll('.vtt-sync-panel');
              return { count: panels.length, parent: panels[0].parentElement.className,
                       inForm: Boolean(form2.querySelector('.vtt-sync-panel')),
                       text: panels[0].textContent };
            }"""
        )
        assert placed["count"] == 1 and placed["parent"] == "window-content"
        assert not placed["inForm"]
        assert "HP" in placed["text"] and "SP" in placed["text"]  # sfrpg's names
        # Hostile text from the server (a character's name) stays text in a notification.
        injected = await page.evaluate(
            """async () => {
              const { escapeHtml } = await import('/vtt-sync/scripts/html.mjs');
              window.ui.notifications.warn(escapeHtml('<img src=x onerror="window.pwned=1">'));
              await new Promise((r) => setTimeout(r, 100));
              const imgs = document.querySelectorAll('#notifications img').length;
              return { pwned: window.pwned ?? null, imgs };
            }"""
        )
        assert injected == {"pwned": None, "imgs": 0}
        assert await page.evaluate("window.hookErrors") == []
        assert page.js_errors == []
    finally:
        await page.context.close()


async def test_at_init_the_menu_is_one_foundry_accepts_and_the_token_is_this_users(
    browsers: dict[str, Any], built: Path, tls_server: tuple[Any, Any]
) -> None:
    """Issue 32, items 1 and 6, in a real page: the settings menu passes
    registerMenu's rule (an ApplicationV2 subclass: a plain class threw at
    init); the GM's token, kept in this origin's localStorage, is the GM's
    for this world only: Paul, opening the world in the same browser, gets
    no connection (the GM's token used to connect him as the GM)."""
    srv, table = tls_server
    ctx = await browsers["trusting"].new_context()
    base = f"url={srv.url}&room={table.room}&world=w1"
    try:
        maya = await open_foundry(ctx, built, f"{base}&user=U1&token={table.tokens['gm']}")
        await maya.wait_for_selector("#vtt-sync-indicator.connected", timeout=10_000)
        menu = await maya.evaluate(
            "() => { const m = window.menus.get('vtt-sync.connection');"
            " return { restricted: m.restricted,"
            " v2: m.type.prototype instanceof foundry.applications.api.ApplicationV2 }; }"
        )
        assert menu == {"restricted": False, "v2": True}
        assert await maya.evaluate("window.hookErrors") == []
        await maya.close()
        paul = await open_foundry(ctx, built, f"{base}&user=U2")
        await paul.wait_for_selector("#notifications li", timeout=10_000)
        await paul.wait_for_timeout(500)
        assert await paul.evaluate("window.sockets") == 0
        assert "off" in (await paul.get_attribute("#vtt-sync-indicator", "class") or "").split()
        texts = await notices(paul)
        assert len(texts) == 1 and "enter your own token" in texts[0], texts
        assert await paul.evaluate("window.hookErrors") == []
        # Maya's token is still hers, in this browser, for this world.
        stored = await paul.evaluate("JSON.parse(localStorage.getItem('vtt-sync.tokens'))")
        assert stored == {"w1/U1": table.tokens["gm"]}
    finally:
        await ctx.close()


async def test_a_player_sheet_form_submits_every_input_and_only_the_change_counts(
    browsers: dict[str, Any], built: Path, tls_server: tuple[Any, Any]
) -> None:
    """Issue 32, item 2, with a real form: an AppV1 sheet (sfrpg's) submits
    every named input on any change (FormApplication#_onChangeInput ->
    _onSubmit -> _getSubmitData); the player's rename reaches the actor and
    no notice says the server keeps HP/SP/RP (it did, for every change)."""
    srv, table = tls_server
    ctx = await browsers["trusting"].new_context()
    query = (
        f"url={srv.url}&room={table.room}&world=w1&user=U2&token={table.tokens['p1']}"
        f"&char={table.chars['c_p1']}"
    )
    try:
        page = await open_foundry(ctx, built, query)
        await page.wait_for_selector("#vtt-sync-indicator.connected", timeout=10_000)
        result = await page.evaluate(
            """async () => {
              const a = window.actor;
              const form = document.createElement('form');
              form.innerHTML = `<input name="name" value="${a.name}">`;
              for (const pool of ['hp', 'sp', 'rp']) {
                const input = document.createElement('input');
                input.name = `system.attributes.${pool}.value`;
                input.dataset.dtype = 'Number';
                input.value = String(a.system.attributes[pool].value);
                form.append(input);
              }
              const win = document.createElement('div');
              win.className = 'app window-app';
              win.innerHTML = '<section class="window-content"></section>';
              win.firstChild.append(form);
              document.body.append(win);
              Hooks.callAll('renderActorSheet', { actor: a, element: [win] }, [win]);
              const submitted = [];
              form.addEventListener('change', async () => {
                const data = {};
                for (const el of form.elements) {
                  if (!el.name) continue;
                  data[el.name] = el.dataset.dtype === 'Number' ? Number(el.value) : el.value;
                }
                submitted.push(Object.keys(data).length);
                await a.update(data);
              });
              const name = form.querySelector('[name="name"]');
              name.value = 'Aline the brave';
              name.dispatchEvent(new Event('change', { bubbles: true }));
              await new Promise((r) => setTimeout(r, 200));
              return { name: a.name, hp: a.system.attributes.hp.value, submitted };
            }"""
        )
        assert result == {"name": "Aline the brave", "hp": 20, "submitted": [4]}
        assert await notices(page) == []
        assert await page.evaluate("window.hookErrors") == []
        assert page.js_errors == []
    finally:
        await ctx.close()
