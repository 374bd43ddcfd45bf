"""vtt-sync's sync server: authoritative rooms over WebSocket.

    async with Server(Config(data_dir=path)) as srv:
        print(srv.url)

Packages, by what they hold (docs/architecture.md draws the whole picture):
  wire/      the protocol defined once, and the codec (msgpack / JSON)
  core/      the sans-I/O cores: a room's and a session's state machines,
             tokens, the rate limiter, every limit
  storage/   the storage interface and its backends (memory, SQLite,
             PostgreSQL), the room file
  cluster/   leases with fencing: which node serves a room
  hosting/   the asyncio side: composition root, room host, sessions, bus,
             outbox, HTTP routes, TLS, the clock port
  ops/       what an operator runs and reads: CLI, settings, admin CLI,
             demo, logs, metrics
  testing/   helpers shipped with the product: servers on port 0, raw
             clients, the storage contract

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
