"""The server's options, as one attrs class (the CLI fills it from argv,
tests build it directly)."""

from __future__ import annotations

from pathlib import Path

import attrs

import rules
from sync_server.limits import (
    HELLO_TIMEOUT_SECONDS,
    MAX_CONNECTIONS_PER_ROOM,
    MAX_CONNECTIONS_PER_USER,
    OUTBOX_MAX_BYTES,
    OUTBOX_MAX_FRAMES,
    PLAYER_BURST,
    PLAYER_RATE_PER_SECOND,
)
from sync_server.ratelimit import RateSpec

# The browser page, written by the client_stub work: client_stub/web/ next to
# this package (an installed wheel ships it as package data at the same place).
DEFAULT_WEB_DIR = Path(__file__).resolve().parent.parent / "client_stub" / "web"


@attrs.define
class Config:
    data_dir: Path = attrs.field(converter=Path)
    host: str = "127.0.0.1"
    port: int = 0
    # Player and observer sessions; None disables the limit.
    rate: RateSpec | None = attrs.Factory(lambda: RateSpec(PLAYER_RATE_PER_SECOND, PLAYER_BURST))
    # GM and admin sessions: unlimited unless given (PROTOCOL.md).
    gm_rate: RateSpec | None = None
    # The admin token; None: VTT_SYNC_ADMIN_TOKEN, else the data dir's file.
    admin_token: str | None = None
    # The dice of every room (tests pass SeededDice / ScriptedDice).
    dice: rules.Dice | None = None
    # SQLite's synchronous pragma: FULL survives power loss; NORMAL (still
    # safe against a process crash in WAL mode) is faster for tests.
    synchronous: str = "FULL"
    # Check the rules' invariants after every command (tests, fuzzing).
    check_invariants: bool = False
    outbox_max_frames: int = OUTBOX_MAX_FRAMES
    outbox_max_bytes: int = OUTBOX_MAX_BYTES
    max_connections_per_room: int = MAX_CONNECTIONS_PER_ROOM
    max_connections_per_user: int = MAX_CONNECTIONS_PER_USER
    hello_timeout: float = HELLO_TIMEOUT_SECONDS
    web_dir: Path = attrs.field(default=DEFAULT_WEB_DIR, converter=Path)
