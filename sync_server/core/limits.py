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

# --- Transport (docs/protocol.md, "Connecting") -----------------------------------

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

# A connection must finish its WebSocket opening handshake within this
# long (websockets' default, said once for both transports): a socket that
# never sends its upgrade request holds no slot for long.
HANDSHAKE_TIMEOUT_SECONDS = 10.0

# A closing handshake that the peer does not complete in this time is cut
# (a slow or vanished client must not hold the server's shutdown).
CLOSE_TIMEOUT_SECONDS = 5.0

# websockets' kernel-side write buffer high-water mark. Past it, sends wait,
# and our own per-client outbox (below) absorbs the backlog.
WRITE_LIMIT_BYTES = 64 * 1024

# Incoming frames buffered per connection before websockets stops reading
# the socket (TCP back-pressure on a flooding client).
MAX_INCOMING_QUEUE = 16

# --- Commands over HTTP (the second door: docs/http.md) -------------------

# The request line, headers and body of an HTTP request must all arrive in
# this time, else 408: a socket that trickles bytes must not hold a slot.
HTTP_REQUEST_TIMEOUT_SECONDS = 10.0

# The first line of a request read to choose its door (WebSocket or HTTP
# API); websockets' own bound on a request line, beyond which it refuses.
MAX_REQUEST_LINE_BYTES = 8 * 1024

# Request line and headers of an API request (h11's default): a tool's
# request is a few hundred bytes.
MAX_HTTP_HEAD_BYTES = 16 * 1024

# A command's body is bounded like a command's frame: the same command, the
# same bound, whichever door it comes through (413 past it).
MAX_HTTP_BODY_BYTES = PROTOCOL_MAX_FRAME_BYTES

# The pieces a request may come in: reads of its socket (its head's and its
# body's) and chunks of a chunked body. Each costs the parser ~11 us of the
# event loop whatever its size, so a byte count alone bounds nothing: a
# 64 KiB body sent as 65,536 one-byte chunks held every room's loop 0.74 s
# (issue 33). An honest request comes in a few (a tool writes its head and
# body at once; 64 KiB over a link of 1,448-byte segments is 46 reads);
# 256 leave room for a body in 256-byte pieces and cost at most ~3 ms.
# Past it: 400 (the head) or 413 (the body), and the connection closed.
MAX_HTTP_REQUEST_PIECES = 256

# GET .../history: events of this many patches by default, and at most what
# a room keeps in memory (RECENT_PATCHES_IN_MEMORY below).
HISTORY_DEFAULT_LIMIT = 50

# --- Rate limits (docs/protocol.md, "Limits"; issue 5) ------------------------

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

# --- Workers (`serve --workers N`, ops/workers.py) ------------------------

# Server processes one supervisor runs: one per core is the point; past a
# few dozen, SQLite's single writer and the leases' renewals are the limit,
# and a bigger host belongs on PostgreSQL with nodes on several machines.
MAX_WORKERS = 64

# A worker that dies is started again after this long, doubled after each
# death that came soon after its start, up to the maximum: a worker that
# cannot start (a port taken) must not spin the CPU.
WORKER_RESTART_SECONDS = 0.5
WORKER_RESTART_MAX_SECONDS = 30.0

# A worker that ran this long before dying was healthy: its next restart
# waits the shortest delay again.
WORKER_HEALTHY_SECONDS = 10.0

# The most a worker may take to start listening before the supervisor gives
# up (opening a large database, migrating it).
WORKER_START_SECONDS = 120.0

# Connections waiting to be accepted on the port the workers share
# (asyncio's own default for a server's socket).
WORKERS_LISTEN_BACKLOG = 100

# How often a worker checks that its supervisor still lives: a worker left
# alone (its supervisor killed) drains and stops within this long.
WORKER_ORPHAN_CHECK_SECONDS = 1.0

# --- Per-client outgoing bytes (docs/protocol.md, "Closing": 1013 for slow readers) -------

# Bytes written for one client and not yet taken by its connection (the
# transport's buffer: every frame counts, welcomes and snapshots included).
# A healthy client drains it in milliseconds; one that lags this far behind
# is closed with 1013 and resumes with `since`, so a reader that stopped
# reading costs at most this much memory, whatever its room publishes.
OUTBOX_MAX_BYTES = 8 * 1024 * 1024
# ...and what every client of one room, and every client of the server, may
# hold together: 240 sockets that read nothing held 240 x 8 MiB = 1.9 GiB.
# Past either, the clients holding the most (the slowest readers) are
# dropped first until it holds again, their buffers freed at once; healthy
# clients hold kilobytes. The server budget is the one to size to the
# machine's memory.
OUTBOX_ROOM_MAX_BYTES = 64 * 1024 * 1024
OUTBOX_TOTAL_MAX_BYTES = 256 * 1024 * 1024
# A client gone while holding this much unsent has the freed memory handed
# back to the system (glibc's malloc_trim) this long after, once its
# transport let go of its buffer: Python's frees alone kept RSS at its peak.
TRIM_AFTER_BYTES = 1024 * 1024
TRIM_DELAY_SECONDS = 0.5

# Distinct views one patch is rendered and encoded for, at once, while it is
# published (the GM's plain patch not counted). Each costs a diff and an
# encoding of what the patch touches: 98 players each owning a `status`
# patient made 98 views of a century advance, 652 ms of one event loop.
# Viewers past the cap get no patch but, soon after, a snapshot of their view
# (one per turn of the loop, so that other rooms are served in between):
# there, a view's snapshot cost a tenth of its patch (0.07 ms against 0.75).
# A table of five players with two private views never reaches it.
MAX_VIEW_CLASSES_PER_PATCH = 4

# Players whose own view of one version is rendered and stored with it (a
# player owning a character that is not `full`, whom the version concerns).
# Each is a render of everything the version touches: 98 players owning
# `status` patients cost 98 renders of a century advance (~3 ms each, 330 ms
# of the event loop per advance and undo, before the patch was even sent).
# Past it the others' views are not rendered: the version lists them as
# needing a snapshot (core/views.py `Views`, "resync"), so they get no patch
# of it, live (the bus holds them, as past MAX_VIEW_CLASSES_PER_PATCH) or on
# a resume (a snapshot instead). Same value: the live cap renders no more.
MAX_STORED_VIEWS_PER_VERSION = MAX_VIEW_CLASSES_PER_PATCH

# A room with at least this many characters has its heavy batches evaluated
# off the event loop (a thread; the room's queue waits, other rooms go on). Why:
# one command of such a room may cost tens of milliseconds (a century
# advance over 98 stable patients: the rules, the diff, the views and the
# GM's affordances of every character, ~40 ms), all of it one slice of the
# loop that every other room waited behind (their p99 8 ms -> 74 ms). In a
# thread the interpreter hands the loop its turn every switch interval. A
# small room's command (~0.2 ms) would pay more for the hop than it blocks.
OFF_LOOP_MIN_CHARACTERS = 40
# ...and a batch is heavy when one of its ops has taken at least this long
# in this room lately (CPU time, per command of its batch: its worst, fading
# by 5% at each cheaper evaluation, hosting/share.py OpCosts), or was never
# evaluated in it yet. Why:
# the hop costs ~300 us of CPU a command (the thread, the hand-offs of the
# interpreter lock), and most commands of a big room touch one character
# and cost ~0.2 ms: evaluating all of them off the loop took a 200-character
# room from 460 to 752 us of server CPU a command (server_bench).
OFF_LOOP_MIN_SECONDS = 0.001
# The interpreter's switch interval while such a command is evaluated in a
# thread (hosting/share.py, SwitchInterval): the thread holds the lock in
# slices this long, and the event loop's next step waits for the end of one
# (5 ms by default: another room's p99 under the view-classes load was
# 4.2 ms at 5 ms, 2.6 ms at 1 ms, 1.7 ms quiet).
OFF_LOOP_SWITCH_SECONDS = 0.001

# Each room's share of the process's CPU while other rooms have work
# (hosting/share.py): its worker's steps on the loop and its commands
# evaluated off it are metered (CPU time), and a room past its share waits
# before its next item until it is paid back, at most ROOM_MAX_PAUSE_SECONDS
# at a time; alone on the node it may use all of it. Why: one GM's century
# advances and undos in a loop, in a room of 98 players each owed a snapshot,
# kept the loop busy all the time and took another room's median latency
# from 1 to 12 ms and its p99 from 3 to 45 ms (bench/isolation_bench.py
# --load classes); a room of normal play uses a few percent of this.
ROOM_CPU_SHARE = 0.25
# CPU seconds a room may spend at once before its share applies: a heavy
# command now and then (a century advance: ~30 ms) is never held back.
ROOM_CPU_BURST_SECONDS = 0.05
# Another room "has work" when it was given some within this many seconds
# and was within its own share then (two rooms past theirs do not pause for
# each other: the node would idle).
ROOM_SHARE_WINDOW_SECONDS = 0.05
# The longest a room in debt waits at once before its next item: a queue
# that long never stalls, and its debt is paid back over a few turns.
ROOM_MAX_PAUSE_SECONDS = 0.5
# A room whose worker saw no other room's work for this long owes nothing
# for what it spent meanwhile (alone on the node, it kept nobody waiting).
# Carried, seconds of work alone (a big room built, then century cycles)
# came due at once when another room had a command: 0.5 s of pause at
# every turn for seconds, its GM's undo 1.1-7 s (issue 36). Longer than a
# few of a heavy room's items (a century: 60-90 ms), so that a neighbour
# sending now and then is still seen between them.
ROOM_DEBT_FORGIVEN_SECONDS = 1.0

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

# Command ids remembered for deduplication, per room: the last this many
# versions, and none older than DEDUP_WINDOW_SECONDS. A retry comes after a
# reconnect (seconds, minutes; a client offline for a night at most), so
# both cover it; beyond, the id is still never applied twice (the stored
# log refuses it), but its first ack is not found. Each entry costs ~430
# bytes in memory and one row read when the room loads: 100,000 versions
# were 43 MB a busy room and 100k rows per load (issue 19).
DEDUP_WINDOW_VERSIONS = 10_000
DEDUP_WINDOW_SECONDS = 24 * 3600.0

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
# ...and at most this many of them, server-wide (the oldest go first): a GM
# rotating tokens in a loop must not grow memory (each is ~200 bytes) or the
# cost of remembering one. Past it, the oldest token's retry gets its ack
# without the token, as after the retry window; a real table creates a few.
MAX_RECENT_TOKENS = 10_000

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

# A room file is written in slices of this many versions, each one call of
# the JSON encoder on a worker thread: between two slices the event loop
# gets the interpreter back (one call over a 60k-version room held it ~1 s).
EXPORT_CHUNK_VERSIONS = 500

# A new room's versions are stored by an import in slices of this many, each
# its own transaction: SQLite has one writer, and every room's commits wait
# for the transaction in progress (40,000 versions in one held them ~0.3 s;
# a slice of 500, ~4 ms).
IMPORT_SLICE_VERSIONS = 500

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
    outbox_room_max_bytes: int = OUTBOX_ROOM_MAX_BYTES
    outbox_total_max_bytes: int = OUTBOX_TOTAL_MAX_BYTES
    max_view_classes_per_patch: int = MAX_VIEW_CLASSES_PER_PATCH
    max_stored_views_per_version: int = MAX_STORED_VIEWS_PER_VERSION
    off_loop_min_characters: int = OFF_LOOP_MIN_CHARACTERS
    off_loop_min_seconds: float = OFF_LOOP_MIN_SECONDS
    room_cpu_share: float | None = ROOM_CPU_SHARE  # None: no share (never paused)
    room_cpu_burst: float = ROOM_CPU_BURST_SECONDS
    room_share_window: float = ROOM_SHARE_WINDOW_SECONDS
    max_inflight_per_session: int = MAX_INFLIGHT_PER_SESSION
    max_command_batch: int = MAX_COMMAND_BATCH
    recent_patches_in_memory: int = RECENT_PATCHES_IN_MEMORY
    max_resume_patches: int = MAX_RESUME_PATCHES
    dedup_window_versions: int = DEDUP_WINDOW_VERSIONS
    dedup_window_seconds: float = DEDUP_WINDOW_SECONDS
    snapshot_every_versions: int = SNAPSHOT_EVERY_VERSIONS
    snapshots_kept: int = SNAPSHOTS_KEPT
    room_idle_unload_seconds: float = ROOM_IDLE_UNLOAD_SECONDS
    token_retry_seconds: float = TOKEN_RETRY_SECONDS
    shutdown_drain_seconds: float = SHUTDOWN_DRAIN_SECONDS
    close_timeout: float = CLOSE_TIMEOUT_SECONDS
    max_patch_bytes: int = MAX_PATCH_BYTES
    max_import_bytes: int = MAX_IMPORT_BYTES
    import_idle_seconds: float = IMPORT_IDLE_SECONDS
    max_recent_tokens: int = MAX_RECENT_TOKENS
    ping_interval: float = PING_INTERVAL_SECONDS
    ping_timeout: float = PING_TIMEOUT_SECONDS
    handshake_timeout: float = HANDSHAKE_TIMEOUT_SECONDS
    write_limit_bytes: int = WRITE_LIMIT_BYTES
    max_incoming_queue: int = MAX_INCOMING_QUEUE


LIMIT_FIELDS = frozenset(f.name for f in attrs.fields(Limits))

# The constants above that are no `Limits` field, and why: a server reads
# each from here alone (one home), and tests/server/test_limits.py checks
# that every constant is a field's default or listed here.
FIXED = {
    # The wire's and the file formats' own bounds (wire/bounds.py, the
    # catalog): the same for every server, or clients could not count on them.
    "MAX_FRAME_BYTES": "wire",
    "MAX_CMD_ID_LENGTH": "wire",
    "MAX_INT": "wire",
    "MIN_INT": "wire",
    "MAX_NESTING": "wire",
    "MAX_TOKEN_LENGTH": "wire",
    "ROOM_ID_PATTERN": "wire",
    "MAX_ROOM_NAME": "wire",
    "MAX_UPLOAD_ID": "wire",
    "IMPORT_CHUNK_CHARS": "wire",
    "MAX_IMPORT_PARTS": "wire",
    "MAX_EVENT_KIND": "format",
    "MAX_HTTP_BODY_BYTES": "wire",
    "HISTORY_DEFAULT_LIMIT": "wire",  # documented in the API description
    # The HTTP door's parser, before any server state is reached.
    "HTTP_REQUEST_TIMEOUT_SECONDS": "http",
    "MAX_REQUEST_LINE_BYTES": "http",
    "MAX_HTTP_HEAD_BYTES": "http",
    "MAX_HTTP_REQUEST_PIECES": "http",
    # Rates: configured as `Config.rate`, `gm_rate`, `hello_failure_rate`
    # (settings: --rate ...); these are their defaults.
    "PLAYER_RATE_PER_SECOND": "config",
    "PLAYER_BURST": "config",
    "GM_RATE_PER_SECOND": "config",
    "FAILED_HELLOS_PER_SECOND": "config",
    "FAILED_HELLO_BURST": "config",
    # The supervisor of `serve --workers` (ops/workers.py), not a server.
    "MAX_WORKERS": "process",
    "WORKER_RESTART_SECONDS": "process",
    "WORKER_RESTART_MAX_SECONDS": "process",
    "WORKER_HEALTHY_SECONDS": "process",
    "WORKER_START_SECONDS": "process",
    "WORKERS_LISTEN_BACKLOG": "process",
    "WORKER_ORPHAN_CHECK_SECONDS": "process",
    # Costs, not bounds: how the work is cut, with no effect on what a
    # client may do (memory trims, encoder slices, the size check's cutover).
    "TRIM_AFTER_BYTES": "cost",
    "TRIM_DELAY_SECONDS": "cost",
    "PATCH_SIZE_CHECK_ITEMS": "cost",
    "EXPORT_CHUNK_VERSIONS": "cost",
    "IMPORT_SLICE_VERSIONS": "cost",
    "ROOM_MAX_PAUSE_SECONDS": "cost",
    "ROOM_DEBT_FORGIVEN_SECONDS": "cost",
    "OFF_LOOP_SWITCH_SECONDS": "cost",
    # Secrets' sizes: never lowered by a configuration.
    "TOKEN_BYTES": "secret",
    "MIN_ADMIN_TOKEN_LENGTH": "secret",
}
