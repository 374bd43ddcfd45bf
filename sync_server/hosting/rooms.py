"""The directory of rooms: which rooms exist, which are loaded, lazy
loading (after a claim, in cluster mode), idle unloading and the loss of a
room to another node. Each loaded room is a `RoomHost` (room_host.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from sync_server.cluster.leases import Claim, Owner, SingleNodeLeases
from sync_server.core.reads import JoinRefused
from sync_server.core.room import RoomCore
from sync_server.hosting.room_host import RoomHost, RoomServices
from sync_server.hosting.work import Barrier, Command, Delete, Join, Query, RoomClosed, Sync
from sync_server.storage import AdminRecord, replay
from sync_server.wire import protocol

log = logging.getLogger(__name__)


class Rooms:
    """Every room: the ids that exist (cheap, loaded at start) and the hosts
    of the rooms in use (loaded lazily on first use, unloaded when idle), so
    a server with 10,000 rooms starts fast and holds only the busy ones.

    In cluster mode (`services.leases` is a database's), a room is loaded
    only once claimed (cluster/leases.py): a room another node serves is answered
    with that node (`locate` gives its `Owner`), a room lost (its lease
    taken, expired or released, or the room deleted elsewhere) is dropped
    at once, and idle rooms give their lease up. Alone on its storage, every
    claim succeeds and the same code serves one node."""

    def __init__(self, services: RoomServices) -> None:
        self.services = services
        self.known: set[str] = set()
        self.hosts: dict[str, RoomHost] = {}
        self._loading: dict[str, asyncio.Future[RoomHost | Owner | None]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # Room loads begun so far (RoomHost.load_seq).
        self.loads = 0

    @property
    def cluster(self) -> bool:
        """Do other nodes serve rooms of the same storage?"""
        return not isinstance(self.services.leases, SingleNodeLeases)

    async def start(self) -> None:
        self.known = await self.services.storage.room_ids()
        self.services.metrics.rooms.set(len(self.known))
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def exists(self, room: str) -> bool:
        """Known to exist here (in cluster mode, rooms created by other
        nodes since the start are found by `has`)."""
        return room in self.known

    async def has(self, room: str) -> bool:
        """Does the room exist (asking the shared storage in cluster mode)?"""
        if room in self.known:
            return True
        if self.cluster and await self.services.leases.owner(room) is not None:
            self.created(room)
            return True
        return False

    def new_core(self, loaded: Any) -> RoomCore:
        s = self.services
        return RoomCore(
            loaded,
            dice=s.dice,
            wall_clock=s.clock.time,
            new_token=s.new_token,
            recent_tokens=s.tokens,
            limits=s.limits,
            check_invariants=s.check_invariants,
            affordances=s.affordances,
        )

    async def get(self, room: str) -> RoomHost | None:
        """The room's host, loading it on first use; None if no such room
        (or, in cluster mode, if another node serves it)."""
        found = await self.locate(room)
        return found if isinstance(found, RoomHost) else None

    async def locate(self, room: str) -> RoomHost | Owner | None:
        """Where the room is served: its host here (claimed and loaded on
        first use), the `Owner` node serving it (cluster mode), or None if
        there is no such room."""
        host = self.hosts.get(room)
        if host is not None and not host.closed:
            return host
        if room not in self.known and not self.cluster:
            return None
        pending = self._loading.get(room)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[RoomHost | Owner | None] = asyncio.get_running_loop().create_future()
        self._loading[room] = fut
        try:
            found = await self._claim_and_load(room)
            fut.set_result(found)
            return found
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._loading[room]

    async def _claim_and_load(self, room: str) -> RoomHost | Owner | None:
        claim = await self.services.leases.claim(room)
        if claim is None:  # no such room (deleted elsewhere, or never was)
            self.known.discard(room)
            return None
        if isinstance(claim, Owner):
            return claim
        assert isinstance(claim, Claim)
        limits = self.services.limits
        self.loads += 1
        load_seq = self.loads
        try:
            stored = await self.services.storage.load_room(
                room,
                limits.recent_patches_in_memory,
                limits.dedup_window_versions,
                self.services.clock.time() - limits.dedup_window_seconds,
            )
        except BaseException:
            await self._release(room)
            raise
        if stored is None or (room not in self.known and not self.cluster):
            await self._release(room)
            return None
        try:
            undo = await self.services.storage.undo_target(room)
        except BaseException:
            await self._release(room)
            raise
        loaded = attrs.evolve(replay(stored, limits.recent_patches_in_memory), undo=undo)
        host = RoomHost(room, self.new_core(loaded), self.services)
        host.on_drop = self._dropped
        host.load_seq = load_seq
        self.hosts[room] = host
        self.created(room)
        self.services.metrics.rooms_loaded.set(len(self.hosts))
        return host

    async def _release(self, *rooms: str) -> None:
        """Give rooms' leases up (cluster mode); a failure only delays the
        takeover until the lease expires."""
        try:
            await self.services.leases.release(rooms)
        except Exception as exc:
            log.warning("releasing %s failed (the lease will expire): %s", rooms, exc)

    def _dropped(self, host: RoomHost) -> None:
        """A host closed itself (lost): forget it and stop its worker."""
        if self.hosts.get(host.room_id) is host:
            del self.hosts[host.room_id]
            self.services.metrics.rooms_loaded.set(len(self.hosts))
        self._spawn(host.stop())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def lost(self, rooms: set[str]) -> None:
        """The lease keeper says these rooms are no longer this node's
        (taken over, expired while the database was unreachable, or
        deleted): drop their hosts at once (no new work gets in). Whether a
        room was deleted is then asked of the database, to close its
        sessions with 4404 rather than 1012."""
        for room in rooms:
            host = self.hosts.get(room)
            if host is None or host.lost_reason is not None:
                continue
            host.refuse_work()  # at once, while we find out why
            self._spawn(self._lose(host))

    async def _lose(self, host: RoomHost) -> None:
        code = protocol.CLOSE_SERVICE_RESTART
        with contextlib.suppress(Exception):
            if await self.services.leases.owner(host.room_id) is None:
                code = protocol.CLOSE_ROOM_DELETED
                self.known.discard(host.room_id)
        host.lost("its lease is lost", code)

    async def release_all(self) -> None:
        """Draining (cluster mode): stop every room and give its lease up,
        so that its clients, closed with 1012, are served by another node
        at once. Queued commands finish first (`drain`)."""
        hosts = list(self.hosts.items())
        self.hosts.clear()
        for _, host in hosts:
            await host.stop()
        if hosts:
            await self._release(*(room for room, _ in hosts))

    def created(self, room: str) -> None:
        self.known.add(room)
        self.services.metrics.rooms.set(len(self.known))

    async def delete(self, room: str, admin: AdminRecord) -> None:
        """Delete a room: queued commands finish first, then the room's
        storage goes and its clients are closed with 4404."""
        host = await self.get(room)
        self.known.discard(room)  # no new hello gets in from now on
        try:
            if host is not None:
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                host.submit(Delete(admin, fut))
                await fut
                self.hosts.pop(room, None)
            else:
                await self.services.storage.delete_room(room, admin)
        except BaseException:
            self.known.add(room)
            raise
        self.services.metrics.rooms.set(len(self.known))
        self.services.metrics.rooms_loaded.set(len(self.hosts))

    async def replace(self, room: str, store: Callable[[], Awaitable[None]]) -> None:
        """Replace an existing room's stored content (an import with
        `replace`), while it may be in use. Hellos for the room wait (as
        during a lazy load) until the new room is loaded; the old host
        finishes its queued work and stops; its sessions are closed with
        1012 and reconnect to the new room. `store` writes the new room
        (all or nothing); if it fails, the old room is loaded again."""
        fut: asyncio.Future[RoomHost | Owner | None] = asyncio.get_running_loop().create_future()
        while room in self._loading:  # a load in progress: let it finish first
            await asyncio.shield(self._loading[room])
        self._loading[room] = fut
        try:
            old = self.hosts.pop(room, None)
            if old is not None and not old.closed:
                await old.barrier()
                await old.stop()
            self.services.registry.close_room(
                room, protocol.CLOSE_SERVICE_RESTART, "room replaced; reconnect", now=False
            )
            failed: BaseException | None = None
            try:
                await store()
            except BaseException as exc:
                failed = exc
            # The new room is claimed afresh (cluster mode: a replaced room
            # fences whoever served it) and loaded.
            fut.set_result(await self._claim_and_load(room))
            if failed is not None:
                raise failed
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._loading[room]

    async def drain(self) -> None:
        """Wait until every queued command is applied, committed and sent."""
        hosts = [h for h in self.hosts.values() if not h.closed]
        if hosts:
            await asyncio.gather(*(h.barrier() for h in hosts), return_exceptions=True)

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for host in list(self.hosts.values()):
            await host.stop()
        self.hosts.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def unload_idle(self) -> list[str]:
        """Drop idle rooms from memory (they reload lazily); returns their ids.

        Each `await host.stop()` lets other tasks run, so a later room of the
        snapshot may meanwhile have been deleted (its host popped), and even
        re-created and loaded again (a new host under the same id). Only the
        very host found idle is dropped: deleting `hosts[room]` blindly would
        raise KeyError (ending the sweeper for good) or drop the new host
        without stopping it (a live orphan, then a second host for the room).
        A host that closed itself (it lost the room to another writer) goes
        too."""
        dropped = []
        for room, host in list(self.hosts.items()):
            if (host.idle or host.closed) and self.hosts.get(room) is host:
                del self.hosts[room]
                await host.stop()
                if host.lost_reason is None:
                    await self._release(room)  # ownership must not pile up on one node
                dropped.append(room)
        self.services.metrics.rooms_loaded.set(len(self.hosts))
        return dropped

    async def _sweep(self) -> None:
        limits = self.services.limits
        while True:
            await self.services.clock.sleep(max(1.0, limits.room_idle_unload_seconds / 5))
            await self.unload_idle()


__all__ = [
    "Barrier",
    "Command",
    "Delete",
    "Join",
    "JoinRefused",
    "Query",
    "RoomClosed",
    "RoomHost",
    "RoomServices",
    "Rooms",
    "Sync",
]
