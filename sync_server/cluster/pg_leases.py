"""Leases on PostgreSQL: a cluster of `vtt-sync serve` nodes on one
database, each room served by one node at a time (docs/cluster.md).

`PgLeases` implements `Leases` (leases.py) on the database of a
`PgStorage` (storage/postgres.py), over that storage's connection pool:
the lease columns of `rooms` (owner, owner's URL, `epoch`, `lease_until`)
and the `nodes` table are part of the storage's schema, migrated by it.

- A claim is one UPDATE that takes the room only if it has no owner, its
  lease expired, or this node owns it, and sets `epoch` from a sequence
  (epochs only grow, and are never reused, even by a room deleted and
  created again). Lease times are the database's (`clock_timestamp()`),
  never a node's.
- The storage's group commit is fenced by this object: it names the node
  and the claim of each room (`PgStorage.leases`, set at construction),
  and the statement refuses a commit whose owner, epoch or lease no longer
  hold; the storage forgets a claim refused that way (`forget`).
- A node's id is registered in `nodes` at `open`, with a heartbeat each
  renewal round: a second process started under an id in use is refused.

The storage stays usable alone (export, import, reads); its commits need
the claim that only these leases hold.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
from collections.abc import Iterable

from sync_server.clock import Clock, SystemClock
from sync_server.cluster.leases import LEASE_SECONDS, RENEWALS_PER_LEASE, Claim, Owner, renewed
from sync_server.storage import StorageError
from sync_server.storage.postgres import PgStorage

log = logging.getLogger(__name__)

# Claim attempts when the owner found after a failed claim is gone (it
# released the room between the two statements): the race is rare, so a
# few tries end it.
CLAIM_ATTEMPTS = 3

# How long a node starting under an id that another instance used lately
# watches that instance's heartbeat before it concludes it is gone (it
# crashed, or was restarted): the renewal interval (a live node beats once
# per interval, with its lease renewals) and half of it again for a slow
# round. A clean stop deletes its row, so a restart seldom waits.
DUPLICATE_WATCH_INTERVALS = 1.5
# How often the starting node reads that heartbeat while it watches.
DUPLICATE_POLL_SECONDS = 0.1

CLAIM_SQL = """
UPDATE rooms SET owner = $2, owner_url = $3, epoch = nextval('room_epochs'),
    lease_until = clock_timestamp() + make_interval(secs => $4::float8)
WHERE room = $1 AND (owner IS NULL OR owner = $2 OR lease_until <= clock_timestamp())
RETURNING epoch
"""

# Rooms sorted (as in the group commit: locks taken in one order).
RENEW_SQL = """
UPDATE rooms r SET lease_until = clock_timestamp() + make_interval(secs => $2::float8)
FROM unnest($3::text[], $4::bigint[]) AS h(room, epoch)
WHERE r.room = h.room AND r.epoch = h.epoch AND r.owner = $1
  AND r.lease_until > clock_timestamp()
RETURNING r.room
"""

RELEASE_SQL = """
UPDATE rooms r SET owner = NULL, owner_url = NULL, lease_until = NULL
FROM unnest($2::text[], $3::bigint[]) AS h(room, epoch)
WHERE r.room = h.room AND r.epoch = h.epoch AND r.owner = $1
"""

NODE_SQL = """
SELECT instance, url, seen, extract(epoch FROM clock_timestamp() - seen) AS age
FROM nodes WHERE node_id = $1
"""

# Register (or take over) this node id for this process; a heartbeat.
NODE_UPSERT_SQL = """
INSERT INTO nodes (node_id, instance, url, seen) VALUES ($1, $2, $3, clock_timestamp())
ON CONFLICT (node_id) DO UPDATE SET instance = $2, url = $3, seen = clock_timestamp()
"""

# (the URL too: a node on port 0 learns its own once listening, after open)
NODE_BEAT_SQL = """
UPDATE nodes SET seen = clock_timestamp(), url = $3 WHERE node_id = $1 AND instance = $2
"""

OWNER_SQL = """
SELECT owner, owner_url, epoch, head, lease_until > clock_timestamp() AS live
FROM rooms WHERE room = $1
"""


class PgLeases:
    """`Leases` on the database of `storage`, for the node `node_id`
    reachable by clients at `public_url`; fences the storage's commits
    from construction on."""

    def __init__(
        self,
        storage: PgStorage,
        *,
        node_id: str,
        public_url: str = "",
        lease_seconds: float = LEASE_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        if not node_id:
            raise ValueError("node_id must not be empty")
        if not (lease_seconds > 0 and math.isfinite(lease_seconds)):
            raise ValueError("lease_seconds must be a positive number")
        self.storage = storage
        self.node_id = node_id
        self.public_url = public_url
        self.lease_seconds = float(lease_seconds)
        self.clock = clock or SystemClock()
        self._held: dict[str, Claim] = {}
        # This process, among those that ever ran under `node_id` (nodes).
        self.instance = secrets.token_hex(8)
        storage.leases = self

    # --- lifecycle --------------------------------------------------------

    async def open(self) -> None:
        """Register this node (after the storage opened: the schema exists)."""
        await self._register()

    async def close(self) -> None:
        """Release the leases still held (best effort: the server stopped
        its rooms first, and commits being written finish first), then
        unregister the node: its id is free for the next start at once."""
        await self.storage.flushed()
        if self._held:
            try:
                await self.release(list(self._held))
            except StorageError as exc:
                log.warning("releasing leases at close failed (they will expire): %s", exc)
        try:
            async with self.storage.connection() as conn:
                await conn.execute(
                    "DELETE FROM nodes WHERE node_id = $1 AND instance = $2",
                    self.node_id,
                    self.instance,
                )
        except StorageError as exc:
            log.warning("unregistering node %r at close failed: %s", self.node_id, exc)

    async def _register(self) -> None:
        """Take `node_id` for this process, unless another live process
        holds it: two nodes under one id would each take the other's rooms
        (a claim by the same id always succeeds), for ever. An instance
        seen lately is watched for one renewal round: if its heartbeat
        moves it is alive, and this node refuses to start naming it; if it
        does not (it crashed, or is this node's own previous run), the id
        is taken over."""
        interval = self.lease_seconds / RENEWALS_PER_LEASE
        async with self.storage.connection() as conn:
            row = await conn.fetchrow(NODE_SQL, self.node_id)
        if row is not None and row["instance"] != self.instance:
            watch = interval * DUPLICATE_WATCH_INTERVALS - float(row["age"])
            # Real seconds, whatever self.clock is: the heartbeat watched
            # moves on the database's clock.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + watch
            while watch > 0 and loop.time() < deadline:
                await asyncio.sleep(DUPLICATE_POLL_SECONDS)
                async with self.storage.connection() as conn:
                    now = await conn.fetchrow(NODE_SQL, self.node_id)
                if now is None:
                    break  # it stopped cleanly meanwhile
                if now["instance"] != row["instance"] or now["seen"] != row["seen"]:
                    raise StorageError(
                        f"node id {self.node_id!r} is in use by another running node "
                        f"(at {now['url'] or 'no public URL'}, instance {now['instance']}): "
                        "give each node its own --node-id (the default, hostname:port, "
                        "collides on cloned machines)"
                    )
        async with self.storage.connection() as conn:
            await conn.execute(NODE_UPSERT_SQL, self.node_id, self.instance, self.public_url)

    # --- the Leases interface ---------------------------------------------

    async def claim(self, room: str) -> Claim | Owner | None:
        for _ in range(CLAIM_ATTEMPTS):
            sent = self.clock.monotonic()
            async with self.storage.connection() as conn:
                epoch = await conn.fetchval(
                    CLAIM_SQL, room, self.node_id, self.public_url, self.lease_seconds
                )
                if epoch is not None:
                    claim = Claim(room, epoch, sent + self.lease_seconds)
                    self._held[room] = claim
                    return claim
                row = await conn.fetchrow(OWNER_SQL, room)
            self.forget(room)
            if row is None:
                return None
            if row["owner"] is not None and row["live"]:
                return Owner(room, row["owner"], row["owner_url"])
            # Released or expired between the two statements: try again.
        return Owner(room, None, None)

    async def renew(self, rooms: Iterable[str]) -> set[str]:
        claims = sorted(
            (c for c in (self._held.get(r) for r in set(rooms)) if c is not None),
            key=lambda c: c.room,
        )
        sent = self.clock.monotonic()
        async with self.storage.connection() as conn:
            done = await conn.execute(NODE_BEAT_SQL, self.node_id, self.instance, self.public_url)
            if done.endswith(" 0"):
                # Another process of the same id took the row over: this
                # one is the duplicate now (it was paused past the watch).
                # Its claims are fenced by the newer epochs anyway.
                log.error(
                    "node id %r was taken over by another process: this one is a duplicate; "
                    "stop it, or give it its own --node-id",
                    self.node_id,
                )
            if not claims:
                return set()
            rows = await conn.fetch(
                RENEW_SQL,
                self.node_id,
                self.lease_seconds,
                [c.room for c in claims],
                [c.epoch for c in claims],
            )
        kept = {row["room"] for row in rows}
        renewed(self._held, claims, kept, sent + self.lease_seconds)
        return kept

    async def release(self, rooms: Iterable[str]) -> None:
        claims = [c for c in (self._held.pop(r, None) for r in rooms) if c is not None]
        if not claims:
            return
        async with self.storage.connection() as conn:
            await conn.execute(
                RELEASE_SQL, self.node_id, [c.room for c in claims], [c.epoch for c in claims]
            )

    async def owner(self, room: str) -> Owner | None:
        async with self.storage.connection() as conn:
            row = await conn.fetchrow(OWNER_SQL, room)
        if row is None:
            return None
        if row["owner"] is None or not row["live"]:
            return Owner(room, None, None)
        return Owner(room, row["owner"], row["owner_url"])

    def claim_of(self, room: str) -> Claim | None:
        return self._held.get(room)

    def held(self) -> dict[str, Claim]:
        return dict(self._held)

    def expired(self, now: float) -> set[str]:
        gone = {room for room, c in self._held.items() if c.deadline <= now}
        for room in gone:
            del self._held[room]
        return gone

    # --- the storage's fence ------------------------------------------------

    def forget(self, room: str, claim: Claim | None = None) -> None:
        """Drop the local claim (only `claim`, if given: a newer one stays):
        the storage saw it refused, or the room deleted or replaced."""
        if claim is None or self._held.get(room) is claim:
            self._held.pop(room, None)
