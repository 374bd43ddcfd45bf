"""The GM's page runs the table the way Foundry GMs expect (rules v1.2), in
real headless Chromium: initiative rolled from the combat setup and during
a combat (T4), the skip-dead room setting (T3), a long clock advance during
a combat asks first, and no combat can start on an empty table.

Demo sheets: Aline Dex 14 (+2), Bastien 12 (+1), Chloe 13 (+1), Gorgol 15 (+2).
"""

from __future__ import annotations

from typing import Any

import pytest

from client_stub import Client
from tests.client.test_browser import SYNC_MS, browser, open_page, shot, table  # noqa: F401
from tests.helpers.live_table import ROOM, LiveTable

pytestmark = [pytest.mark.timeout(90), pytest.mark.asyncio(loop_scope="session")]


async def order_on(page: Any) -> list[str]:
    return await page.locator("#combat-order li").evaluate_all(
        "items => items.map((li) => li.dataset.char)"
    )


async def test_T4_gm_rolls_initiative_from_the_page_and_the_order_comes_out_sorted(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
) -> None:
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    player = await open_page(browser, table.page("p1"))
    async with Client(table.url, table.token("gm"), ROOM) as py:
        await py.command("queue_rolls", rolls=[5, 10, 15, 3])  # c1..c4, character order
        # Gorgol gets +10 from the setup; everyone is ticked by default.
        await gm.fill('#combat-setup-list [data-char="c4"] .init-bonus', "10")
        await shot(gm, "page-gm-combat-setup")
        await gm.click("#combat-initiative")
        # Chloe 15+1, Gorgol 3+2+10, Bastien 10+1, Aline 5+2
        await py.wait_for(lambda s: s["combat"] is not None, SYNC_MS / 1000)
        assert py.state["combat"]["order"] == ["c3", "c4", "c2", "c1"]
        await expect(gm.locator("#combat-order li").first).to_have_attribute("data-char", "c3")
        assert await order_on(gm) == ["c3", "c4", "c2", "c1"]
        assert await order_on(player) == ["c3", "c4", "c2", "c1"]
        await expect(gm.locator('#combat-order [data-char="c4"] .init')).to_have_text("init 15")
        await expect(gm.locator("#combat-order li.current")).to_have_attribute("data-char", "c3")
        feed = gm.locator('#feed li.event[data-kind="roll"]')
        await expect(feed.filter(has_text="Gorgol the goblin rolls initiative")).to_contain_text(
            "Gorgol the goblin rolls initiative: d20 3 +2 +10 = 15 (queued die)"
        )
        # A player sees the order, not the totals (the GM's only), and their own roll.
        await expect(player.locator("#combat-order .init")).to_have_count(0)
        await expect(
            player.locator('#feed li.event[data-kind="roll"]').filter(has_text="Aline rolls")
        ).to_contain_text("Aline rolls initiative: d20 5 +2 = 7")
        await shot(gm, "page-gm-initiative")

        # During the combat: roll again; the bonus given is kept; at the very
        # start of the combat the top of the new order has the turn.
        await py.command("queue_rolls", rolls=[20, 1, 1, 1])
        await gm.click("#combat-reroll")
        await py.wait_for(lambda s: s["combat"]["order"][0] == "c1", SYNC_MS / 1000)
        # Aline 22, Gorgol 1+2+10, then Bastien and Chloe (2 each, Dex +1 each: seq)
        assert py.state["combat"]["order"] == ["c1", "c4", "c2", "c3"]
        await expect(gm.locator("#combat-order li.current")).to_have_attribute(
            "data-char", "c1", timeout=SYNC_MS
        )
    assert gm.js_errors == [] and player.js_errors == []


async def test_T3_the_skip_dead_setting_is_in_table_setup(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
) -> None:
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    await gm.click("#setup summary")
    box = gm.locator('#room-form [name="skip_dead"]')
    await expect(box).to_be_checked()  # on by default
    await box.uncheck()
    await gm.locator('#room-form button[type="submit"]').click()
    await expect(gm.locator('#feed li.event[data-kind="room"]').first).to_contain_text(
        "dead combatants keep their turns", timeout=SYNC_MS
    )
    _, state = await table.state()
    assert state["skip_dead"] is False and state["name"] == "Demo table"
    again = await open_page(browser, table.page("gm"))
    await again.click("#setup summary")
    await expect(again.locator('#room-form [name="skip_dead"]')).not_to_be_checked()
    assert gm.js_errors == [] and again.js_errors == []


async def test_an_advance_of_an_hour_or_more_during_a_combat_asks_first(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
) -> None:
    """Issue 23: "+8 h" during a fight killed a stable character in one click."""
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    clock = gm.locator("#clock")
    await gm.click('[data-action="advance"][data-seconds="3600"]')  # no combat: at once
    await expect(clock).to_have_attribute("data-seconds", "3600", timeout=SYNC_MS)
    async with Client(table.url, table.token("gm"), ROOM) as py:
        await py.command("combat_start", order=["c1", "c2"])
    await expect(gm.locator("#combat-reroll")).to_be_visible(timeout=SYNC_MS)

    await gm.click('[data-action="advance"][data-seconds="28800"]')
    await expect(gm.locator("#confirm")).to_be_visible()
    await expect(gm.locator("#confirm-title")).to_have_text("Combat is running: advance anyway?")
    await shot(gm, "page-gm-advance-in-combat")
    await gm.click("#confirm-cancel")
    await expect(gm.locator("#confirm")).to_be_hidden()
    assert (await table.state())[1]["clock"] == 3600

    await gm.click('[data-action="advance"][data-seconds="60"]')  # a minute: no question
    await expect(clock).to_have_attribute("data-seconds", "3660", timeout=SYNC_MS)
    await expect(gm.locator("#confirm")).to_be_hidden()

    await gm.fill("#advance-seconds", "3600")  # the custom advance asks too
    await gm.click("#advance-custom")
    await expect(gm.locator("#confirm-title")).to_have_text("Combat is running: advance anyway?")
    await gm.click("#confirm-ok")
    await expect(clock).to_have_attribute("data-seconds", "7260", timeout=SYNC_MS)
    assert gm.js_errors == []


async def test_start_combat_is_disabled_on_an_empty_table(
    browser: Any,  # noqa: F811
    table: LiveTable,  # noqa: F811
) -> None:
    from playwright.async_api import expect

    gm = await open_page(browser, table.page("gm"))
    start, roll = gm.locator("#combat-start"), gm.locator("#combat-initiative")
    await expect(start).to_be_enabled()
    async with Client(table.url, table.token("gm"), ROOM) as py:
        for cid in ("c1", "c2", "c3", "c4"):
            await py.command("remove_character", char=cid)
        await expect(start).to_be_disabled(timeout=SYNC_MS)
        await expect(roll).to_be_disabled()
        await expect(start).to_have_attribute(
            "title", "No character can fight yet: add one in Table setup"
        )
        sheet = {"level": 1, "pv_max": 8, "pe_max": 4, "pp_max": 2, "medicine": 0}
        abilities = dict.fromkeys(("str", "dex", "con", "int", "wis", "cha"), 10)
        await py.command("add_character", name="Newcomer", abilities=abilities, **sheet)
        await expect(start).to_be_enabled(timeout=SYNC_MS)
        await expect(roll).to_be_enabled()
    assert gm.js_errors == []
