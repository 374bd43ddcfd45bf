"""vtt-sync's sync server: authoritative rooms over WebSocket.

    async with Server(Config(data_dir=path)) as srv:
        print(srv.url)

Packages, by what they hold, bottom up (docs/architecture.md draws the
layers; tests/test_layering.py holds them):
  clock      the clock port; version: the distribution's version
  wire/      the protocol defined once, the typed frames, the codec
  core/      the sans-I/O cores: a room's and a session's state machines,
             the records storage keeps, each viewer's view of a version,
             tokens, the rate limiter, every limit
  observe/   metrics, activity lines, log formats
  storage/   the storage interface and its backends (memory, SQLite,
             PostgreSQL), replay, the room file
  cluster/   leases with fencing: which node serves a room
  hosting/   the asyncio side: composition root, room host, sessions, bus,
             outbox, HTTP routes, TLS
  ops/       what an operator runs: CLI, serving, settings, workers, admin
             CLI, demo
  testing/   helpers shipped with the product: servers on port 0, raw
             clients, the storage, lease and bus contracts

Importing `sync_server.wire.protocol` or `sync_server.wire.codec` (as the
Python client does) loads no server code: `Config` and `Server` load on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The version of the whole distribution (sync_server/version.py; pyproject.toml
# reads it from here): `vtt-sync --version`, /healthz, CHANGELOG.md's latest entry.
from sync_server.version import __version__

if TYPE_CHECKING:
    from sync_server.hosting.config import Config
    from sync_server.hosting.server import Server

__all__ = ["Config", "Server", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Config":
        from sync_server.hosting.config import Config

        return Config
    if name == "Server":
        from sync_server.hosting.server import Server

        return Server
    raise AttributeError(f"module 'sync_server' has no attribute {name!r}")
