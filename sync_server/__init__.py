"""vtt-sync's sync server: authoritative rooms over WebSocket.

    async with Server(Config(data_dir=path)) as srv:
        print(srv.url)

Modules, by what they hold (docs/architecture.md draws the whole picture):
  protocol      the wire protocol, defined once (names, codes, frame builders)
  codec         frames <-> MessagePack / JSON, by subprotocol
  core/room     a room's sans-I/O state machine: evaluate, commit, rollback
  core/session  a session's sans-I/O frame handling and hello checks
  rooms         the asyncio room host (queue, batch, store, publish) and the directory
  sessions      the asyncio session (one connection), with its narrow deps
  storage       the storage interface, its records, and `replay`
  sqlite_store  SQLite (WAL, group commit) behind that interface
  memory_store  the in-memory reference backend
  bus           the room bus: publish a room's frames to its subscribers
  registry      this process's sessions per room and user (limits, closes)
  outbox        one client's sending side, bounded in bytes
  ws_fastpath   the one module touching websockets internals (optional)
  admin         create_room / delete_room / import_room
  admin_http    GET /admin/export (the admin token in a header)
  transfer      the room file: export format, checks before an import
  auth          tokens: generation, hashes, the admin token
  ratelimit     the token bucket
  limits        every limit, with its reason; the `Limits` object
  clock         the clock port (system, fake)
  config        the server's options
  settings      serve's settings table: flag > environment > TOML file > default
  logs          text or JSON log lines, websockets' logger, redaction
  activity      session lines and command summaries at INFO
  tls           the TLS context, reloaded in place (SIGHUP)
  web           /healthz, /metrics, the page's files; HEAD, OPTIONS, CORS
  metrics       Prometheus instruments (per-server registry)
  server        the composition root; graceful shutdown
  demo, cli     the --demo room; `vtt-sync serve`
  admin_cli     `vtt-sync admin export|import|backup`

Importing `sync_server.protocol` or `sync_server.codec` (as the Python
client does) loads no server code: `Config` and `Server` load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The version of the whole distribution (pyproject.toml reads it from here):
# `vtt-sync --version`, /healthz, CHANGELOG.md's latest entry.
__version__ = "0.2.0"

if TYPE_CHECKING:
    from sync_server.config import Config
    from sync_server.server import Server

__all__ = ["Config", "Server", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Config":
        from sync_server.config import Config

        return Config
    if name == "Server":
        from sync_server.server import Server

        return Server
    raise AttributeError(f"module 'sync_server' has no attribute {name!r}")
