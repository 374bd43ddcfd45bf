"""Pytest fixtures over the product's server helpers (sync_server.testing):
`vtt_server` (an in-process server on a tmp data dir, port 0) and
`vtt_table` (a room with a GM, two players, an observer and three
characters on it); `server_thread` (a server in a thread of its own, for
Hypothesis examples that each run their clients with `asyncio.run`).
Everything else is re-exported from there."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

import sync_server.testing.server as testing_server
from rules.testing import SHEET
from sync_server import Server
from sync_server.hosting import picows_transport
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
    "both_transports",
    "next_id",
    "on_both_transports",
    "open_ws",
    "running_server",
    "server_thread",
    "spy_evaluations",
    "status_patients",
    "start_subprocess_server",
    "test_config",
    "vtt_server",
    "vtt_table",
]


F = TypeVar("F", bound=Any)

TRANSPORTS = [
    "websockets",
    pytest.param(
        "picows",
        marks=pytest.mark.skipif(
            not picows_transport.available(), reason="the [fast] extra (picows) is not installed"
        ),
    ),
]


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """The transport of every server the test starts (in-process or child)."""
    name = getattr(request, "param", "websockets")
    before, testing_server.TRANSPORT = testing_server.TRANSPORT, name
    try:
        yield name
    finally:
        testing_server.TRANSPORT = before


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked `http_door` (it reaches the HTTP API or /admin/ over
    HTTP) is not run on picows, which serves neither: it answers them 501
    naming `--transport websockets`, as tests/server/test_transports.py
    checks. Deselected, not skipped: there is nothing there to fail."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_picows = callspec is not None and callspec.params.get("transport") == "picows"
        (dropped if on_picows and item.get_closest_marker("http_door") else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# A module's marks (`pytestmark = on_both_transports`): run its tests on
# both transports (issue 22); `both_transports` decorates one test.
on_both_transports = [
    pytest.mark.usefixtures("transport"),
    pytest.mark.parametrize("transport", TRANSPORTS, indirect=True),
]


def both_transports(test: F) -> F:
    for mark in reversed(on_both_transports):
        test = mark(test)
    return test


@pytest.fixture
async def vtt_server(tmp_path: Path, transport: str) -> AsyncIterator[Server]:
    async with running_server(tmp_path / "data") as srv:
        yield srv


@pytest.fixture
async def vtt_table(vtt_server: Server) -> Table:
    return await create_table(vtt_server.url)


def spy_evaluations(
    monkeypatch: pytest.MonkeyPatch, read: Callable[[], Any] | None = None
) -> list[Any]:
    """What `read()` gives in every call of `RoomCore.evaluate_batch` (by
    default the name of the thread it runs in: the event loop's or a
    worker's), appended to the list returned, in order."""
    from sync_server.core.room import RoomCore

    seen: list[Any] = []
    real = RoomCore.evaluate_batch
    take = read if read is not None else (lambda: threading.current_thread().name)

    def spy(self: RoomCore, log: Any = None) -> Any:
        seen.append(take())
        return real(self, log)

    monkeypatch.setattr(RoomCore, "evaluate_batch", spy)
    return seen


async def status_patients(gm: Client, url: str, room: str, n: int) -> list[tuple[Client, str, str]]:
    """`n` players, each owning a `status` character (a view of their own)
    that rests (so a clock advance concerns each of them), each connected:
    (their client, their character, their token)."""
    players = []
    for i in range(n):
        user = (await gm.ok("add_user", {"name": f"P{i}", "role": "player"}))["result"]
        char = await gm.ok(
            "add_character", {**SHEET, "name": f"Pat{i}", "owner": user["user"], "shown": "status"}
        )
        c = await connect(url, user["token"], room)
        players.append((c, char["result"]["char"], user["token"]))
    for c, char, _ in players:
        await c.ok("rest", {"char": char, "kind": "short"})
    return players


@contextlib.contextmanager
def server_thread(data_dir: Path, **overrides: Any) -> Iterator[Server]:
    """An in-process server living in its own thread and event loop, so that
    each Hypothesis example can run its clients with `asyncio.run`."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        try:
            async with running_server(data_dir, **overrides) as srv:
                box["srv"], box["loop"] = srv, asyncio.get_running_loop()
                box["stop"] = asyncio.Event()
                ready.set()
                await box["stop"].wait()
        except BaseException as exc:  # reported to the test thread
            box["error"] = exc
            ready.set()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(WAIT), "the server did not start"
    if "error" in box:
        raise box["error"]
    try:
        yield box["srv"]
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(WAIT)
        assert not thread.is_alive(), "the server did not stop"
    if "error" in box:  # a crash of the server's loop fails the test
        raise box["error"]
