"""The tracker page in Chromium for a real campaign (issue "Campaign play"):
invitation links that name the address friends reach, toasts that cover
nothing that acts, clicks made while the server is unreachable (counted,
then applied or expired, the ack telling either way), Table setup folding
away once the table is set, and the README's screenshots (docs/*.png,
written again by every run so they stay current).

Without Chromium or Playwright these tests skip locally and FAIL in CI."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from client_stub import Client
from rules.testing import SHEET
from sync_server.hosting.config import Config
from sync_server.testing.server import ADMIN_TOKEN
from tests.client import test_browser as shared
from tests.helpers.live_table import ROOM, LiveTable
from tests.helpers.server import test_config

browser = shared.browser  # the shared Chromium, its pages closed after each test
open_page = shared.open_page
SYNC_MS = shared.SYNC_MS
pytestmark = [pytest.mark.timeout(120), pytest.mark.asyncio(loop_scope="session")]

DOCS = Path(__file__).resolve().parents[2] / "docs"


class PublicTable(LiveTable):
    """The demo table on a server told its public address."""

    public_url = "https://vtt.example/vtt/"

    def _config(self) -> Config:
        return test_config(self.data_dir, port=self.port, rate=None, public_url=self.public_url)


@pytest_asyncio.fixture(loop_scope="session")
async def table(tmp_path: Path) -> AsyncIterator[LiveTable]:
    async with LiveTable(tmp_path / "data") as t:
        yield t


async def invite(gm: Any, name: str) -> str:
    from playwright.async_api import expect

    if await gm.locator("#setup").get_attribute("open") is None:
        await gm.click("#setup summary")
    await gm.fill('#invite-form [name="name"]', name)
    await gm.select_option('#invite-form [name="role"]', "player")
    await gm.click('#invite-form button[type="submit"]')
    await expect(gm.locator("#link-box")).to_be_visible()
    return await gm.locator("#link-url").input_value()


async def test_an_invitation_on_a_loopback_page_says_it_works_here_only(
    browser: Any, table: LiveTable
) -> None:
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    link = await invite(gm, "Dana")
    assert link.startswith(table.http_url + "#room=demo&token=")
    await expect(gm.locator("#link-local")).to_be_visible()
    await expect(gm.locator("#link-local")).to_contain_text("--public-url")
    assert gm.js_errors == []


async def test_an_invitation_names_the_public_url(browser: Any, tmp_path: Path) -> None:
    from playwright.async_api import expect

    async with PublicTable(tmp_path / "public") as t:
        gm = await open_page(browser, t.page("gm"))
        link = await invite(gm, "Eve")
        assert link.startswith("https://vtt.example/vtt/#room=demo&token="), link
        await expect(gm.locator("#link-local")).to_be_hidden()
        assert gm.js_errors == []


# What a click can reach: a toast over one of these hides something that acts.
ACTIONABLE = "button, input, select, textarea, summary, a[href], [role=button]"

OVERLAPS = """(sel) => {
  // Where a toast overlaps an actionable element, would a click there (the
  // toasts set aside) reach that element? (Elements under the sticky top
  // bar are not reachable anyway.)
  const area = document.querySelector("#errors");
  const toasts = [...area.querySelectorAll(".toast")].map((t) => t.getBoundingClientRect());
  area.style.visibility = "hidden";
  const hit = [];
  for (const node of document.querySelectorAll(sel)) {
    if (node.closest("#errors")) continue;
    const r = node.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    for (const t of toasts) {
      const left = Math.max(r.left, t.left), right = Math.min(r.right, t.right);
      const top = Math.max(r.top, t.top), bottom = Math.min(r.bottom, t.bottom);
      if (left >= right || top >= bottom) continue;
      const under = document.elementFromPoint((left + right) / 2, (top + bottom) / 2);
      if (under && node.contains(under)) hit.push(node.id || node.textContent.trim().slice(0, 30));
    }
  }
  area.style.visibility = "";
  return { hit, toasts: toasts.map((t) => t.height) };
}"""


@pytest.mark.parametrize("width,height", [(1280, 900), (390, 844)])
async def test_toasts_cover_nothing_that_acts(
    browser: Any, table: LiveTable, width: int, height: int
) -> None:
    """A burst of toasts during a combat (End turn showing) sits over the top
    bar only, each on one line, as many as fit; at desktop and phone width."""
    from playwright.async_api import expect

    async with Client(table.url, table.token("gm"), ROOM) as py:
        if (await table.state())[1]["combat"] is None:
            await py.command("combat_start", order=["c1", "c2"])
        gm = await open_page(browser, table.page("gm"), width=width, height=height)
        await expect(gm.locator("#end-turn")).to_be_visible()
        if await gm.locator("#setup").get_attribute("open") is None:
            await gm.click("#setup summary")
        for _ in range(5):  # "Nothing changed", five times
            await gm.click('#room-form button[type="submit"]')
        await expect(gm.locator("#errors .toast").first).to_be_visible()
        for scroll in (0, 400):  # the top bar is sticky: so are the toasts
            await gm.evaluate(f"window.scrollTo(0, {scroll})")
            found = await gm.evaluate(OVERLAPS, ACTIONABLE)
            assert found["hit"] == [], found
            assert 1 <= len(found["toasts"]) <= 3, found
            assert all(h < 32 for h in found["toasts"]), found  # one line each
        assert gm.js_errors == []


async def test_clicks_while_the_server_is_away_wait_then_apply(
    browser: Any, table: LiveTable
) -> None:
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    clock = (await table.state())[1]["clock"]
    await table.stop()
    await expect(gm.locator("#status")).not_to_have_attribute("data-status", "connected")
    await gm.click('#gm-controls button[data-seconds="60"]')
    await expect(gm.locator("#waiting")).to_have_text("1 action waiting")
    await gm.click('#gm-controls button[data-seconds="600"]')
    await expect(gm.locator("#waiting")).to_have_text("2 actions waiting")
    await table.start()  # the same port and data
    await gm.evaluate("window.vttClient.retryNow()")
    await expect(gm.locator("#status")).to_have_attribute("data-status", "connected", timeout=15000)
    await expect(gm.locator("#waiting")).to_be_hidden()
    done = gm.locator(".toast.ok", has_text="applied once the server answered")
    await expect(done).to_have_count(2, timeout=SYNC_MS)
    assert (await table.state())[1]["clock"] == clock + 660
    assert gm.js_errors == []


async def test_clicks_while_the_server_is_away_expire_and_say_so(
    browser: Any, table: LiveTable
) -> None:
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    await gm.evaluate("window.vttWaitExpiresMs = 1500")
    clock = (await table.state())[1]["clock"]
    await table.stop()
    await expect(gm.locator("#status")).not_to_have_attribute("data-status", "connected")
    await gm.click('#gm-controls button[data-seconds="60"]')
    await expect(gm.locator("#waiting")).to_have_text("1 action waiting")
    expired = gm.locator(".toast.error", has_text="did not answer in time; nothing changed")
    await expect(expired).to_have_count(1, timeout=10000)
    await expect(gm.locator(".toast.error .toast-title").first).to_have_text("Not sent")
    await expect(gm.locator("#waiting")).to_be_hidden()
    await table.start()
    await gm.evaluate("window.vttClient.retryNow()")
    await expect(gm.locator("#status")).to_have_attribute("data-status", "connected", timeout=15000)
    assert await gm.evaluate("window.vttClient.pendingCommands.length") == 0
    assert (await table.state())[1]["clock"] == clock  # never sent, never applied
    assert gm.js_errors == []


async def test_table_setup_folds_away_once_play_starts(browser: Any, table: LiveTable) -> None:
    """Open on an empty table; setting it up keeps it open; the first play
    (a clock advance) folds it, its line saying what the table holds;
    opened again by hand, it stays open."""
    from playwright.async_api import expect

    async with Client(table.url, ADMIN_TOKEN, None) as admin:
        ack = await admin.command("create_room", room="fresh", name="Fresh table", gm_name="Maya")
    token = ack["result"]["gm_token"]
    gm = await open_page(browser, f"{table.http_url}#room=fresh&token={token}")
    setup = gm.locator("#setup")
    await expect(setup).to_have_attribute("open", "")
    async with Client(table.url, token, "fresh") as py:  # setting up: it stays open
        await py.command("add_user", name="Dana", role="player")
        await py.command("add_character", **SHEET, name="Aline")
        await expect(gm.locator('#setup-chars [data-char="c1"]')).to_be_visible()
        await expect(setup).to_have_attribute("open", "")
        await gm.click('#gm-controls button[data-seconds="60"]')  # play starts
        await expect(setup).not_to_have_attribute("open", "")
        await expect(gm.locator("#setup-summary")).to_have_text(
            "2 people · 1 character · open to change"
        )
        await gm.click("#setup summary")
        await py.command("advance_clock", seconds=6)
        await expect(gm.locator("#clock")).to_have_attribute("data-seconds", "66")
        await expect(setup).to_have_attribute("open", "")
    assert gm.js_errors == []


async def test_the_admin_page_lists_exports_deletes_and_reissues_a_gm_link(
    browser: Any, table: LiveTable, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    async with Client(table.url, ADMIN_TOKEN, None) as admin:
        await admin.command("create_room", room="spare", name="Spare table", gm_name="Ana")
    player = await open_page(browser, table.page("p1"))  # someone connected to the demo
    ctx = await browser.new_context(accept_downloads=True)
    page = await ctx.new_page()
    page.js_errors = []
    page.on("pageerror", lambda exc: page.js_errors.append(str(exc)))
    await page.goto(f"{table.http_url}admin.html#token={ADMIN_TOKEN}")
    demo = page.locator('#rooms-table tr[data-room="demo"]')
    await expect(demo.locator(".room-name")).to_have_text("Demo table")
    await expect(demo.locator(".room-who")).to_contain_text("Aline's player (player)")
    v, _ = await table.state()
    await expect(demo.locator(".room-v")).to_have_text(str(v))
    assert "token" not in page.url  # the token left the address bar
    # export: the room file, downloaded
    async with page.expect_download() as info:
        await demo.locator('button[data-action="export"]').click()
    download = await info.value
    saved = tmp_path / "demo.json"
    await download.save_as(saved)
    assert json.loads(saved.read_text())["room"] == "demo"
    # a new GM link: asked first; it opens the GM's seat
    await demo.locator('button[data-action="gm-link"]').click()
    title = page.locator("#confirm-title")
    await expect(title).to_have_text("A new link for the GM of Demo table?")
    await page.click("#confirm-ok")
    link = page.locator("#room-link-url")
    await expect(link).to_have_value(re.compile(r"#room=demo&token="))
    gm = await open_page(browser, await link.input_value())
    await expect(gm.locator("#whoami")).to_contain_text("gm")
    table.people["gm"]["token"] = (await link.input_value()).rsplit("token=", 1)[1]
    # delete: asked first; cancelled, nothing happens
    spare = page.locator('#rooms-table tr[data-room="spare"]')
    await spare.locator('button[data-action="delete"]').click()
    await expect(page.locator("#confirm-title")).to_have_text("Delete Spare table (spare)?")
    await page.click("#confirm-cancel")
    await expect(spare).to_have_count(1)
    await spare.locator('button[data-action="delete"]').click()
    await page.click("#confirm-ok")
    await expect(spare).to_have_count(0)
    assert table.server is not None and not table.server.rooms.exists("spare")
    assert page.js_errors == [] and player.js_errors == []


async def test_the_page_says_what_happened_in_words(browser: Any, table: LiveTable) -> None:
    """A status NPC joins (not "changes") on a player's page, in the page's
    JS as in Python; a stable character's card says when its next check
    comes; healing that restores nothing says so."""
    from playwright.async_api import expect

    from client_stub.events import EventText, Names
    from tests.client.test_events import status_npc_patches

    names = Names()
    text = EventText(names)
    samples, expected = [], []
    for ops, events, state in status_npc_patches():
        names.update(state)
        samples.append([ops, events[0], state])
        expected.append(text.sentence(text.complete(events[0], ops)))
    player = await open_page(browser, table.page("p1"))
    said = await player.evaluate(
        """async (samples) => {
          const m = await import("./event-text.js");
          const known = new m.Names();
          const text = new m.EventText(await m.loadTexts(), known);
          return samples.map(([ops, ev, state]) => {
            known.update(state);
            return text.sentence(text.complete(ev, ops));
          });
        }""",
        samples,
    )
    assert (
        said
        == expected
        == ["Goblin chief joins the table (id c1)", "Goblin chief leaves the table"]
    )
    async with Client(table.url, table.token("gm"), ROOM) as gm:
        await gm.command("add_character", **SHEET, name="Goblin chief")  # the GM's: status
        feed = player.locator("#feed")
        await expect(feed).to_contain_text("Goblin chief joins the table")
        await gm.command("damage", char="c1", amount=100, nonlethal=True)  # down, stable (N1)
        card = player.locator('[data-char="c1"] .stability')
        await expect(card).to_have_text(
            await stability_text(player, gm.version, "stable for 0s", "1h")
        )
        await gm.command("advance_clock", seconds=600)
        await expect(card).to_have_text(
            await stability_text(player, gm.version, "stable for 10m", "50m")
        )
        await gm.command("heal", char="c2", amount=2)  # Bastien is unhurt
        await expect(feed).to_contain_text("Bastien: healing 2 restores nothing (PV already full")

    # L1's schedule is the server's (the view's `next_check`), never the
    # page's: a patch setting it, as the server sends it, is what the card says.
    v = await player.evaluate("window.vttClient.version")
    clock = await player.evaluate("window.vttClient.state.clock")
    for value, text in (
        (
            {"at": clock + 1500, "n": 3, "of": 8},
            "stable for 10m · Constitution check 3 of 8 in 25m",
        ),
        (None, "stable for 10m"),  # no check left: the time stable only
    ):
        v += 1
        frame = {"t": "patch", "v": v, "ops": [["set", ["characters", "c1", "next_check"], value]]}
        await player.evaluate("(f) => window.vttClient._handle(f)", {**frame, "events": []})
        await expect(card).to_have_text(text)
    assert player.js_errors == []


async def stability_text(page: Any, v: int, since: str, check_in: str) -> str:
    """A stable character's card line (Aline's, c1) once the page is at
    version `v`: its time stable and L1's next Constitution check, as the
    server's view gives it (`next_check`: the first of 8, an hour after
    the character became stable)."""
    from playwright.async_api import expect

    await expect(page.locator("#version")).to_have_text(f"v{v}")
    next_check = await page.evaluate("window.vttClient.state.characters.c1.next_check")
    assert next_check is not None and (next_check["n"], next_check["of"]) == (1, 8)
    return f"{since} · Constitution check 1 of 8 in {check_in}"


CLEAR_TOASTS = "document.querySelectorAll('#errors .toast').forEach((t) => t.remove())"


async def test_readme_screenshots_of_the_gms_and_a_players_page(
    browser: Any, table: LiveTable
) -> None:
    """The README's pictures (docs/screenshot-gm.png, docs/screenshot-player.png,
    docs/screenshot-combat-edit.png), taken again by every run so they show
    the page as it is: the demo table in a combat, a character hurt, the
    goblin (a status NPC) hit; the combat panel in edit mode."""
    from playwright.async_api import expect

    async with Client(table.url, table.token("gm"), ROOM) as gm:
        await gm.command("combat_start", order=["c1", "c2", "c4", "c3"])
        await gm.command("damage", char="c2", amount=12)
        await gm.command("damage", char="c4", amount=3)
        await gm.command("end_turn", char="c1")
    gm_page = await open_page(browser, table.page("gm"), width=1280, height=860)
    await expect(gm_page.locator("#combat-order li.current")).to_have_attribute("data-char", "c2")
    player = await open_page(browser, table.page("p2"), width=390, height=844)
    await expect(player.locator("#turn-text")).to_contain_text("Your turn")
    for page in (gm_page, player):
        await page.evaluate(
            "document.querySelectorAll('#errors .toast').forEach((t) => t.remove())"
        )
    await gm_page.screenshot(path=str(DOCS / "screenshot-gm.png"))
    await player.screenshot(path=str(DOCS / "screenshot-player.png"))
    # the combat panel in edit mode (the GM changes a running combat in place)
    await gm_page.click("#combat-edit")
    await expect(gm_page.locator("#combat-order [data-edit]").first).to_be_visible()
    await gm_page.locator("#combat").screenshot(path=str(DOCS / "screenshot-combat-edit.png"))
    for name in ("screenshot-gm.png", "screenshot-player.png", "screenshot-combat-edit.png"):
        assert (DOCS / name).stat().st_size > 10_000
    assert gm_page.js_errors == [] and player.js_errors == []
