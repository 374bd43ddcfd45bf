"""What the page says, in real headless Chromium: after a restart, the GM's
Undo button still says what it reverts (the command's own words, from its
stored events), even when a run of undos took its target far back."""

from __future__ import annotations

from typing import Any

import pytest

from client_stub import Client
from tests.client.test_browser import browser, open_page, shot, table  # noqa: F401
from tests.helpers.live_table import ROOM, LiveTable

pytestmark = [pytest.mark.timeout(90), pytest.mark.asyncio(loop_scope="module")]

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
