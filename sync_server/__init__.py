"""vtt-sync's sync server: authoritative rooms over WebSocket (PROTOCOL.md).

    async with Server(Config(data_dir=path)) as srv:
        print(srv.url)

Modules, by what they hold:
  limits      every limit, with its reason
  config      the server's options
  codec       frames <-> MessagePack / JSON, by subprotocol
  frames      the frames the server sends, error and close codes
  auth        tokens: generation, hashes, the admin token
  ratelimit   the per-connection token bucket
  storage     the storage interface and its records
  sqlite_store  SQLite (WAL, group commit) behind that interface
  fanout      the fan-out interface, in-process fan-out, per-client outboxes
  rooms       a room's queue and worker: apply, diff, commit, publish, ack; undo
  admin       create_room / delete_room
  sessions    one connection: hello, frames, rate limit
  web         /healthz, /metrics, the browser page
  metrics     Prometheus instruments (per-server registry)
  server      everything wired together; graceful shutdown
  demo        the --demo room
  cli         `vtt-sync serve` / `vtt-sync client`
"""

from sync_server.config import Config
from sync_server.server import Server

__all__ = ["Config", "Server"]
