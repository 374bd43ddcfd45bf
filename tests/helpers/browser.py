"""Debian's Chromium through Playwright, for the browser tests: the `chromium`
fixture, and the rule that without Chromium or Playwright these tests skip
locally and FAIL in CI (CI set). Registered as a plugin by tests/conftest.py.

One Chromium per test process (each xdist worker has its own), launched at
its first browser test and closed at the end: a launch costs about a second
and a few dozen MB. Each test opens its pages in contexts of its own (new
cookies and storage) and closes them. A Playwright browser belongs to the
event loop that launched it, so the fixture and every test using it run on
the session's loop: their modules say `pytest.mark.asyncio(loop_scope="session")`.
A module needing other switches launches its own from the same `pw`."""

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


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def pw() -> AsyncIterator[Any]:
    """The test process's Playwright (its driver is a Node process): for a
    module that needs a Chromium with switches of its own (tests/foundry)."""
    require_browser()
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        yield driver


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def chromium(pw: Any) -> AsyncIterator[Any]:
    b = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
    try:
        yield b
    finally:
        await b.close()
