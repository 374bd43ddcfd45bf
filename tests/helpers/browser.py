"""Debian's Chromium through Playwright, for the browser tests: the `chromium`
fixture (one browser per test module: a launch costs about a second), and
the rule that without Chromium or Playwright these tests skip locally and
FAIL in CI (CI set). Registered as a plugin by tests/conftest.py."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_browser() -> None:
    reason = None
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        reason = "playwright is not installed (scripts/install-test-deps)"
    if reason is None and not os.access(CHROMIUM, os.X_OK):
        reason = f"{CHROMIUM} is missing (apt-get install chromium; scripts/install-test-deps)"
    if reason is not None:
        if in_ci():
            pytest.fail(f"browser tests cannot run in CI: {reason}")
        pytest.skip(reason)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def chromium() -> AsyncIterator[Any]:
    require_browser()
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            await b.close()
