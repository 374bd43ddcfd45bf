"""Rooms: each loaded room is a `RoomHost` with its own work queue and worker.

Why one worker per room: commands of a room apply one at a time, in arrival
order (PROTOCOL.md), while rooms stay independent of each other. Joins,
`sync` requests and deletion go through the same queue, so a client's
welcome and every later patch are consistent with each other without locks.

A command's path through the worker:
  dedup by (user, id) -> rules.apply (pure) -> diff -> storage.commit
  (group commit: consecutive commands are applied in memory and committed in
  one call, which the storage may merge with other rooms') -> publish the
  patch to every client -> ack to the sender.
Nothing is sent before the commit returns, so no client ever holds a
version that a crash could take back. If the commit fails, the batch's
in-memory changes are reverted and each of its commands gets `internal`.

The server decides no rule: it calls the rules engine, stores what it says
and relays it. Undo replays stored inverse ops (the one thing the engine
leaves to the server), then checks the engine's invariants.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import attrs

import rules
from sync_server import frames
from sync_server.auth import RecentTokens, hash_token, new_token
from sync_server.fanout import FanOut, Outbox
from sync_server.limits import (
    DEDUP_WINDOW_VERSIONS,
    MAX_COMMAND_BATCH,
    MAX_CONNECTIONS_PER_ROOM,
    MAX_CONNECTIONS_PER_USER,
    MAX_RESUME_PATCHES,
    RECENT_PATCHES_IN_MEMORY,
    ROOM_ID_PATTERN,
    ROOM_IDLE_UNLOAD_SECONDS,
    SNAPSHOT_EVERY_VERSIONS,
)
from sync_server.metrics import Metrics, op_label
from sync_server.storage import AdminRecord, LoadedRoom, Storage, VersionRecord

log = logging.getLogger(__name__)

ROOM_ID_RE = re.compile(ROOM_ID_PATTERN)
NO_EXPECT = object()  # `expect` absent (None is a value a client may send)


class RoomClosed(Exception):
    """The room was deleted or unloaded while a caller held its host."""


class JoinRefused(Exception):
    """A hello that cannot join: `code` is the error code, `close` the close code."""

    def __init__(self, code: str, message: str, close: int) -> None:
        super().__init__(message)
        self.code, self.message, self.close = code, message, close


def invert(ops: list[Any], old: dict[str, Any]) -> list[Any]:
    """The ops that turn the new state back into `old`: the same as
    `diff(new, old)`, but in time proportional to the change, not to the
    state (the ops of `diff` touch disjoint paths whose parents exist in
    `old`, so each one is undone by restoring or removing its own path)."""
    inverse: list[Any] = []
    for op in reversed(ops):
        path = op[1]
        node: Any = old
        for key in path:
            if isinstance(node, dict) and key in node:
                node = node[key]
            else:
                inverse.append(["del", list(path)])
                break
        else:
            inverse.append(["set", list(path), node])
    return inverse


# --- work items ---------------------------------------------------------


@attrs.define
class Command:
    """One `cmd` frame, authenticated. `reply` reaches the sender only;
    `done` frees the sender's in-flight slot once it is answered."""

    actor: rules.Actor
    epoch: int
    cmd_id: str
    op: Any
    args: Any
    reply: Callable[[dict[str, Any]], None]
    expect: Any = NO_EXPECT
    done: Callable[[], None] | None = None
    received: float = attrs.Factory(time.monotonic)


@attrs.define
class Join:
    """A hello for this room: answered with a welcome on `outbox`, which then
    receives every later patch. `future` gets (role, epoch)."""

    outbox: Outbox
    user: str
    since: int | None
    future: asyncio.Future[tuple[str, int]]


@attrs.define
class Sync:
    """A `sync` frame: patches after `since`, or a snapshot."""

    outbox: Outbox
    since: int
    done: Callable[[], None] | None = None


@attrs.define
class Delete:
    admin: AdminRecord
    future: asyncio.Future[None]


@attrs.define
class Barrier:
    """Resolved once every item queued before it is done (shutdown, tests)."""

    future: asyncio.Future[None]


Item = Command | Join | Sync | Delete | Barrier


@attrs.define
class _Out:
    """What one evaluated command produces, emitted after the commit."""

    item: Command
    frame: dict[str, Any]
    outcome: str
    patch: dict[str, Any] | None = None
    record: VersionRecord | None = None
    closes: list[str] = attrs.Factory(list)  # users whose sessions end (4403)
    pending: bool = False  # depends on this batch's commit (accepted or its dup)


@attrs.frozen
class RoomServices:
    """What every room of a server shares: its storage, fan-out, metrics,
    dice, recent tokens and limits. One object, handed from `Rooms` to each
    `RoomHost` it loads, so that the two never list them twice."""

    storage: Storage
    fanout: FanOut
    metrics: Metrics
    dice: rules.Dice
    tokens: RecentTokens
    check_invariants: bool = False
    max_per_room: int = MAX_CONNECTIONS_PER_ROOM
    max_per_user: int = MAX_CONNECTIONS_PER_USER


class RoomHost:
    """A loaded room: its state at version `v`, its queue and its worker."""

    def __init__(
        self,
        loaded: LoadedRoom,
        services: RoomServices,
    ) -> None:
        self.room_id = loaded.room
        self.services = services
        self.state: dict[str, Any] = loaded.state
        self.room = rules.Room.from_dict(loaded.state)
        self.v = loaded.v
        self.recent: deque[dict[str, Any]] = deque(
            (p.frame() for p in loaded.recent), maxlen=RECENT_PATCHES_IN_MEMORY
        )
        self.dedup: OrderedDict[tuple[str, str], tuple[int, dict[str, Any]]] = OrderedDict(
            ((d.user, d.cmd_id), (d.v, d.result)) for d in loaded.dedup
        )
        # Bumped when a user's token is rotated or the user removed: sessions
        # opened under an older epoch may no longer send commands.
        self.epochs: dict[str, int] = {}
        self._items: deque[Item] = deque()
        self._wake = asyncio.Event()
        self._busy = False
        self.closed = False
        self.last_active = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._run())

    # --- queue ------------------------------------------------------------

    def submit(self, item: Item) -> None:
        if self.closed:
            raise RoomClosed(self.room_id)
        self._items.append(item)
        self._wake.set()

    async def barrier(self) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.submit(Barrier(fut))
        await fut

    @property
    def idle(self) -> bool:
        return (
            not self._items
            and not self._busy
            and self.services.fanout.count(self.room_id) == 0
            and time.monotonic() - self.last_active > ROOM_IDLE_UNLOAD_SECONDS
        )

    async def stop(self) -> None:
        """Stop the worker (unload). Callers make sure the queue is empty."""
        self.closed = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        while True:
            while not self._items:
                self._wake.clear()
                await self._wake.wait()
            item = self._items.popleft()
            self._busy = True
            try:
                if isinstance(item, Command):
                    if item.op == "undo":
                        await self._run_undo(item)
                    else:
                        batch = [item]
                        while (
                            self._items
                            and len(batch) < MAX_COMMAND_BATCH
                            and isinstance(self._items[0], Command)
                            and self._items[0].op != "undo"
                        ):
                            batch.append(self._items.popleft())  # type: ignore[arg-type]
                        await self._run_batch(batch)
                elif isinstance(item, Join):
                    await self._join(item)
                elif isinstance(item, Sync):
                    await self._sync(item)
                elif isinstance(item, Delete):
                    await self._delete(item)
                elif isinstance(item, Barrier) and not item.future.done():
                    item.future.set_result(None)
            except Exception:
                log.exception("room %s: worker error", self.room_id)
            finally:
                self._busy = False
                self.last_active = time.monotonic()
            if self.closed:
                self._fail_queued()
                return

    def _fail_queued(self) -> None:
        """After deletion: answer whatever is still queued."""
        while self._items:
            item = self._items.popleft()
            if isinstance(item, Command):
                item.reply(frames.error("not_found", "the room was deleted", item.cmd_id))
                if item.done:
                    item.done()
            elif isinstance(item, Join | Delete):
                if not item.future.done():
                    item.future.set_exception(RoomClosed(self.room_id))
            elif isinstance(item, Barrier):
                if not item.future.done():
                    item.future.set_result(None)
            elif isinstance(item, Sync) and item.done:
                item.done()

    # --- commands ---------------------------------------------------------

    def _prelude(self, c: Command) -> _Out | None:
        """Checks before the rules: a known id answers with its first ack
        (PROTOCOL.md: dedup comes first, `expect` is checked after it), and
        a session whose token was rotated or whose user was removed is done."""
        entry = self.dedup.get((c.actor.user, c.cmd_id))
        if entry is not None:
            v, result = entry
            result = dict(result)
            remembered = self.services.tokens.recall((self.room_id, c.actor.user, c.cmd_id))
            if remembered is not None:
                result[remembered[0]] = remembered[1]
            return _Out(c, frames.ack(c.cmd_id, result, v=v, dup=True), "dup")
        if c.actor.user not in self.room.users or self.epochs.get(c.actor.user, 0) != c.epoch:
            return self._refuse(
                c, ("forbidden", "this session's user was removed or its token rotated")
            )
        return None

    def _expect_error(self, c: Command) -> tuple[str, str] | None:
        if c.expect is NO_EXPECT:
            return None
        e = c.expect
        if type(e) is not int or e < 0:
            return ("invalid_args", "expect must be a version number (an integer >= 0)")
        if e != self.v:
            return ("conflict", f"the room is at version {self.v}, not {e}")
        return None

    def _refuse(self, c: Command, err: tuple[str, str]) -> _Out:
        return _Out(c, frames.error(err[0], err[1], c.cmd_id), err[0])

    def _evaluate(self, c: Command) -> _Out:
        """Apply one command in memory (sans-I/O): the new state, the
        version record to commit, and the frames to emit after the commit."""
        early = self._prelude(c)
        if early is not None:
            return early
        expect_err = self._expect_error(c)
        if isinstance(c.op, str) and c.op in rules.ADMIN_OPS:
            return self._refuse(c, ("forbidden", f"{c.op} needs an admin session"))
        try:
            out = rules.apply(self.room, c.op, c.args, c.actor, self.services.dice)
        except rules.Refused as refused:
            err = frames.earliest((refused.code, refused.message), expect_err)
            assert err is not None
            return self._refuse(c, err)
        except Exception:
            log.exception("room %s: rules error on %s", self.room_id, op_label(c.op))
            return self._refuse(c, ("internal", "the rules engine failed on this command"))
        if expect_err is not None:
            return self._refuse(c, expect_err)
        # Incremental: unchanged characters keep their old dict objects, so
        # `diff` skips them by identity (the state dicts are never mutated).
        new_state = out.room.to_dict(since=(self.room, self.state))
        if self.services.check_invariants:
            broken = rules.violations(out.room)
            if broken:
                log.error("room %s: %s broke invariants: %s", self.room_id, c.op, broken)
                return self._refuse(c, ("internal", "the command would break an invariant"))
        result = dict(out.result)
        ack_result = dict(result)
        token_set: tuple[tuple[str, bytes], ...] = ()
        token_del: tuple[str, ...] = ()
        closes: list[str] = []
        if c.op in ("add_user", "rotate_token"):
            uid = result.get("user") or c.args.get("user")
            token = new_token()
            token_set = ((uid, hash_token(token)),)
            ack_result["user"] = uid
            ack_result["token"] = token
            self.services.tokens.remember((self.room_id, c.actor.user, c.cmd_id), "token", token)
            if c.op == "rotate_token":
                self.epochs[uid] = self.epochs.get(uid, 0) + 1
                closes.append(uid)
        elif c.op == "remove_user":
            uid = c.args["user"]
            token_del = (uid,)
            self.epochs[uid] = self.epochs.get(uid, 0) + 1
            closes.append(uid)
        return self._accept(
            c,
            new_room=out.room,
            new_state=new_state,
            events=out.events,
            result=result,
            ack_result=ack_result,
            undoable=c.op not in rules.USER_OPS,
            token_set=token_set,
            token_del=token_del,
            closes=closes,
        )

    def _accept(
        self,
        c: Command,
        *,
        new_room: rules.Room,
        new_state: dict[str, Any],
        events: list[dict[str, Any]],
        result: dict[str, Any],
        ack_result: dict[str, Any],
        undoable: bool,
        undoes: int | None = None,
        token_set: tuple[tuple[str, bytes], ...] = (),
        token_del: tuple[str, ...] = (),
        closes: list[str] | None = None,
    ) -> _Out:
        v = self.v + 1
        ops = rules.diff(self.state, new_state)
        inverse = invert(ops, self.state)
        record = VersionRecord(
            room=self.room_id,
            v=v,
            cmd_id=c.cmd_id,
            user=c.actor.user,
            op=c.op,
            args=c.args,
            ops=ops,
            inverse=inverse,
            events=events,
            result=result,
            undoable=undoable,
            undoes=undoes,
            ts=time.time(),
            token_set=token_set,
            token_del=token_del,
        )
        self.room, self.state, self.v = new_room, new_state, v
        self.dedup[(c.actor.user, c.cmd_id)] = (v, result)
        return _Out(
            c,
            frames.ack(c.cmd_id, ack_result, v=v),
            "ok",
            patch=frames.patch(v, ops, events, c.actor.user, c.cmd_id),
            record=record,
            closes=closes or [],
            pending=True,
        )

    async def _run_batch(self, batch: list[Command]) -> None:
        saved = (self.room, self.state, self.v, dict(self.epochs))
        outs: list[_Out] = []
        added: list[tuple[str, str]] = []
        pending_keys: set[tuple[str, str]] = set()
        for c in batch:
            out = self._evaluate(c)
            key = (c.actor.user, c.cmd_id)
            if out.record is not None:
                added.append(key)
                pending_keys.add(key)
            elif out.outcome == "dup" and key in pending_keys:
                out.pending = True  # a retry of a command of this very batch
            outs.append(out)
        await self._commit_and_emit(outs, saved, added)

    async def _commit_and_emit(
        self,
        outs: list[_Out],
        saved: tuple[rules.Room, dict[str, Any], int, dict[str, int]],
        added: list[tuple[str, str]],
    ) -> None:
        records = [o.record for o in outs if o.record is not None]
        if records:
            before = saved[2]
            snapshot = None
            if self.v // SNAPSHOT_EVERY_VERSIONS > before // SNAPSHOT_EVERY_VERSIONS:
                snapshot = (self.v, self.state)
            try:
                await self.services.storage.commit(self.room_id, records, snapshot)
            except Exception as exc:
                log.error(
                    "room %s: commit failed, %d commands refused: %s",
                    self.room_id,
                    len(records),
                    exc,
                )
                self.room, self.state, self.v, self.epochs = saved
                for key in added:
                    self.dedup.pop(key, None)
                for o in outs:
                    if o.pending:
                        o.frame = frames.error(
                            "internal",
                            "the server could not store this command; retry",
                            o.item.cmd_id,
                        )
                        o.outcome, o.patch, o.closes = "internal", None, []
            else:
                while self.dedup:
                    first = next(iter(self.dedup.values()))
                    if first[0] > self.v - DEDUP_WINDOW_VERSIONS:
                        break
                    self.dedup.popitem(last=False)
        now = time.monotonic()
        for o in outs:
            if o.patch is not None:
                self.recent.append(o.patch)
                self.services.fanout.publish(self.room_id, o.patch)
                self.services.metrics.patch()
            o.item.reply(o.frame)
            for uid in o.closes:
                self.services.fanout.close_user(
                    self.room_id, uid, frames.CLOSE_REVOKED, "user removed or token rotated"
                )
            self.services.metrics.command(o.item.op, o.outcome, now - o.item.received)
            if o.item.done is not None:
                o.item.done()

    async def _run_undo(self, c: Command) -> None:
        saved = (self.room, self.state, self.v, dict(self.epochs))
        out = await self._evaluate_undo(c)
        await self._commit_and_emit([out], saved, [(c.actor.user, c.cmd_id)] if out.record else [])

    async def _evaluate_undo(self, c: Command) -> _Out:
        """Undo (PROTOCOL.md): revert the latest undoable command not yet
        undone with its stored inverse ops, as a new version. What the revert
        restores (and what it keeps: users, live owners) is the rules'
        business: `rules.revert`."""
        early = self._prelude(c)
        if early is not None:
            return early
        args_err = None
        if c.args not in (None, {}):
            args_err = ("invalid_args", "undo takes no arguments")
        role_err = None
        try:
            rules.authorize_undo(c.actor)
        except rules.Refused as refused:
            role_err = (refused.code, refused.message)
        err = frames.earliest(args_err, role_err, self._expect_error(c))
        if err is not None:
            return self._refuse(c, err)
        try:
            target = await self.services.storage.undo_target(self.room_id)
        except Exception as exc:
            log.error("room %s: cannot read the log for undo: %s", self.room_id, exc)
            return self._refuse(c, ("internal", "the log could not be read"))
        if target is None:
            return self._refuse(c, ("conflict", "nothing to undo"))
        try:
            room = rules.revert(self.room, self.state, target.inverse, target.v)
        except rules.Refused as refused:
            return self._refuse(c, (refused.code, refused.message))
        events = [{"kind": "undo", "undone": target.v, "op": target.op, "by": target.user}]
        result = {"undone": target.v, "op": target.op}
        return self._accept(
            c,
            new_room=room,
            new_state=room.to_dict(since=(self.room, self.state)),
            events=events,
            result=result,
            ack_result=dict(result),
            undoable=False,
            undoes=target.v,
        )

    # --- joins, sync, deletion -------------------------------------------

    async def _patches_after(self, since: int) -> list[dict[str, Any]] | None:
        """Every patch after `since`, or None when the client needs the state
        (ahead of the room, too far behind, or the log does not have them)."""
        if since == self.v:
            return []
        if since < 0 or since > self.v or self.v - since > MAX_RESUME_PATCHES:
            return None
        if self.recent and self.recent[0]["v"] <= since + 1:
            start = since + 1 - self.recent[0]["v"]
            return list(itertools.islice(self.recent, start, None))
        try:
            rows = await self.services.storage.patches(self.room_id, since, self.v)
        except Exception as exc:
            log.error("room %s: cannot read the log: %s", self.room_id, exc)
            return None
        if len(rows) != self.v - since:
            return None
        return [r.frame() for r in rows]

    async def _join(self, j: Join) -> None:
        if j.future.done():  # the session gave up (closed) meanwhile
            return
        user = self.state["users"].get(j.user)
        if user is None:
            j.future.set_exception(
                JoinRefused("unauthenticated", "bad token or room", frames.CLOSE_UNAUTHENTICATED)
            )
            return
        if self.services.fanout.count(self.room_id) >= self.services.max_per_room:
            j.future.set_exception(
                JoinRefused("rate_limited", "too many connections to this room", 4429)
            )
            return
        if self.services.fanout.count(self.room_id, j.user) >= self.services.max_per_user:
            j.future.set_exception(
                JoinRefused("rate_limited", "too many connections for this user", 4429)
            )
            return
        welcome: dict[str, Any] = {
            "t": "welcome",
            "room": self.room_id,
            "user": j.user,
            "role": user["role"],
            "v": self.v,
        }
        patches = None if j.since is None else await self._patches_after(j.since)
        if patches is None:
            welcome["state"] = self.state
        else:
            welcome["patches"] = patches
        j.outbox.send(welcome)
        self.services.fanout.subscribe(self.room_id, j.outbox)
        j.future.set_result((user["role"], self.epochs.get(j.user, 0)))

    async def _sync(self, s: Sync) -> None:
        patches = await self._patches_after(s.since)
        if patches is None:
            s.outbox.send({"t": "snapshot", "v": self.v, "state": self.state})
        else:
            s.outbox.send({"t": "patches", "patches": patches})
        if s.done is not None:
            s.done()

    async def _delete(self, d: Delete) -> None:
        try:
            await self.services.storage.delete_room(self.room_id, d.admin)
        except Exception as exc:
            if not d.future.done():
                d.future.set_exception(exc)
            return
        self.closed = True
        self.services.fanout.close_room(self.room_id, frames.CLOSE_ROOM_DELETED, "room deleted")
        if not d.future.done():
            d.future.set_result(None)


class Rooms:
    """Every room: the ids that exist (cheap, loaded at start) and the hosts
    of the rooms in use (loaded lazily on first use, unloaded when idle), so
    a server with 10,000 rooms starts fast and holds only the busy ones."""

    def __init__(self, services: RoomServices) -> None:
        self.services = services
        self.known: set[str] = set()
        self.hosts: dict[str, RoomHost] = {}
        self._loading: dict[str, asyncio.Future[RoomHost | None]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.known = await self.services.storage.room_ids()
        self.services.metrics.rooms.set(len(self.known))
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def exists(self, room: str) -> bool:
        return room in self.known

    async def get(self, room: str) -> RoomHost | None:
        """The room's host, loading it on first use; None if no such room."""
        host = self.hosts.get(room)
        if host is not None and not host.closed:
            return host
        if room not in self.known:
            return None
        pending = self._loading.get(room)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[RoomHost | None] = asyncio.get_running_loop().create_future()
        self._loading[room] = fut
        try:
            loaded = await self.services.storage.load_room(
                room, RECENT_PATCHES_IN_MEMORY, DEDUP_WINDOW_VERSIONS
            )
            host = None
            if loaded is not None and room in self.known:
                host = RoomHost(loaded, self.services)
                self.hosts[room] = host
                self.services.metrics.rooms_loaded.set(len(self.hosts))
            fut.set_result(host)
            return host
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._loading[room]

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

    async def unload_idle(self) -> list[str]:
        """Drop idle rooms from memory (they reload lazily); returns their ids.

        Each `await host.stop()` lets other tasks run, so a later room of the
        snapshot may meanwhile have been deleted (its host popped), and even
        re-created and loaded again (a new host under the same id). Only the
        very host found idle is dropped: deleting `hosts[room]` blindly would
        raise KeyError (ending the sweeper for good) or drop the new host
        without stopping it (a live orphan, then a second host for the room)."""
        dropped = []
        for room, host in list(self.hosts.items()):
            if host.idle and self.hosts.get(room) is host:
                del self.hosts[room]
                await host.stop()
                dropped.append(room)
        self.services.metrics.rooms_loaded.set(len(self.hosts))
        return dropped

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(max(1.0, ROOM_IDLE_UNLOAD_SECONDS / 5))
            await self.unload_idle()


def valid_room_id(room: object) -> bool:
    return isinstance(room, str) and ROOM_ID_RE.fullmatch(room) is not None


__all__ = [
    "Barrier",
    "Command",
    "Delete",
    "Join",
    "JoinRefused",
    "RoomClosed",
    "RoomHost",
    "Rooms",
    "Sync",
    "valid_room_id",
]
