"""Who serves a room: leases with fencing, and the single-node case.

In a cluster (several `vtt-sync serve` nodes on one PostgreSQL database,
pg_leases.py; or several workers on one SQLite file, sqlite_leases.py)
each room is served by exactly one node at a time. A node
*claims* a room before loading it; the claim is a lease in the database
(owner, owner's public URL, `epoch`, `lease_until`), taken only when the
room has no owner or its lease expired, and every claim bumps the epoch.
The node renews its leases in batches well before they expire, and every
commit names the claim: the database refuses a commit whose owner, epoch
or lease no longer hold (`storage.Fenced`), in the same transaction as the
head check. So the log can never fork, whatever the clocks or the pauses
of a node do; time only decides *when* another node may take over.

On one node with SQLite nobody else can write, so `SingleNodeLeases`
answers "always mine" and the server runs the same code either way: where
the server is assembled, `sync_server.hosting.server.leases_for(storage, ...)`
gives the leases of a cluster backend's database (PostgreSQL: `PgLeases`)
or the single-node ones.

Local deadlines: each `Claim` carries `deadline`, a `Clock.monotonic()`
reading taken *before* the claim (or renewal) was sent plus the lease
length. The database set `lease_until` from its own clock after it got the
statement, so the lease surely holds until `deadline` (clock rates aside).
A node serves reads from memory (joins, syncs) only before that deadline:
past it, another node may already be serving the room.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

import attrs

from sync_server.clock import Clock, SystemClock
from sync_server.storage import StorageError

log = logging.getLogger(__name__)

# Default lease length: a node that dies (or pauses) loses its rooms after
# this long, so failover completes within it plus a reconnect. Shorter means
# faster failover but more renewal traffic and more rooms lost to a slow
# database or a long pause.
LEASE_SECONDS = 10.0

# Leases are renewed every lease/RENEWALS_PER_LEASE seconds: two renewals
# in a row can fail (a database restart, a slow disk) before a lease runs
# out.
RENEWALS_PER_LEASE = 3


@attrs.frozen
class Claim:
    """This node holds the room at `epoch` until at least `deadline`
    (`Clock.monotonic()` time). A later claim, by any node, has a higher
    epoch and fences this one."""

    room: str
    epoch: int
    deadline: float


@attrs.frozen
class Owner:
    """Who holds a room now: `node_id` and `url` (its public WebSocket URL),
    both None when nobody does (never claimed, released, or lease expired)."""

    room: str
    node_id: str | None
    url: str | None


@runtime_checkable
class Leases(Protocol):
    """Room ownership for one node. Every method but `claim_of` and
    `expired` talks to the shared database and raises `StorageError` when it
    cannot (unreachable, timed out)."""

    node_id: str
    public_url: str
    lease_seconds: float

    async def open(self) -> None:
        """Start (after the storage opened): register the node, if the
        backend keeps a register."""
        ...

    async def close(self) -> None:
        """Release what is still held and unregister (before the storage
        closes)."""
        ...

    async def claim(self, room: str) -> Claim | Owner | None:
        """Take the room if it has no owner, its lease expired, or this node
        owns it already (a claim always starts a new epoch: any earlier
        claim, even this node's own, is fenced). Else the current `Owner`;
        None if no such room."""
        ...

    async def renew(self, rooms: Iterable[str]) -> set[str]:
        """Extend the leases of these held rooms in one statement (and, in a
        cluster, beat this node's heartbeat: called each round, even with
        no room); returns those still held. The others are lost (taken, expired, deleted, or
        released) and forgotten: their commits raise `Fenced`."""
        ...

    async def release(self, rooms: Iterable[str]) -> None:
        """Give the rooms up (idle, or draining): another node may claim
        them at once. Forgotten locally first, so a commit racing with the
        release is fenced rather than half-done."""
        ...

    async def owner(self, room: str) -> Owner | None:
        """Who holds the room now (database view); None if no such room."""
        ...

    def claim_of(self, room: str) -> Claim | None:
        """This node's claim of the room, if it holds one (local view)."""
        ...

    def held(self) -> dict[str, Claim]:
        """Every claim this node holds (local view, a copy)."""
        ...

    def expired(self, now: float) -> set[str]:
        """Forget and return the rooms whose local deadline has passed (the
        database could not be reached to renew them in time)."""
        ...


class SingleNodeLeases:
    """`Leases` for a server alone on its storage (SQLite): every room is
    always this node's, at epoch 0, forever. Nothing is stored."""

    lease_seconds = math.inf

    def __init__(self, node_id: str = "local", public_url: str = "") -> None:
        self.node_id = node_id
        self.public_url = public_url

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def claim(self, room: str) -> Claim:
        return Claim(room, 0, math.inf)

    async def renew(self, rooms: Iterable[str]) -> set[str]:
        return set(rooms)

    async def release(self, rooms: Iterable[str]) -> None:
        return None

    async def owner(self, room: str) -> Owner:
        return Owner(room, self.node_id, self.public_url)

    def claim_of(self, room: str) -> Claim:
        return Claim(room, 0, math.inf)

    def held(self) -> dict[str, Claim]:
        return {}

    def expired(self, now: float) -> set[str]:
        return set()


def renewed(held: dict[str, Claim], claims: list[Claim], kept: set[str], until: float) -> None:
    """After a renewal round (any backend): the claims it kept run until
    `until`, the others are lost; a claim taken again meanwhile is newer
    and left as it is."""
    for c in claims:
        if held.get(c.room) is not c:
            continue  # claimed again meanwhile: that claim is newer
        if c.room in kept:
            held[c.room] = Claim(c.room, c.epoch, until)
        else:
            del held[c.room]


class LeaseKeeper:
    """Renews every held lease in one batch each `interval` seconds (a third
    of the lease by default) and reports the rooms lost, so the server drops
    them: `on_lost(rooms)` gets those the database no longer gives this node
    and, while the database is unreachable, those whose local deadline
    passed (the node can no longer prove it owns them)."""

    def __init__(
        self,
        leases: Leases,
        on_lost: Callable[[set[str]], None],
        clock: Clock | None = None,
        interval: float | None = None,
    ) -> None:
        self.leases = leases
        self.on_lost = on_lost
        self.clock = clock or SystemClock()
        self.interval = (
            interval if interval is not None else leases.lease_seconds / RENEWALS_PER_LEASE
        )
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if math.isfinite(self.interval):
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self.clock.sleep(self.interval)
            await self.tick()

    async def tick(self) -> set[str]:
        """One renewal round (also with no room held: a cluster backend
        beats its node's heartbeat with it); returns the rooms reported lost."""
        held = self.leases.held()
        lost: set[str] = set()
        try:
            kept = await self.leases.renew(held)
            lost = set(held) - kept
        except StorageError as exc:
            log.warning("lease renewal of %d room(s) failed: %s", len(held), exc)
        lost |= self.leases.expired(self.clock.monotonic())
        if lost:
            try:
                self.on_lost(lost)
            except Exception:
                log.exception("on_lost failed for %d room(s)", len(lost))
        return lost
