"""Fixtures of the client tests: a real server with the demo room."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.helpers.live_table import LiveTable


@pytest.fixture
async def table(tmp_path: Path) -> AsyncIterator[LiveTable]:
    async with LiveTable(tmp_path / "data") as t:
        yield t
