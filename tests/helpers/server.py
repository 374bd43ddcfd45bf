"""Pytest fixtures over the product's server helpers (sync_server.testing):
`vtt_server` (an in-process server on a tmp data dir, port 0) and
`vtt_table` (a room with a GM, two players, an observer and three
characters on it). Everything else is re-exported from there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rules.testing import SHEET
from sync_server import Server
from sync_server.testing.server import (
    ADMIN_TOKEN,
    PROTOS,
    REPO,
    WAIT,
    ChildServer,
    Client,
    Closed,
    Table,
    connect,
    connect_admin,
    create_table,
    hello_refused,
    msgpack_frame,
    next_id,
    open_ws,
    running_server,
    start_subprocess_server,
    test_config,
)

__all__ = [
    "ADMIN_TOKEN",
    "PROTOS",
    "REPO",
    "SHEET",
    "WAIT",
    "ChildServer",
    "Client",
    "Closed",
    "Table",
    "connect",
    "connect_admin",
    "create_table",
    "hello_refused",
    "msgpack_frame",
    "next_id",
    "open_ws",
    "running_server",
    "start_subprocess_server",
    "test_config",
    "vtt_server",
    "vtt_table",
]


@pytest.fixture
async def vtt_server(tmp_path: Path) -> AsyncIterator[Server]:
    async with running_server(tmp_path / "data") as srv:
        yield srv


@pytest.fixture
async def vtt_table(vtt_server: Server) -> Table:
    return await create_table(vtt_server.url)
