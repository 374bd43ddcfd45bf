"""The work items of a room's queue: commands, joins, `sync` requests,
deletion, queries and barriers, with the future each is answered through.

Why one queue for all of them: a room applies its work one item at a time,
in arrival order, so a client's welcome and every later patch are
consistent with each other without locks. The sessions, the HTTP API and
the admin path build these; the room host (room_host.py) carries them out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from sync_server.core.inputs import CommandIn
from sync_server.core.room import RoomCore
from sync_server.hosting.bus import Message, Sink
from sync_server.hosting.registry import Closable
from sync_server.storage import AdminRecord

log = logging.getLogger(__name__)


class RoomClosed(Exception):
    """The room was deleted or unloaded while a caller held its host."""


# --- work items ---------------------------------------------------------


@attrs.define
class Command:
    """One `cmd` frame, authenticated. `reply` reaches the sender only;
    `done` frees the sender's in-flight slot once it is answered."""

    command: CommandIn
    reply: Callable[[dict[str, Any]], None]
    done: Callable[[], None] | None = None
    received: float = 0.0
    # Told the stored patch and its view before the reply, for a sender that
    # does not read the room's patches (the HTTP door answers with it).
    patch_to: Callable[[dict[str, Any], Any], None] | None = None
    # How it was answered ("ok", "dup", an error code, KEY_REUSED), set
    # before `reply` is called: the HTTP door's status reads it.
    outcome: str | None = None

    @property
    def op(self) -> Any:
        return self.command.op

    @property
    def cmd_id(self) -> str:
        return self.command.cmd_id


class Subscriber(Sink, Closable, Protocol):
    """What a joining session hands the room: a sink for the bus and a
    closable for the registry (one object, two narrow interfaces), able to
    take a frame of its own (the welcome, a sync reply)."""

    # Waiting for a snapshot of its view (past a patch's cap of views).
    stale: bool

    def send(self, frame: dict[str, Any]) -> int:
        """Send a frame to this subscriber only; returns the bytes it took."""
        ...

    def resync(self, message: Message) -> None:
        """Its snapshot: no longer stale, the room's messages reach it again."""
        ...


@attrs.define
class Join:
    """A hello for this room: answered with a welcome on `sink`, which then
    receives every later patch. `future` gets (role, epoch)."""

    sink: Subscriber
    user: str
    since: int | None
    future: asyncio.Future[tuple[str, int]]
    # Told what the welcome cost (ratelimit.reply_cost), for the user's bucket.
    charge: Callable[[float], None] | None = None
    # The hash of the token the hello authenticated: still the user's? (RoomCore.join)
    token_hash: bytes | None = None


@attrs.define
class Sync:
    """A `sync` frame: patches after `since`, or a snapshot."""

    sink: Subscriber
    since: int
    request_id: str | None = None
    done: Callable[[], None] | None = None
    # Told what the reply cost (ratelimit.reply_cost), for the user's bucket.
    charge: Callable[[float], None] | None = None


@attrs.define
class Delete:
    admin: AdminRecord
    future: asyncio.Future[None]


@attrs.define
class Query:
    """A read of the room as stored (between batches, never halfway through
    one): `read(core)`'s value, or its exception, goes to `future`."""

    read: Callable[[RoomCore], Any]
    future: asyncio.Future[Any]


@attrs.define
class Barrier:
    """Resolved once every item queued before it is done (shutdown, tests)."""

    future: asyncio.Future[None]


@attrs.define
class Resync:
    """A subscriber past a patch's cap of views (bus.Message.admit): it gets
    a snapshot of its view, one per turn of the loop. Not queued: the host
    holds such subscribers beside its queue (RoomHost._next)."""

    sink: Subscriber


@attrs.define
class Left:
    """A session of `user` left the room: if none of its affordance class
    is open any more, the room stops keeping that class's affordances
    current (RoomCore.forget_class)."""

    user: str


Item = Command | Join | Sync | Query | Delete | Barrier | Resync | Left
