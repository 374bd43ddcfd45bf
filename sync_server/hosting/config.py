"""The server's options, as one attrs class (the CLI fills it from its
settings table, sync_server/ops/settings.py: flag > environment > file >
default; tests build it directly). Limits live in one `Limits` object."""

from __future__ import annotations

from pathlib import Path

import attrs

import rules
from sync_server.cluster.leases import LEASE_SECONDS
from sync_server.core.limits import (
    FAILED_HELLO_BURST,
    FAILED_HELLOS_PER_SECOND,
    PLAYER_BURST,
    PLAYER_RATE_PER_SECOND,
    Limits,
)
from sync_server.core.ratelimit import RateSpec

# The browser page and the JS module ship as package data of the clients
# package (client_stub/web/); the server reads them through
# importlib.resources, never by a path into that package's folder.
WEB_PACKAGE = "client_stub.web"


@attrs.define
class Config:
    data_dir: Path = attrs.field(converter=Path)
    host: str = "127.0.0.1"
    port: int = 0
    # Player and observer sessions; None disables the limit.
    rate: RateSpec | None = attrs.Factory(lambda: RateSpec(PLAYER_RATE_PER_SECOND, PLAYER_BURST))
    # GM and admin sessions: unlimited unless given (docs/protocol.md, "Limits").
    gm_rate: RateSpec | None = None
    # Refused hellos per peer address; None disables the limit.
    hello_failure_rate: RateSpec | None = attrs.Factory(
        lambda: RateSpec(FAILED_HELLOS_PER_SECOND, FAILED_HELLO_BURST)
    )
    # The admin token; None: VTT_SYNC_ADMIN_TOKEN, else the data dir's file.
    admin_token: str | None = None
    # The dice of every room (tests pass SeededDice / ScriptedDice).
    dice: rules.Dice | None = None
    # SQLite's synchronous pragma: FULL survives power loss; NORMAL (still
    # safe against a process crash in WAL mode) is faster for tests.
    synchronous: str = "FULL"
    # Check the rules' invariants after every command (tests, fuzzing).
    check_invariants: bool = False
    # Each viewer's view carries what they may do now (rules/affordances.py),
    # kept current by the patches. Off only to measure its cost (the server
    # bench runs both).
    affordances: bool = True
    limits: Limits = attrs.Factory(Limits)
    # Write shared pre-serialized frames straight to transports (ws_fastpath.py).
    fast_fanout: bool = True
    # The WebSocket library: "websockets" (the default, every route) or
    # "picows" (the [fast] extra: WebSocket and the GET routes only, no HTTP
    # API; hosting/picows_transport.py).
    transport: str = "websockets"
    # Where the page's files are: a package (read as package data) or a folder.
    web: str | Path = WEB_PACKAGE
    # Origins (scheme://host[:port]) of pages allowed to open a WebSocket
    # besides the server's own page; "*" allows any (not recommended).
    allowed_origins: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    # TLS: a certificate chain and its key (PEM). Both or neither; with them
    # the server speaks https:// and wss:// (reloaded by `Server.reload_tls`).
    tls_cert: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    tls_key: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    # Reverse proxies (their addresses) whose X-Forwarded-For names the
    # client: logs and the failed-hello limit see the real peer behind them.
    trusted_proxies: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    # On SIGTERM, how long /healthz answers 503 before the server closes
    # (the CLI waits; a load balancer stops sending clients meanwhile).
    drain_seconds: float = 0.0
    # Commands are logged at INFO as one summary per room this often (0: never).
    log_summary_seconds: float = 60.0
    # The address clients reach this server at (ws:// or wss://, path
    # included: behind a proxy, wss://vtt.example/vtt/): every link printed
    # or shown (demo, create-room, invitations, imports) is built on it;
    # without it, on the address bound. Cluster mode (docs/cluster.md): a
    # PostgreSQL DSN holding every room, and `public_url` is also this node's
    # address in redirects; its id (stable across restarts: the node gets its
    # rooms back at once) and its lease. No database: SQLite in `data_dir`.
    public_url: str | None = None
    database: str | None = None
    node_id: str | None = None
    lease_seconds: float = LEASE_SECONDS
    # Workers mode (`serve --workers N`, ops/workers.py): this server is one
    # of several processes a supervisor started on the same data directory.
    # `worker_leases`: on SQLite, its rooms' leases are in the database file
    # (cluster/sqlite_leases.py), so it is a cluster node like a PostgreSQL
    # one. `lock_fd`: the supervisor's data directory lock, inherited (one
    # supervisor per directory, as one server). `listen_fd`: the listening
    # socket every worker accepts on (the port users open), besides the
    # worker's own address that redirects name.
    worker_leases: bool = False
    lock_fd: int | None = None
    listen_fd: int | None = None
