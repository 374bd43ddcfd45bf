"""A real vtt-sync server for client tests (built on tests/helpers/server.py's
config): the demo room (a GM, three
players, an observer, four characters) on 127.0.0.1, port 0, in a temporary
data directory, with a restart on the same data directory and port.

    async with LiveTable(tmp_path) as t:
        t.url, t.http_url, t.token("gm"), t.user("p1"), await t.state()
        await t.restart()
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import rules
from sync_server.hosting.config import Config
from sync_server.hosting.server import Server
from sync_server.ops.demo import DEMO_ROOM, ensure_demo
from sync_server.testing.server import seen_by
from tests.helpers.server import test_config

ROOM = DEMO_ROOM


class LiveTable:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.port = 0
        self.server: Server | None = None
        self.people: dict[str, dict[str, str]] = {}

    def _config(self) -> Config:
        # the server family's test config (invariants checked after every command)
        return test_config(self.data_dir, port=self.port, rate=None)

    async def start(self) -> LiveTable:
        self.server = Server(self._config())
        await self.server.start()
        self.port = self.server.port
        self.people = await ensure_demo(self.server)
        return self

    async def stop(self) -> None:
        if self.server is not None:
            with contextlib.suppress(Exception):
                await self.server.close()
            self.server = None

    async def restart(self) -> None:
        """Stop the server and start a new one on the same port and data dir."""
        await self.stop()
        await self.start()

    async def __aenter__(self) -> LiveTable:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def token(self, key: str) -> str:
        return self.people[key]["token"]

    def user(self, key: str) -> str:
        return self.people[key]["user"]

    def page(self, key: str) -> str:
        return f"{self.http_url}#room={ROOM}&token={self.token(key)}"

    def seen(self, key: str, state: dict[str, Any]) -> dict[str, Any]:
        """`state` (the GM's) as the demo person `key` may see it (per-role
        views, and their affordances worked out by the rules again)."""
        person = self.people[key]
        return seen_by(state, rules.Viewer(person["user"], person["role"]))

    async def state(self) -> tuple[int, dict[str, Any]]:
        """The server's own (version, state) of the room, as the GM sees it
        (with the GM's affordances)."""
        assert self.server is not None
        host = await self.server.rooms.get(ROOM)
        assert host is not None
        return host.v, host.core.view(host.core.viewer(self.user("gm")))
