"""The tracker page in Chromium for a real campaign (issue "Campaign play"):
invitation links that name the address friends reach, toasts that cover
nothing that acts, clicks made while the server is unreachable (counted,
then applied or expired, the ack telling either way), Table setup folding
away once the table is set, and the README's screenshots (docs/*.png,
written again by every run so they stay current).

Without Chromium or Playwright these tests skip locally and FAIL in CI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sync_server.hosting.config import Config
from tests.client import test_browser as shared
from tests.helpers.live_table import LiveTable
from tests.helpers.server import test_config

browser = shared.browser  # the module's Chromium, its pages closed after each test
open_page = shared.open_page
pytestmark = [pytest.mark.timeout(120), pytest.mark.asyncio(loop_scope="module")]

DOCS = Path(__file__).resolve().parents[2] / "docs"


class PublicTable(LiveTable):
    """The demo table on a server told its public address."""

    public_url = "https://vtt.example/vtt/"

    def _config(self) -> Config:
        return test_config(self.data_dir, port=self.port, rate=None, public_url=self.public_url)


@pytest_asyncio.fixture(loop_scope="module")
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
