"""Every limit of the server, with the reason for its value beside it.

Kept in one module so that a reviewer (and docs/security.md) can see the
whole envelope at a glance. The module constants are the defaults; the
server reads its limits from one `Limits` object in its `Config`, passed
down to whatever needs them, so a test (or an operator) changes a limit by
building a `Limits`, never by patching a module global.
"""

from __future__ import annotations

import attrs

# Listed here; their home is the catalog (re-exported: `X as X`).
from rules.catalog import (
    IMPORT_CHUNK_CHARS as IMPORT_CHUNK_CHARS,
)
from rules.catalog import (
    MAX_IMPORT_BYTES as MAX_IMPORT_BYTES,
)
from rules.catalog import (
    MAX_IMPORT_PARTS as MAX_IMPORT_PARTS,
)
from rules.catalog import (
    MAX_ROOM_NAME as MAX_ROOM_NAME,
)
from rules.catalog import (
    MAX_UPLOAD_ID as MAX_UPLOAD_ID,
)
from rules.catalog import (
    ROOM_ID_PATTERN as ROOM_ID_PATTERN,
)
from sync_server.wire.bounds import MAX_CMD_ID_LENGTH as MAX_CMD_ID_LENGTH
from sync_server.wire.bounds import MAX_INT as MAX_INT
from sync_server.wire.bounds import MAX_NESTING as MAX_NESTING
from sync_server.wire.bounds import MIN_INT as MIN_INT
from sync_server.wire.protocol import MAX_FRAME_BYTES as PROTOCOL_MAX_FRAME_BYTES

# --- Transport (PROTOCOL.md, Transport) -----------------------------------

# The largest frame accepted. A command is a few hundred bytes; 64 KiB is
# far above any honest one and keeps a hostile frame from costing memory.
# websockets closes the connection with 1009 past it.
MAX_FRAME_BYTES = PROTOCOL_MAX_FRAME_BYTES

# The first frame must be a hello within this many seconds (else 4408): a
# socket that never authenticates must not hold a slot forever.
HELLO_TIMEOUT_SECONDS = 10.0

# What the codec refuses as bad_frame (nesting depth, integer range) is the
# wire's own: sync_server/wire/bounds.py, imported here so this file lists
# every limit.

# Command ids (MAX_CMD_ID_LENGTH) are bounded by the wire (wire/bounds.py).

# Keepalive: detect dead peers (flaky Wi-Fi) within about 40 s.
PING_INTERVAL_SECONDS = 20.0
PING_TIMEOUT_SECONDS = 20.0

# A closing handshake that the peer does not complete in this time is cut
# (a slow or vanished client must not hold the server's shutdown).
CLOSE_TIMEOUT_SECONDS = 5.0

# websockets' kernel-side write buffer high-water mark. Past it, sends wait,
# and our own per-client outbox (below) absorbs the backlog.
WRITE_LIMIT_BYTES = 64 * 1024

# Incoming frames buffered per connection before websockets stops reading
# the socket (TCP back-pressure on a flooding client).
MAX_INCOMING_QUEUE = 16

# --- Rate limits (PROTOCOL.md, Transport; issue 5) ------------------------

# Player and observer sessions: a human clicking buttons. 20/s sustained
# with a burst of 40 is far above any honest use and cheap for the server.
PLAYER_RATE_PER_SECOND = 20.0
PLAYER_BURST = 40

# GM and admin sessions (VTT modules, scripts): unlimited unless the server
# is started with --gm-rate; None means "no limit".
GM_RATE_PER_SECOND: float | None = None

# Refused hellos (bad token, bad frame) per peer address: a token is 256
# random bits, but a guesser must not get hundreds of tries a second, nor
# fill the log. 5/s with a burst of 20 leaves room for a few mistyped links
# and reconnecting clients behind one NAT address.
FAILED_HELLOS_PER_SECOND = 5.0
FAILED_HELLO_BURST = 20

# Past that bound, a new connection from the address waits this long, then
# is closed with 1008 before its hello is even read: guessing slows to a crawl.
HELLO_PENALTY_SECONDS = 1.0

# --- Connections (issue 5) ------------------------------------------------

# Per user: a GM may run the VTT module, a laptop and a tablet at once;
# 16 screens is generous, and bounds what one stolen token can open.
MAX_CONNECTIONS_PER_USER = 16

# Per room: a table is a handful of people; 256 leaves room for spectators
# and stream overlays while bounding one room's fan-out cost.
MAX_CONNECTIONS_PER_ROOM = 256

# Admin sessions at once (scripts): few are needed.
MAX_ADMIN_CONNECTIONS = 16

# --- Per-client outgoing bytes (PROTOCOL.md: 1013 for slow readers) -------

# Bytes written for one client and not yet taken by its connection (the
# transport's buffer: every frame counts, welcomes and snapshots included).
# A healthy client drains it in milliseconds; one that lags this far behind
# is closed with 1013 and resumes with `since`, so a reader that stopped
# reading costs at most this much memory, whatever its room publishes.
OUTBOX_MAX_BYTES = 8 * 1024 * 1024

# --- Rooms ----------------------------------------------------------------

# Commands one session may have queued in its room and not yet answered.
# Past it the session stops reading its socket (back-pressure), so one
# flooding GM script cannot grow a room's queue without bound.
MAX_INFLIGHT_PER_SESSION = 64

# Commands applied in memory and committed together in one transaction
# (group commit). Bigger batches amortise the fsync; this bound keeps the
# latency of the first command in a batch low.
MAX_COMMAND_BATCH = 128

# Recent patches kept in memory per loaded room, to answer `since` and
# `sync` without touching the database.
RECENT_PATCHES_IN_MEMORY = 500

# The most patches a welcome or a `patches` reply carries; further behind,
# the client gets the state (cheaper than thousands of patches).
MAX_RESUME_PATCHES = 1000

# Command ids remembered for deduplication, per room, counted in versions:
# a retry arrives seconds after a reconnect, not 100,000 commands later.
DEDUP_WINDOW_VERSIONS = 100_000

# A full snapshot of a room every this many versions, so a restart replays
# at most this many patches per room.
SNAPSHOT_EVERY_VERSIONS = 200

# Snapshots kept per room (older ones are deleted with the new one).
SNAPSHOTS_KEPT = 2

# A loaded room with no client and no work is dropped from memory after
# this long (it reloads lazily), so 10,000 rooms do not all stay resident.
ROOM_IDLE_UNLOAD_SECONDS = 300.0

# Room ids (ROOM_ID_PATTERN: in URLs, paths and every hello) and names given
# to create_room (MAX_ROOM_NAME) are arguments of the server's own ops: their
# one home is rules/catalog.py, against which admin commands are checked;
# imported at the top of this file.

# --- Tokens ---------------------------------------------------------------

# Bytes of entropy in a user token (secrets.token_urlsafe): 256 bits.
TOKEN_BYTES = 32

# Shortest admin token the operator may set (VTT_SYNC_ADMIN_TOKEN): it opens
# every room, so it must be a secret no one guesses. 32 characters of
# token_urlsafe are 192 bits; the generated one has 43 (256 bits).
MIN_ADMIN_TOKEN_LENGTH = 32

# Longest token accepted in a hello: real ones are 43 characters; anything
# much longer is not a token and is not worth hashing.
MAX_TOKEN_LENGTH = 256

# A token created by add_user / rotate_token / create_room is kept in memory
# (never on disk) this long so that a retried command (same id, after a
# reconnect) can be answered with its first ack, token included. After that,
# or after a restart, the dup ack carries the result without the token.
TOKEN_RETRY_SECONDS = 600.0

# --- Patches --------------------------------------------------------------

# The largest patch a command may make, encoded (JSON, the larger of the two
# encodings). Clients can count on every frame from the server being at
# most this big (docs/protocol.md); a command whose patch would be larger is
# refused with `rule`, state unchanged. The worst command within the rules'
# bounds makes about 700 KiB (docs/performance.md).
MAX_PATCH_BYTES = 1024 * 1024

# Patches with fewer ops and events than this are far below the bound, so
# they skip the size check (an encode), which costs only on big commands.
PATCH_SIZE_CHECK_ITEMS = 64

# --- Moving rooms (vtt-sync admin export / import) -------------------------

# The room file's bounds (MAX_IMPORT_BYTES: 64 MiB held in memory while it is
# checked; IMPORT_CHUNK_CHARS: 30,000 characters per part, which fits a
# 64 KiB frame in either subprotocol; MAX_IMPORT_PARTS) are import_room's
# arguments: rules/catalog.py holds them with their reasons.

# An event's `kind` in a room file's log: the rules' kinds are a word or two
# (damage, stability_check); a file's longer one is not the rules' own.
MAX_EVENT_KIND = 64

# An upload not continued for this long is dropped when another one starts
# (one upload at a time: the memory bound above holds for the server).
IMPORT_IDLE_SECONDS = 300.0

# --- Shutdown -------------------------------------------------------------

# On SIGINT/SIGTERM: how long queued commands may take to finish and commit,
# and clients' outboxes to flush, before the connections are closed (1001).
SHUTDOWN_DRAIN_SECONDS = 10.0


@attrs.frozen
class Limits:
    """The limits one server runs with (defaults: the constants above)."""

    hello_timeout: float = HELLO_TIMEOUT_SECONDS
    hello_penalty_seconds: float = HELLO_PENALTY_SECONDS
    max_connections_per_user: int = MAX_CONNECTIONS_PER_USER
    max_connections_per_room: int = MAX_CONNECTIONS_PER_ROOM
    max_admin_connections: int = MAX_ADMIN_CONNECTIONS
    outbox_max_bytes: int = OUTBOX_MAX_BYTES
    max_inflight_per_session: int = MAX_INFLIGHT_PER_SESSION
    max_command_batch: int = MAX_COMMAND_BATCH
    recent_patches_in_memory: int = RECENT_PATCHES_IN_MEMORY
    max_resume_patches: int = MAX_RESUME_PATCHES
    dedup_window_versions: int = DEDUP_WINDOW_VERSIONS
    snapshot_every_versions: int = SNAPSHOT_EVERY_VERSIONS
    snapshots_kept: int = SNAPSHOTS_KEPT
    room_idle_unload_seconds: float = ROOM_IDLE_UNLOAD_SECONDS
    token_retry_seconds: float = TOKEN_RETRY_SECONDS
    shutdown_drain_seconds: float = SHUTDOWN_DRAIN_SECONDS
    close_timeout: float = CLOSE_TIMEOUT_SECONDS
    max_patch_bytes: int = MAX_PATCH_BYTES
    max_import_bytes: int = MAX_IMPORT_BYTES


LIMIT_FIELDS = frozenset(f.name for f in attrs.fields(Limits))
