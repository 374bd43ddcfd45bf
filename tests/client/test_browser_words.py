"""What the page says, in real headless Chromium: after a restart, the GM's
Undo button still says what it reverts (the command's own words, from its
stored events), even when a run of undos took its target far back."""

from __future__ import annotations

from typing import Any

import pytest

from client_stub import Client
from tests.client.test_browser import browser, open_page, shot, table  # noqa: F401
from tests.helpers.live_table import ROOM, LiveTable

pytestmark = [pytest.mark.timeout(90), pytest.mark.asyncio(loop_scope="session")]

# More than the page's recent log on arrival (app.js BACKFILL_PATCHES): the
# undo target then lies beyond it.
WALKED_BACK = 35


async def test_the_undo_tooltip_names_its_command_after_a_restart(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
) -> None:
    from playwright.async_api import expect

    async with Client(table.url, table.token("gm"), ROOM) as gm:
        clock = await gm.command("advance_clock", seconds=600)
        for _ in range(WALKED_BACK):
            await gm.command("damage", char="c1", amount=1)
        for _ in range(WALKED_BACK):
            await gm.command("undo")
        assert gm.state["affordances"]["undo"]["v"] == clock["v"]
    said = f"Reverts v{clock['v']}: the clock moving to 0h 10m 00s"
    page = await open_page(browser, table.page("gm"))
    await expect(page.locator("#undo")).to_have_attribute("title", said)
    await page.context.close()

    await table.restart()
    page = await open_page(browser, table.page("gm"))
    await expect(page.locator("#undo")).to_have_attribute("title", said)
    # the log on arrival stays the recent one: the last undo, not the clock
    await expect(page.locator("#feed li.event").first).to_contain_text("Undid: 1 damage to Aline")
    await expect(page.locator("#feed li.event", has_text="Time passes")).to_have_count(0)
    await shot(page, "page-gm-undo-after-restart")
    assert page.js_errors == []


async def test_the_log_says_what_tending_and_a_rest_did(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
) -> None:
    """L4's raise to 10 and R2's recovery, as the page's log words them
    (event-text.js; tests/js/event-text.test.mjs holds it to the Python
    client's words). Demo sheets: Aline Con 14 (+2), Chloe Medicine 9."""
    from playwright.async_api import expect

    page = await open_page(browser, table.page("gm"), width=900)
    async with Client(table.url, table.token("gm"), ROOM) as gm:
        await gm.command("damage", char="c1", amount=35)  # Aline: dying
        await gm.command("queue_rolls", rolls=[15, 15, 1])
        await gm.command("first_aid", char="c3", patient="c1")  # 15 + 9: stable
        await gm.command("tend", char="c3", patient="c1")
        await gm.command("advance_clock", seconds=3600)  # Chloe 15 + 9; Aline 1 + 2 + 2
        await gm.command("damage", char="c2", amount=10)  # Bastien: PE only
        await gm.command("rest", char="c2", kind="night")
        await gm.command("advance_clock", seconds=8 * 3600)
    feed = page.locator("#feed li.event")
    sentence = ":scope > :first-child"  # the sentence, before its version stamp
    # (the 8 h advance rolls hours 2-8 with the server's dice: any may be raised too)
    hour_1 = feed.filter(has_text="Aline rolls Constitution (hour 1)")
    await expect(hour_1.locator(sentence)).to_have_text(
        "Aline rolls Constitution (hour 1): d20 1 +2 +2 = 5, raised to 10 by tending"
        " — stays stable (20 would wake) (queued die)"
    )
    await expect(feed.filter(has_text="Bastien recovers").locator(sentence)).to_have_text(
        "Bastien recovers 10 PE (night's rest)"
    )
    await shot(page, "page-gm-log-words")
    assert page.js_errors == []
