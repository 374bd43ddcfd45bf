"""The page at a glance (issue 35, item 5), in real headless Chromium: cards
show the actions that can be taken now and fold the rest behind one "More";
the GM's page with five characters fits in about two phone screens; the
character form offers no observer as owner, shows "Shown to others" whole
and marks a field the server refuses where it is; the admin page's buttons
sit in their rows' lines.

Before the issue the GM's page below was 3,340 px tall at 390 px wide; the
height each run measures goes to test-artifacts/client-latency.json."""

from __future__ import annotations

from typing import Any

import pytest

from client_stub import Client
from client_stub.events import TEXTS
from rules.testing import SHEET
from sync_server.testing.server import ADMIN_TOKEN
from tests.client.test_browser import (  # noqa: F401
    SYNC_MS,
    browser,
    open_page,
    record,
    shot,
    table,
    watched,
)
from tests.helpers.live_table import ROOM, LiveTable

pytestmark = [pytest.mark.timeout(90), pytest.mark.asyncio(loop_scope="session")]

PHONE = {"width": 390, "height": 844}  # an iPhone 12-14's CSS viewport
# "About two screens": two phone screens, and 5% for what a font or a longer
# name adds (the page measured 1,687 px when this was written).
ABOUT_TWO_SCREENS = round(2 * PHONE["height"] * 1.05)


async def test_the_gm_page_at_phone_width_fits_in_about_two_screens(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
) -> None:
    """Five characters, a combat of four: each card shows its bars and the
    actions possible now on one row; what is not possible now (resting
    during a combat, stabilizing a conscious character...) is behind the
    card's More, each with the server's reason."""
    from playwright.async_api import expect

    async with Client(table.url, table.token("gm"), ROOM) as py:
        await py.command("add_character", **SHEET, name="Dora", owner=table.user("p3"))
        await py.command("combat_start", order=["c1", "c2", "c4", "c3"])
        await py.command("damage", char="c2", amount=12)
    gm = await open_page(browser, table.page("gm"), **PHONE)
    await expect(gm.locator("#characters .char")).to_have_count(5)
    await expect(gm.locator("#combat-order li")).to_have_count(4)
    height = await gm.evaluate("document.documentElement.scrollHeight")
    record("gm_page_phone_height_px", height)
    assert height <= ABOUT_TWO_SCREENS, height
    assert await gm.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]

    # on the cards: no greyed button, one row of actions each (Dora, out of
    # the combat, may rest too: two)
    cards = gm.locator("#characters .char")
    await expect(cards.locator(".actions > .act button:disabled")).to_have_count(0)
    for cid, rows in (("c1", 1), ("c2", 1), ("c3", 1), ("c4", 1), ("c5", 2)):
        actions = gm.locator(f'#characters [data-char="{cid}"] .actions')
        box = await actions.bounding_box()
        button = await actions.locator("button").first.bounding_box()
        assert box is not None and button is not None
        assert box["height"] < rows * (button["height"] + 6) + 12, (cid, box)
    # behind More: what cannot be done now, disabled, with why
    aline = gm.locator('#characters [data-char="c1"]')
    rest = aline.locator('.later button[data-action="rest"]')
    await expect(rest).to_be_hidden()  # folded
    await aline.locator(".more summary").click()
    await expect(rest).to_be_visible()
    await expect(rest).to_be_disabled()
    reason = TEXTS["reasons"]["rest_in_combat"].split("{")[0].strip()
    await expect(rest.locator("xpath=..").locator(".why")).to_contain_text(reason)
    await expect(aline.locator('.later button[data-action="ability_damage"]')).to_be_enabled()
    await aline.locator(".more summary").click()
    # the toolbar's second half is folded too; it opens
    await expect(gm.locator("#queue-rolls")).to_be_hidden()
    await gm.click("#more-tools summary")
    await expect(gm.locator("#queue-rolls")).to_be_visible()
    await gm.click("#more-tools summary")
    await shot(gm, "page-gm-phone-five-characters")
    assert gm.js_errors == []


async def select_text_fits(page: Any, selector: str) -> dict[str, float]:
    """The width of the select's chosen option's words, and the room its box
    gives them (its width less paddings and the arrow), in CSS pixels."""
    return await page.evaluate(
        """(sel) => {
          const s = document.querySelector(sel);
          const cs = getComputedStyle(s);
          const ctx = document.createElement("canvas").getContext("2d");
          ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
          const arrow = 20;  // Chromium's drop-down arrow and its margin
          const pad = parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight);
          const room = s.clientWidth - pad - arrow;
          return { text: ctx.measureText(s.selectedOptions[0].text).width, room };
        }""",
        selector,
    )


@pytest.mark.parametrize("size", [PHONE, {"width": 1280, "height": 900}])
async def test_the_character_form_offers_no_observer_and_cuts_no_words(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
    size: dict[str, int],
) -> None:
    """The Owner list: the GM (nobody), the players, the GMs; not the
    observer, whom the server refuses as an owner (docs/rules.md,
    Refusals). "Shown to others" shows its longest choice whole."""
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"), **size)
    await gm.click("#setup summary")
    await gm.click("#new-char")
    form = gm.locator("#char-form")
    await expect(form).to_be_visible()
    _, state = await table.state()
    offered = await form.locator('[name="owner"] option').evaluate_all(
        "os => os.map((o) => o.value)"
    )
    players = [u for u, x in state["users"].items() if x["role"] == "player"]
    gms = [u for u, x in state["users"].items() if x["role"] == "gm"]
    assert offered == ["", *players, *gms]
    assert table.user("obs") not in offered
    await expect(form.locator('[name="shown"]')).to_have_value("")  # the longest words
    fit = await select_text_fits(gm, '#char-form [name="shown"]')
    assert fit["text"] <= fit["room"], fit
    assert gm.js_errors == []


async def test_a_refused_field_is_marked_where_it_is(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
) -> None:
    """Level 99 (the bound is 40): the server refuses it; the Level field is
    marked (aria-invalid) with the server's words beside it, besides the
    toast; the dialog stays open with what was typed; a change clears it."""
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"), **PHONE)
    await gm.click("#setup summary")
    await gm.click('#setup-chars [data-char="c1"] button[data-action="edit"]')
    form = gm.locator("#char-form")
    level = form.locator('[name="level"]')
    await level.fill("99")
    await form.locator("#char-save").click()
    await expect(gm.locator(".toast.error .toast-msg")).to_have_text(
        "set.level must be between 1 and 40, got 99"
    )
    await expect(level).to_have_attribute("aria-invalid", "true")
    note = gm.locator(f"#{await level.get_attribute('aria-describedby')}")
    await expect(note).to_have_text("Must be between 1 and 40, got 99")
    assert await note.evaluate(
        "(n, f) => n.previousElementSibling === f", await level.element_handle()
    )
    await expect(gm.locator("#char-dialog")).to_be_visible()
    await shot(gm, "page-gm-refused-field-phone")
    await level.fill("4")
    await expect(level).not_to_have_attribute("aria-invalid", "true")
    await expect(note).to_have_count(0)
    await form.locator("#char-save").click()
    await expect(gm.locator("#char-dialog")).to_be_hidden(timeout=SYNC_MS)
    assert (await table.state())[1]["characters"]["c1"]["level"] == 4
    assert gm.js_errors == []


@pytest.mark.parametrize("width", [1280, 390])
async def test_the_admin_pages_buttons_sit_in_their_rows(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
    width: int,
) -> None:
    """Each room's buttons lie inside its row; at desktop width in its line
    (centred with the row's text, the row's cells of one height); at phone
    width the table does not overflow its card."""
    from playwright.async_api import expect

    ctx = await browser.new_context(viewport={"width": width, "height": 900})
    page = watched(await ctx.new_page())
    await page.goto(f"{table.http_url}admin.html#token={ADMIN_TOKEN}")
    await expect(page.locator('#rooms-table tr[data-room="demo"] button')).to_have_count(3)
    rows = await page.evaluate(
        """() => [...document.querySelectorAll("#rooms-table tbody tr")].map((tr) => {
          const box = (n) => { const r = n.getBoundingClientRect(); return [r.top, r.bottom]; };
          return { row: box(tr), cells: [...tr.children].map(box),
                   buttons: [...tr.querySelectorAll("button")].map(box) };
        })"""
    )
    assert rows
    for r in rows:
        top, bottom = r["row"]
        assert all(top <= b[0] and b[1] <= bottom for b in r["buttons"]), r
        if width > 520:
            assert all(c == r["cells"][0] for c in r["cells"]), r
            middle = (top + bottom) / 2
            assert all(abs((b[0] + b[1]) / 2 - middle) <= 2 for b in r["buttons"]), r
    card = await page.evaluate("[document.querySelector('#rooms').scrollWidth, innerWidth]")
    assert card[0] <= card[1], card
    await page.screenshot(path=str(shot.__globals__["ARTIFACTS"] / f"page-admin-{width}.png"))
    assert page.js_errors == []
