"""The tracker page in real headless Chromium (Debian's, through Playwright's
Python API): a GM page, a player page and a Python client on one room.

Without Chromium or Playwright these tests skip locally and FAIL in CI (CI set).
Screenshots go to test-artifacts/ at the repository root."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from client_stub import Client
from tests.helpers.live_table import ROOM, LiveTable

# One Chromium for the test process (tests/helpers/browser.py), so the tests
# and their fixtures share the session's event loop.
pytestmark = [pytest.mark.timeout(90), pytest.mark.asyncio(loop_scope="session")]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SYNC_MS = 1000  # a command from one client shows on the others within a second


@pytest_asyncio.fixture(loop_scope="session")
async def browser(chromium: Any) -> AsyncIterator[Any]:
    """The shared Chromium; the pages a test opened are closed after it."""
    yield chromium
    for ctx in chromium.contexts:
        await ctx.close()


@pytest_asyncio.fixture(loop_scope="session")
async def table(tmp_path: Path) -> AsyncIterator[LiveTable]:
    async with LiveTable(tmp_path / "data") as t:
        yield t


def watched(page: Any) -> Any:
    """`page.js_errors`: its uncaught errors, and whatever the pages'
    Content-Security-Policy blocked (the page must need nothing it forbids)."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def console(msg: Any) -> None:
        if "Content Security Policy" in msg.text:
            errors.append(msg.text)

    page.on("console", console)
    page.js_errors = errors
    return page


async def open_page(browser: Any, url: str, width: int = 1280, height: int = 900) -> Any:
    from playwright.async_api import expect

    ctx = await browser.new_context(viewport={"width": width, "height": height})
    page = watched(await ctx.new_page())
    await page.goto(url)
    await expect(page.locator("#status")).to_have_attribute("data-status", "connected")
    return page


async def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def record(name: str, ms: float) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "client-latency.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = round(ms, 1)
    path.write_text(json.dumps(data, indent=2) + "\n")


async def test_gm_page_player_page_and_python_client_stay_in_sync(
    browser: Any, table: LiveTable
) -> None:
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    player = await open_page(browser, table.page("p1"), width=390, height=844)  # a phone
    aline = '[data-char="c1"]'  # Aline belongs to p1
    async with Client(table.url, table.token("p2"), ROOM) as py:
        # 1. GM page -> player page and Python client
        await gm.fill(f"{aline} .amount", "4")
        t0 = time.perf_counter()
        await gm.click(f'{aline} button[data-action="damage"]')
        await expect(player.locator(f"{aline} .pe .value")).to_have_text("11 / 15", timeout=SYNC_MS)
        record("gm_page_to_player_page_ms", (time.perf_counter() - t0) * 1000)
        await py.wait_for(lambda s: s["characters"]["c1"]["pe"] == 11, timeout=SYNC_MS / 1000)

        # 2. Python client -> both pages (as the GM's second client)
        async with Client(table.url, table.token("gm"), ROOM) as pygm:
            t0 = time.perf_counter()
            await pygm.command("damage", char="c1", amount=40)
            for page in (gm, player):
                await expect(page.locator(f"{aline} .condition")).to_have_text(
                    "dying", timeout=SYNC_MS
                )
            record("python_client_to_both_pages_ms", (time.perf_counter() - t0) * 1000)
            await expect(gm.locator(f"{aline} .pv .value")).to_have_text("0 / 20")

            # 3. player page -> GM page and Python client: stabilize (S3)
            stabilize = player.locator(f'{aline} button[data-action="stabilize"]')
            await expect(stabilize).to_be_visible()
            t0 = time.perf_counter()
            await stabilize.click()
            await expect(gm.locator(f"{aline} .condition")).to_have_text("stable", timeout=SYNC_MS)
            record("player_page_to_gm_page_ms", (time.perf_counter() - t0) * 1000)
            await py.wait_for(
                lambda s: s["characters"]["c1"]["condition"] == "stable", SYNC_MS / 1000
            )

            # 4. a roll in the feed: first aid by Bastien (c2) from the GM page
            await pygm.command("damage", char="c1", amount=1)  # stable -> dying (D3)
            await expect(gm.locator(f"{aline} .aid")).to_be_visible()
            await gm.select_option(f"{aline} .medic", "c2")
            await gm.click(f'{aline} button[data-action="first_aid"]')
            roll = player.locator('#feed li.event[data-kind="roll"]').first
            await expect(roll).to_be_visible(timeout=SYNC_MS)
            for part in (".v-d20", ".v-mod", ".v-total", ".v-dc", ".v-outcome"):
                await expect(roll.locator(part)).to_have_count(1)
            await expect(roll.locator(".v-dc")).to_have_text("15")
            await expect(roll).to_contain_text("Bastien rolls Medicine for Aline: d20 ")
            # the roll's result also shows where the GM clicked: Aline's card
            result = gm.locator(f"{aline} .card-result")
            await expect(result).to_contain_text("Bastien rolls Medicine for Aline: d20 ")
            assert (await result.locator(".v-total").inner_text()) == (
                await roll.locator(".v-total").inner_text()
            )

            # the three mirrors agree with the server
            v, state = await table.state()
            await py.wait_version(v, timeout=2)
            assert pygm.state == state and py.state == table.seen("p2", state)
            assert await gm.evaluate("window.vttClient.version") == v
            assert await player.evaluate("JSON.stringify(window.vttClient.state)") == json.dumps(
                table.seen("p1", state), separators=(",", ":"), ensure_ascii=False
            )

    # 5. role-based controls
    assert await gm.locator("#gm-controls").is_visible()
    await expect(gm.locator('[data-action="damage"]:visible')).to_have_count(4)
    await expect(player.locator("#gm-controls")).to_be_hidden()
    await expect(player.locator('[data-action="damage"]:visible')).to_have_count(0)
    await expect(player.locator('[data-action="heal"]:visible')).to_have_count(0)
    await expect(player.locator("#combat-setup")).to_be_hidden()
    await expect(player.locator('[data-action="undo"]:visible')).to_have_count(0)
    # the player's controls appear only on their own characters (and a patient's)
    await expect(player.locator('[data-char="c2"] .actions')).to_be_hidden()
    await expect(player.locator('[data-char="c2"] button:visible')).to_have_count(0)
    await expect(player.locator(f"{aline}.mine")).to_have_count(1)

    # 6. server errors are shown: a d20 of 25 is out of range
    await gm.fill("#queue-rolls", "25")
    await gm.click("#queue-rolls-btn")
    toast = gm.locator(".toast.error")
    await expect(toast).to_be_visible(timeout=SYNC_MS)
    await expect(toast.locator(".toast-title")).to_have_text("Check the values")  # plain words
    await expect(toast.locator(".toast-msg")).to_have_text(
        "rolls[0] must be between 1 and 20, got 25"
    )
    await expect(toast).to_have_attribute("data-code", "invalid_args")
    # ...and where it was typed: the field is marked, the words beside it
    await expect(gm.locator("#queue-rolls")).to_have_attribute("aria-invalid", "true")
    await expect(gm.locator("#queue-rolls + .field-error")).to_have_text(
        "Must be between 1 and 20, got 25"
    )

    # 7. phone width: nothing overflows horizontally
    width = await player.evaluate("document.documentElement.scrollWidth")
    assert width <= 390

    await shot(gm, "page-gm")
    await shot(player, "page-player-phone")
    assert gm.js_errors == [] and player.js_errors == []


async def test_observer_has_no_controls_and_page_survives_a_restart(
    browser: Any, table: LiveTable
) -> None:
    from playwright.async_api import expect

    obs = await open_page(browser, table.page("obs"))
    await expect(obs.locator('[data-char="c1"] .pv .value')).to_have_text("20 / 20")
    await expect(obs.locator("#characters button:visible")).to_have_count(0)
    await expect(obs.locator("#gm-controls")).to_be_hidden()
    await expect(obs.locator("#end-turn")).to_be_hidden()

    await table.restart()  # same data dir and port: the page reconnects and resumes
    await expect(obs.locator("#status")).to_have_attribute(
        "data-status", "connected", timeout=15000
    )
    async with Client(table.url, table.token("gm"), ROOM) as gm:
        await gm.command("combat_start", order=["c2", "c1"])
        await gm.command("advance_clock", seconds=3723)
    await expect(obs.locator("#combat-order li.current")).to_have_attribute(
        "data-char", "c2", timeout=SYNC_MS
    )
    await expect(obs.locator("#clock")).to_have_text("1h 02m 03s", timeout=SYNC_MS)
    assert await obs.evaluate("window.vttClient.connections") >= 2
    await shot(obs, "page-observer")
    assert obs.js_errors == []


async def test_bad_token_is_shown_with_a_way_back(browser: Any, table: LiveTable) -> None:
    from playwright.async_api import expect

    ctx = await browser.new_context()
    page = await ctx.new_page()
    await page.goto(f"{table.http_url}#room={ROOM}&token=nope")
    await expect(page.locator("#conn-error")).to_be_visible()
    await expect(page.locator("#conn-error")).to_contain_text("4401")
    await expect(page.locator("#status")).to_have_attribute("data-status", "failed")
    # the way back: paste the right link into the form
    await page.click("#conn-error-back")
    await expect(page.locator("#login")).to_be_visible()
    await page.fill('#login [name="token"]', table.page("p2"))
    await page.click('#login button[type="submit"]')
    await expect(page.locator("#status")).to_have_attribute("data-status", "connected")
    await expect(page.locator("#whoami")).to_have_text("Bastien's player · player")


async def test_new_page_shows_the_recent_log(browser: Any, table: LiveTable) -> None:
    from playwright.async_api import expect

    async with Client(table.url, table.token("gm"), ROOM) as gm:
        await gm.command("damage", char="c3", amount=30)  # Chloe: dying
        await gm.command("first_aid", char="c2", patient="c3", roll=17)  # 17 + 1 = 18: stable
        history = await gm.history(10)
        assert [e["kind"] for p in history for e in p["events"]].count("roll") == 1
    page = await open_page(browser, table.page("p3"))
    roll = page.locator('#feed li.event[data-kind="roll"]')
    await expect(roll).to_have_count(1)
    await expect(roll.locator(".v-d20")).to_have_text("17")
    await expect(roll.locator(".v-total")).to_have_text("18")
    await expect(roll.locator(".v-outcome")).to_have_text("success")
    # the log reads newest first: the condition change comes after (above) the damage
    kinds = await page.locator("#feed li.event").evaluate_all("els => els.map(e => e.dataset.kind)")
    assert kinds.index("roll") < kinds.index("damage")


async def test_a_player_tends_a_stable_character_from_the_page(
    browser: Any, table: LiveTable
) -> None:
    """L4 from the page: p1 picks its conscious Aline as Chloe's healer; the
    GM page shows it; p1 stops it. Observers get no tending controls."""
    from playwright.async_api import expect

    async with Client(table.url, table.token("gm"), ROOM) as gm:
        await gm.command("damage", char="c3", amount=30)
        await gm.command("heal", char="c3", amount=0, stabilize=True)  # stable at 0 PV (S2)
    player = await open_page(browser, table.page("p1"))
    gm_page = await open_page(browser, table.page("gm"))
    obs = await open_page(browser, table.page("obs"))
    chloe = '[data-char="c3"]'
    await expect(player.locator(f"{chloe} .tend")).to_be_visible()
    assert await player.locator(f"{chloe} .healer-pick option").all_inner_texts() == ["Aline"]
    await player.click(f'{chloe} button[data-action="tend"]')
    await expect(gm_page.locator(f"{chloe} .healer")).to_have_text(
        "tended by Aline", timeout=SYNC_MS
    )
    await expect(obs.locator(f"{chloe} .tend")).to_be_hidden()
    untend = player.locator(f'{chloe} button[data-action="untend"]')
    await expect(untend).to_be_visible()
    await untend.click()
    await expect(gm_page.locator(f"{chloe} .healer")).to_be_hidden(timeout=SYNC_MS)
    _, state = await table.state()
    assert state["characters"]["c3"]["healer"] is None
    assert player.js_errors == [] and gm_page.js_errors == [] and obs.js_errors == []


async def test_browser_client_fills_a_gap_and_resends_after_reconnect(browser: Any) -> None:
    """The ES module against the stand-in server: a lost patch makes it `sync`;
    a command sent while the server is down is sent once it is back."""
    from playwright.async_api import expect

    from tests.helpers.fake_server import FakeServer

    srv = await FakeServer().start()
    try:
        srv.add_character("Aline")
        page = await open_page(
            browser, f"http://127.0.0.1:{srv.port}/#room=r1&token={srv.gm_token}"
        )
        async with Client(srv.url, srv.gm_token, "r1") as py:
            srv.drop_next_patch = 1
            await py.command("damage", char="c1", amount=2)  # lost for everyone
            await py.command("damage", char="c1", amount=3)  # the page sees a gap
        await expect(page.locator('[data-char="c1"] .pe .value')).to_have_text("10 / 15")
        assert await page.evaluate("window.vttClient.version") == srv.version
        assert any(f.get("t") == "sync" for f in srv.received)

        port = srv.port
        await srv.stop()
        await expect(page.locator("#status")).not_to_have_attribute("data-status", "connected")
        # (`; null`: evaluate would otherwise wait for the promise)
        await page.evaluate(
            "window.pendingAck = window.vttClient.command('heal', {char: 'c1', amount: 1}); null"
        )
        srv.port = port
        await srv.start()
        ack = await page.evaluate("window.pendingAck")
        assert ack["t"] == "ack" and ack["v"] == srv.version
        await expect(page.locator('[data-char="c1"] .pv .value')).to_have_text("20 / 20")
        cmds = [f for f in srv.received if f.get("t") == "cmd" and f["op"] == "heal"]
        assert len(cmds) == 1
        assert page.js_errors == []
    finally:
        await srv.stop()


async def test_gm_sets_up_the_table_and_the_invited_player_link_works(
    browser: Any, table: LiveTable
) -> None:
    """From the GM's page only: the room's name, a player invited (a link to
    copy), a character created for them with every sheet field, its id shown,
    an edit, a removal, ability damage; the player's link opens their seat."""
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    await gm.click("#setup summary")
    room_form = gm.locator("#room-form")
    await room_form.locator('[name="name"]').fill("Thursday table")
    await room_form.locator('button[type="submit"]').click()
    await expect(gm.locator("#room-name")).to_have_text("Thursday table", timeout=SYNC_MS)

    # invite: a link with the token in the fragment
    await gm.fill('#invite-form [name="name"]', "Dana")
    await gm.select_option('#invite-form [name="role"]', "player")
    await gm.click('#invite-form button[type="submit"]')
    await expect(gm.locator("#link-box")).to_be_visible(timeout=SYNC_MS)
    await expect(gm.locator("#link-who")).to_have_text("Dana")
    link = await gm.locator("#link-url").input_value()
    assert link.startswith(f"{table.http_url}#room={ROOM}&token=")
    _, state = await table.state()
    dana = next(uid for uid, u in state["users"].items() if u["name"] == "Dana")
    await expect(gm.locator(f'#people [data-user="{dana}"]')).to_contain_text("player")

    # a character for Dana, from the form
    await gm.click("#new-char")
    form = gm.locator("#char-form")
    await expect(form).to_be_visible()
    fields = {"name": "Eve", "level": "2", "pv_max": "12", "pe_max": "8", "pp_max": "3"}
    fields |= {"con": "13", "wis": "14", "medicine": "4"}
    for name, value in fields.items():
        await form.locator(f'[name="{name}"]').fill(value)
    await form.locator('[name="owner"]').select_option(dana)
    await shot(gm, "page-gm-new-character")
    await form.locator("#char-save").click()
    await expect(gm.locator("#char-dialog")).to_be_hidden(timeout=SYNC_MS)
    _, state = await table.state()
    eve_id, eve = next((cid, c) for cid, c in state["characters"].items() if c["name"] == "Eve")
    assert (eve["owner"], eve["level"], eve["pv"], eve["pe_max"], eve["pp"]) == (dana, 2, 12, 8, 3)
    assert eve["abilities"] == {"str": 10, "dex": 10, "con": 13, "int": 10, "wis": 14, "cha": 10}
    assert eve["medicine"] == 4
    card = gm.locator(f'#characters [data-char="{eve_id}"]')
    await expect(card.locator(".char-id")).to_have_text(eve_id)  # the id commands need
    await expect(gm.locator(f'#setup-chars [data-char="{eve_id}"] .char-id')).to_have_text(eve_id)

    # edit: only what changed is sent
    await gm.click(f'#setup-chars [data-char="{eve_id}"] button[data-action="edit"]')
    await expect(form.locator('[name="pv_max"]')).to_have_value("12")
    await form.locator('[name="pv_max"]').fill("14")
    await form.locator("#char-save").click()
    await expect(card.locator(".pv .value")).to_have_text("12 / 14", timeout=SYNC_MS)

    # ability damage from the card (an occasional action: behind More); its result shows there
    await card.locator(".amount").fill("2")
    await card.locator(".more summary").click()
    await card.locator(".ability").select_option("con")
    await card.locator('button[data-action="ability_damage"]').click()
    await expect(card.locator(".card-result")).to_have_text(
        "Eve: Con damage +2 (now 2, modifier +0)", timeout=SYNC_MS
    )

    # removal asks first
    gorgol = '#setup-chars [data-char="c4"]'
    await gm.click(f'{gorgol} button[data-action="remove_character"]')
    await expect(gm.locator("#confirm")).to_be_visible()
    await expect(gm.locator("#confirm-title")).to_have_text("Remove Gorgol the goblin?")
    await gm.click("#confirm-ok")
    await expect(gm.locator('#characters [data-char="c4"]')).to_have_count(0, timeout=SYNC_MS)
    await shot(gm, "page-gm-setup")

    # Dana's link: her seat, her character first, her controls
    player = await open_page(browser, link, width=390, height=844)
    await expect(player.locator("#whoami")).to_have_text("Dana · player")
    first = player.locator("#characters .char").first
    await expect(first).to_have_attribute("data-char", eve_id)
    await expect(first).to_have_class(re.compile(r"\bmine\b"))
    await expect(first.locator('button[data-action="rest"]')).to_be_visible()
    await expect(player.locator("#setup")).to_be_hidden()
    assert gm.js_errors == [] and player.js_errors == []


async def test_undo_asks_first_and_says_what_it_undid(browser: Any, table: LiveTable) -> None:
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    aline = '#characters [data-char="c1"]'
    await gm.fill(f"{aline} .amount", "4")
    await gm.click(f'{aline} button[data-action="damage"]')
    await expect(gm.locator(f"{aline} .pe .value")).to_have_text("11 / 15", timeout=SYNC_MS)
    v, _ = await table.state()

    # cancel: nothing happens
    await gm.click("#undo")
    await expect(gm.locator("#confirm")).to_be_visible()
    await expect(gm.locator("#confirm-title")).to_have_text("Undo 4 damage to Aline?")
    await expect(gm.locator("#confirm-body")).to_contain_text("Aline takes 4 damage (-4 PE, +0 PV)")
    await shot(gm, "page-gm-undo-confirm")
    await gm.click("#confirm-cancel")
    await expect(gm.locator("#confirm")).to_be_hidden()
    assert (await table.state())[0] == v

    # confirm: undone, said, and marked in the feed
    await gm.click("#undo")
    await gm.click("#confirm-ok")
    await expect(gm.locator(".toast.ok .toast-title")).to_have_text(
        "Undid: 4 damage to Aline", timeout=SYNC_MS
    )
    await expect(gm.locator(f"{aline} .pe .value")).to_have_text("15 / 15")
    undone = gm.locator(f'#feed li.event[data-v="{v}"]')
    await expect(undone).to_have_class(re.compile(r"\bundone\b"))
    await expect(undone.locator(".stamp")).to_contain_text("undone")
    await expect(gm.locator('#feed li.event[data-kind="undo"]')).to_have_text(
        re.compile(r"^Undid: 4 damage to Aline")
    )

    # someone else's command: the server says what undo reverts (its affordances)
    async with Client(table.url, table.token("gm"), ROOM) as other:
        await other.command("damage", char="c3", amount=2)
    await expect(gm.locator('[data-char="c3"] .pe .value')).to_have_text("8 / 10")
    await expect(gm.locator("#undo")).to_have_attribute("data-undo", str(v + 2))
    await gm.click("#undo")
    await expect(gm.locator("#confirm-title")).to_have_text("Undo 2 damage to Chloe?")
    await expect(gm.locator("#confirm-body")).to_have_text("Chloe takes 2 damage (-2 PE, +0 PV)")
    await gm.click("#confirm-ok")
    await expect(gm.locator(".toast.ok .toast-title").first).to_have_text(
        "Undid: 2 damage to Chloe", timeout=SYNC_MS
    )
    assert gm.js_errors == []


async def test_at_phone_width_a_player_sees_their_turn_first(
    browser: Any, table: LiveTable
) -> None:
    """p1 plays Aline: the banner says whose turn it is, then "Your turn" with
    the End-turn button above everything else; Aline's card comes first; a
    dying character shows when it next loses a PP."""
    from playwright.async_api import expect

    async with Client(table.url, table.token("gm"), ROOM) as gm:
        await gm.command("combat_start", order=["c2", "c1"])
        player = await open_page(browser, table.page("p1"), width=390, height=844)
        banner = player.locator("#turn-banner")
        await expect(banner).to_have_attribute("data-mine", "false")
        await expect(banner).to_contain_text("Bastien's turn (round 1)")
        await expect(player.locator("#turn-end")).to_be_hidden()
        await gm.command("end_turn", char="c2")
        await expect(banner).to_have_attribute("data-mine", "true", timeout=SYNC_MS)
        await expect(player.locator("#turn-text")).to_have_text("Your turn: Aline (round 1)")
        end = player.locator("#turn-end")
        await expect(end).to_have_text("End Aline's turn")
        # first on the screen: the banner, then Aline's card
        top = await banner.bounding_box()
        first = player.locator("#characters .char").first
        await expect(first).to_have_attribute("data-char", "c1")
        card = await first.bounding_box()
        assert top is not None and card is not None and top["y"] < card["y"] < 844
        assert top["y"] < 200  # right under the title bar
        # Chloe is not in the combat: dying, she loses PP by world time (D5)
        await gm.command("damage", char="c3", amount=30)
        await expect(player.locator('[data-char="c3"] .dying-next')).to_have_text(
            "loses 1 PP in 6s", timeout=SYNC_MS
        )
        await shot(player, "page-player-your-turn-phone")
        await end.click()
        await gm.wait_for(lambda s: s["combat"]["turn"] == 0 and s["combat"]["round"] == 2, 2)
    await expect(banner).to_have_attribute("data-mine", "false", timeout=SYNC_MS)
    assert await player.evaluate("document.documentElement.scrollWidth") <= 390
    assert player.js_errors == []


async def test_every_event_reads_the_same_on_the_page_as_in_python(
    browser: Any, table: LiveTable
) -> None:
    """The page and the Python view read one table of texts: the same
    sentence for every event kind's example and for every event of the tour,
    whole and as a viewer of `status` characters gets them."""
    from client_stub.events import EventText
    from rules import catalog
    from tests.client.test_events import example_names, status_tour
    from tests.helpers.tour import tour

    names = example_names()
    undone = {28: [catalog.EVENTS["roll"].example]}
    samples = [doc.example for doc in catalog.EVENTS.values()]
    samples += [ev for step in tour() for ev in step.events]
    samples += [ev for _, events in status_tour() for ev in events]  # partial events
    samples += [{"kind": "undo", "undone": 29, "op": "damage", "by": "u2"}]
    expected = [EventText(names, history=undone.get).sentence(ev) for ev in samples]
    page = await open_page(browser, table.page("obs"))
    said = await page.evaluate(
        """async ([samples, names, undone]) => {
          const m = await import("./event-text.js");
          const known = new m.Names();
          known.update(names);
          const text = new m.EventText(await m.loadTexts(), known, (v) => undone[v] ?? null);
          return samples.map((ev) => text.sentence(ev));
        }""",
        [
            samples,
            {
                "characters": {k: {"name": v} for k, v in names.chars.items()},
                "users": {k: {"name": v} for k, v in names.users.items()},
            },
            {str(k): v for k, v in undone.items()},
        ],
    )
    assert said == expected
    assert page.js_errors == []


def reasons_in(value: Any) -> list[dict[str, Any]]:
    """Every reason (a dict with a `key`) inside some affordances."""
    if isinstance(value, dict):
        found = [value] if isinstance(value.get("key"), str) else []
        return found + [r for v in value.values() for r in reasons_in(v)]
    if isinstance(value, list):
        return [r for v in value for r in reasons_in(v)]
    return []


async def test_every_reason_and_action_reads_the_same_on_the_page_as_in_python(
    browser: Any, table: LiveTable
) -> None:
    """The affordances' reasons and labels come from one table of texts too:
    the page and `vtt-sync client actions` word them alike."""
    import rules
    from client_stub.events import TEXTS, EventText, Names
    from rules.testing import Table

    t = Table()
    a = t.add("Aline", owner=t.p1, pp=0)
    b = t.add("Bruno", owner=t.p2)
    t.add("Liche", shown="hidden")
    t.down(b)
    t.do("combat_start", order=[b, a])
    samples = [{"key": key} for key in TEXTS["reasons"]]
    for v in (rules.Viewer(t.gm.user, "gm"), rules.Viewer(t.p1.user, "player")):
        samples += reasons_in(rules.affordances(t.room, v))
    state = t.room.to_dict()
    names = Names()
    names.update(state)
    text = EventText(names)
    expected = [[text.reason(r) for r in samples], [text.action(op) for op in TEXTS["actions"]]]
    page = await open_page(browser, table.page("obs"))
    said = await page.evaluate(
        """async ([samples, state, ops]) => {
          const m = await import("./event-text.js");
          const known = new m.Names();
          known.update(state);
          const text = new m.EventText(await m.loadTexts(), known);
          return [samples.map((r) => text.reason(r)), ops.map((op) => text.action(op))];
        }""",
        [
            samples,
            {"characters": state["characters"], "users": state["users"]},
            list(TEXTS["actions"]),
        ],
    )
    assert said == expected
    assert "Aline is in a running combat and cannot rest (R4)" in said[0]
    assert page.js_errors == []


async def test_admin_page_creates_a_room_whose_gm_link_opens_it(
    browser: Any, table: LiveTable
) -> None:
    from playwright.async_api import expect

    from tests.helpers.server import ADMIN_TOKEN

    ctx = await browser.new_context()
    admin = watched(await ctx.new_page())
    await admin.goto(f"{table.http_url}admin.html")
    await admin.fill('[name="token"]', "not-the-admin-token")
    await admin.fill('[name="name"]', "Thursday table")
    await admin.click('#create-room button[type="submit"]')
    await expect(admin.locator(".toast.error .toast-title")).to_have_text("Wrong admin token")
    await admin.fill('[name="token"]', ADMIN_TOKEN)
    await admin.click('#create-room button[type="submit"]')
    link = admin.locator("#gm-link-url")
    await expect(link).to_have_value(re.compile(r"#room=thursday-table&token="), timeout=SYNC_MS)
    gm = await open_page(browser, await link.input_value())
    await expect(gm.locator("#room-name")).to_have_text("Thursday table")
    await expect(gm.locator("#whoami")).to_have_text("GM · gm")
    await expect(gm.locator("#setup")).to_have_attribute("open", "")  # empty: setup first
    assert gm.js_errors == [] and admin.js_errors == []


# Distinctive values of the characters a player must not read (docs/views.md).
SENTRY = {"name": "Sentry Gob", "level": 2, "pv_max": 9973, "pe_max": 8861, "pp_max": 3}
UNSEEN = "Zephyrine the unseen"
SECRETS = ("9973", "8861", "8856", "7717")  # 8856: the sentry's PE after 5 damage


async def page_holds_none(page: Any, *needles: str) -> None:
    """Neither the page's text nor its DOM (attributes, select options,
    hidden nodes) holds any of `needles`."""
    text = await page.inner_text("body")
    dom = await page.content()
    for needle in needles:
        assert needle not in text, f"{needle!r} in the page text"
        assert needle not in dom, f"{needle!r} in the DOM"


async def test_views_a_player_page_shows_no_number_of_a_status_npc_and_nothing_hidden(
    browser: Any, table: LiveTable
) -> None:
    """A `status` NPC with distinctive numbers and a `hidden` one with a
    distinctive name: the GM's page shows both in full; the player's shows
    the NPC's name and condition only and nothing of the hidden one, whose
    turn reads "someone you cannot see"; the GM shows it from the page and
    the player's page gets it (status: still no number)."""
    from playwright.async_api import expect

    abilities = {a: 10 for a in ("str", "dex", "con", "int", "wis", "cha")}
    sheet = {"medicine": 0, "abilities": abilities}
    async with Client(table.url, table.token("gm"), ROOM) as gm:
        sentry = (await gm.command("add_character", shown="status", **sheet, **SENTRY))["result"]
        unseen = await gm.command(
            "add_character",
            name=UNSEEN, level=5, pv_max=7717, pe_max=10, pp_max=2, shown="hidden", **sheet,
        )  # fmt: skip
        sentry, unseen = sentry["char"], unseen["result"]["char"]
        await gm.command("damage", char=sentry, amount=5)  # PE 8856, an event the player reads
        await gm.command("combat_start", order=[unseen, "c1", sentry])  # the unseen one acts

    gm_page = await open_page(browser, table.page("gm"))
    player = await open_page(browser, table.page("p1"))
    sentry_sel, unseen_sel = f'[data-char="{sentry}"]', f'[data-char="{unseen}"]'

    # the GM: everything, with each character's `shown`
    gm_sentry = gm_page.locator(f"#characters {sentry_sel}")
    await expect(gm_sentry.locator(".pv .value")).to_have_text("9973 / 9973")
    await expect(gm_sentry.locator(".shown-pick")).to_have_value("status")
    gm_unseen = gm_page.locator(f"#characters {unseen_sel}")
    await expect(gm_unseen.locator(".name")).to_have_text(UNSEEN)
    await expect(gm_unseen.locator(".shown-pick")).to_have_value("hidden")
    await expect(gm_page.locator('#characters [data-char="c1"] .shown-pick')).to_have_value("full")
    await expect(gm_page.locator("#combat-order li.current")).to_have_attribute("data-char", unseen)
    await expect(gm_page.locator("#combat-unseen")).to_be_hidden()
    await gm_page.click("#setup summary")
    badge = gm_page.locator(f"#setup-chars {unseen_sel} .shown-badge")
    await expect(badge).to_have_text("hidden")

    # the player: the sentry's name, level and condition, no number
    card = player.locator(f"#characters {sentry_sel}")
    await expect(card.locator(".name")).to_have_text("Sentry Gob")
    await expect(card.locator(".condition")).to_have_text("conscious")
    await expect(card.locator(".level")).to_have_text("Level 2")
    await expect(card.locator(".no-numbers")).to_have_text("status only · no numbers shown")
    await expect(card.locator(".bars")).to_be_hidden()
    await expect(card.locator("button:visible, select:visible")).to_have_count(0)
    await expect(card.locator(".shown-pick")).to_be_hidden()
    feed = player.locator(f'#feed li.event[data-char="{sentry}"][data-kind="damage"]')
    await expect(feed).to_have_text(re.compile(r"^Sentry Gob is hit"))
    # nothing of the hidden one: no card, not in the combat order, no name anywhere
    await expect(player.locator(unseen_sel)).to_have_count(0)
    await expect(player.locator("#combat-order li")).to_have_count(2)
    await expect(player.locator("#combat-order li.current")).to_have_count(0)
    await expect(player.locator("#combat-unseen")).to_be_visible()
    banner = player.locator("#turn-banner")
    await expect(banner).to_have_attribute("data-unseen", "true")
    await expect(banner).to_contain_text("Turn: someone you cannot see (round 1)")
    await expect(player.locator("#turn-end")).to_be_hidden()
    await page_holds_none(player, *SECRETS, UNSEEN)
    mirror = await player.evaluate("JSON.stringify(window.vttClient.state)")
    assert not any(s in mirror for s in (*SECRETS, UNSEEN))
    await shot(gm_page, "page-gm-views")
    await shot(player, "page-player-views")

    # the GM shows the unseen one (status) from its card: the player's page gets it
    await gm_unseen.locator(".shown-pick").select_option("status")
    now = player.locator(f"#characters {unseen_sel}")
    await expect(now.locator(".name")).to_have_text(UNSEEN, timeout=SYNC_MS)
    await expect(now.locator(".condition")).to_have_text("conscious")
    await expect(now.locator(".no-numbers")).to_be_visible()
    await expect(player.locator("#combat-order li.current")).to_have_attribute("data-char", unseen)
    await expect(player.locator("#combat-unseen")).to_be_hidden()
    await expect(banner).to_contain_text(f"{UNSEEN}'s turn (round 1)")
    await page_holds_none(player, *SECRETS)
    _, state = await table.state()
    assert state["characters"][unseen]["shown"] == "status"
    await expect(badge).to_have_text("status", timeout=SYNC_MS)
    assert gm_page.js_errors == [] and player.js_errors == []


async def test_views_the_gm_creates_a_hidden_character_from_the_form_and_shows_it(
    browser: Any, table: LiveTable
) -> None:
    """The character form offers `shown`: a character created hidden never
    reaches the player's page; set to `full` in the form, its numbers do."""
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    player = await open_page(browser, table.page("p1"))
    await gm.click("#setup summary")
    await gm.click("#new-char")
    form = gm.locator("#char-form")
    await expect(form.locator('[name="shown"]')).to_have_value("")  # the owner's default
    fields = {"name": "Quillon", "pv_max": "6151", "pe_max": "3", "pp_max": "1"}
    for name, value in fields.items():
        await form.locator(f'[name="{name}"]').fill(value)
    await form.locator('[name="shown"]').select_option("hidden")
    await form.locator("#char-save").click()
    await expect(gm.locator("#char-dialog")).to_be_hidden(timeout=SYNC_MS)
    _, state = await table.state()
    cid, c = next((k, c) for k, c in state["characters"].items() if c["name"] == "Quillon")
    assert c["shown"] == "hidden"
    gm_card = gm.locator(f'#characters [data-char="{cid}"]')
    await expect(gm_card.locator(".pv .value")).to_have_text("6151 / 6151")
    v, _ = await table.state()
    await expect(player.locator("#version")).to_have_text(f"v{v}", timeout=SYNC_MS)
    await page_holds_none(player, "Quillon", "6151")
    await expect(player.locator(f'[data-char="{cid}"]')).to_have_count(0)

    # the form shows the setting and changes it
    await gm.click(f'#setup-chars [data-char="{cid}"] button[data-action="edit"]')
    await expect(form.locator('[name="shown"]')).to_have_value("hidden")
    await form.locator('[name="shown"]').select_option("full")
    await form.locator("#char-save").click()
    card = player.locator(f'#characters [data-char="{cid}"]')
    await expect(card.locator(".pv .value")).to_have_text("6151 / 6151", timeout=SYNC_MS)
    await expect(card.locator(".no-numbers")).to_be_hidden()
    await expect(gm_card.locator(".shown-pick")).to_have_value("full")
    assert gm.js_errors == [] and player.js_errors == []


async def test_a_link_to_another_server_asks_before_sending_the_token(
    browser: Any, table: LiveTable
) -> None:
    """A `ws=` naming another host would hand that host the token: the page
    asks first; declined, no connection is made and the login shows."""
    from playwright.async_api import expect

    ctx = await browser.new_context()
    page = await ctx.new_page()
    asked: list[str] = []

    async def decline(dialog: Any) -> None:
        asked.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", decline)
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    token = table.token("p1")
    await page.goto(f"{table.http_url}#room={ROOM}&token={token}&ws=ws://evil.example:9/")
    await expect(page.locator("#login")).to_be_visible()
    assert len(asked) == 1 and "evil.example:9" in asked[0] and token not in asked[0]
    assert sockets == []
    assert token not in page.url  # the token left the address bar too
    # the same link naming this very server connects without asking
    same = await ctx.new_page()
    same.on("dialog", decline)
    await same.goto(f"{table.http_url}#room={ROOM}&token={token}&ws={table.url}")
    await expect(same.locator("#status")).to_have_attribute("data-status", "connected")
    assert len(asked) == 1
    await ctx.close()


# A card's actions (cards.js), each shown when one of its ops is offered: on
# the character's own entry, or (first aid, tending) on a medic's entry naming
# it as patient. One that can be done now is on the card; the others are
# folded behind the card's "More", and so is the occasional ability damage.
CARD_UNITS = (
    ("damage", "heal"), ("ability_damage", "ability_restore"), ("untend",),
    ("stabilize",), ("stay_in_fight",), ("rest",), ("stop_rest",),
)  # fmt: skip
FOLDED = ("ability_damage", "ability_restore")
PAIRED = ("first_aid", "tend")


def expected_buttons(aff: dict[str, Any], cid: str) -> dict[str, tuple[str, bool]]:
    """The card's buttons the affordances call for: action -> (where,
    enabled), where "now" (on the card) or "more" (folded)."""
    mine = aff["chars"].get(cid, {})
    out: dict[str, tuple[str, bool]] = {}
    for unit in CARD_UNITS:
        offered = [op for op in unit if op in mine]
        possible = any("why" not in mine[op] for op in offered)
        place = "now" if possible and unit[0] not in FOLDED else "more"
        out |= {op: (place, "why" not in mine[op]) for op in offered}
    for op in PAIRED:
        if any(
            cid in (e.get(op, {}).get("choices") or {}).get("patient", [])
            for e in aff["chars"].values()
        ):
            out[op] = ("now", True)
    return out


async def shown_buttons(page: Any, cid: str) -> dict[str, tuple[str, bool]]:
    """The card's action buttons a click can reach, on the card or once its
    More is opened: action -> (where, enabled). A folded one not now says why."""
    found = await page.evaluate(
        """(cid) => {
          const card = document.querySelector(`#characters [data-char="${cid}"]`);
          const more = card.querySelector(".more");
          const out = {};
          for (const b of card.querySelectorAll("button[data-action]")) {
            const folded = more.contains(b);
            const unit = b.closest(".act");
            if (folded && more.checkVisibility() && !b.hidden && !unit.hidden) {
              const why = unit.querySelector(".why").textContent;
              if (b.disabled && !why) throw new Error(`${b.dataset.action}: folded, no why`);
              out[b.dataset.action] = ["more", !b.disabled];
            } else if (!folded && b.checkVisibility()) out[b.dataset.action] = ["now", !b.disabled];
          }
          return out;
        }""",
        cid,
    )
    return {op: (where[0], where[1]) for op, where in found.items()}


async def test_the_buttons_are_the_affordances_and_none_is_refused(
    browser: Any, table: LiveTable
) -> None:
    """Over a scripted game, the buttons each page shows are exactly the
    actions the server offers that viewer (disabled, with the reason, when
    not now), and pressing the offered ones is never refused: 0 refusals."""
    from playwright.async_api import expect

    pages = {k: await open_page(browser, table.page(k)) for k in ("gm", "p1", "p2")}
    for page in pages.values():  # count every refusal the page shows
        await page.evaluate(
            """() => {
              window.refusals = 0;
              new MutationObserver((muts) => {
                for (const m of muts) for (const n of m.addedNodes)
                  if (n.classList?.contains("error")) window.refusals += 1;
              }).observe(document.querySelector("#errors"), { childList: true });
            }"""
        )
    mirrors = {k: Client(table.url, table.token(k), ROOM) for k in pages}
    for c in mirrors.values():
        await c.connect()
    gm = mirrors["gm"]
    steps = [
        ("damage", {"char": "c2", "amount": 80}),  # Bastien dying
        ("damage", {"char": "c3", "amount": 40}),
        ("heal", {"char": "c3", "amount": 0, "stabilize": True}),  # Chloe stable
        ("update_character", {"char": "c1", "set": {"pp": 0}}),  # Aline: no short rest (R1)
        ("advance_clock", {"seconds": 6}),
    ]
    pressed = 0
    try:
        for op, args in steps:
            await gm.command(op, **args)
            for key, page in pages.items():
                mirror = mirrors[key]
                await mirror.wait_version(gm.version)
                await expect(page.locator("#version")).to_have_text(
                    f"v{gm.version}", timeout=SYNC_MS
                )
                aff = mirror.state["affordances"]
                for cid in mirror.state["characters"]:
                    assert await shown_buttons(page, cid) == expected_buttons(aff, cid), (
                        key,
                        op,
                        cid,
                    )
                # a disabled button says why, in the table's words
                why = page.locator("#characters button[data-action][data-why]:visible").first
                if await why.count():
                    assert await why.get_attribute("title")
            # each player presses the first button their cards offer
            for key in ("p1", "p2"):
                page, mirror = pages[key], mirrors[key]
                button = page.locator(
                    "#characters .actions > .act button[data-action]:visible:enabled"
                ).first
                if not await button.count():
                    continue
                before = gm.version
                await button.click()
                pressed += 1
                await gm.wait_version(before + 1)
                for other in mirrors.values():
                    await other.wait_version(gm.version)
        for page in pages.values():
            assert await page.evaluate("window.refusals") == 0
            assert page.js_errors == []
        assert pressed >= 3
    finally:
        for c in mirrors.values():
            await c.close()
