"""`Storage` in memory: the reference backend.

It keeps nothing across processes, so it serves the contract test suite (it
shows what a backend must do in the fewest lines), fast unit tests of the
room host, and benchmarks that leave the disk out. Every value goes in and
out through a deep copy, as a real backend's serialization would: a caller
can never alias what is stored.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs

from sync_server.clock import Clock, SystemClock
from sync_server.core.limits import SNAPSHOTS_KEPT
from sync_server.storage import (
    AdminRecord,
    DedupEntry,
    PatchRow,
    RoomDump,
    RoomExists,
    RoomSummary,
    StorageError,
    StoredRoom,
    TokenInUse,
    UndoTarget,
    VersionConflict,
    VersionRecord,
)
from sync_server.storage.replay import name_after


@attrs.define
class _Room:
    head: int
    snapshots: dict[int, dict[str, Any]]
    versions: dict[int, VersionRecord] = attrs.Factory(dict)
    undone: set[int] = attrs.Factory(set)
    cmd_ids: set[tuple[str, str]] = attrs.Factory(set)
    created: float = 0.0


class MemoryStorage:
    """`Storage` in a dict. `fail_next` makes the next writes raise (tests
    of what the server does when the disk fails)."""

    def __init__(self, snapshots_kept: int = SNAPSHOTS_KEPT, clock: Clock | None = None) -> None:
        self.snapshots_kept = snapshots_kept
        self.clock = clock or SystemClock()
        self._rooms: dict[str, _Room] = {}
        self._tokens: dict[bytes, tuple[str, str]] = {}
        self._admin: dict[str, AdminRecord] = {}
        self.fail_next = 0
        self.opened = False

    async def open(self) -> None:
        self.opened = True

    async def close(self) -> None:
        self.opened = False

    def _write(self) -> None:
        if not self.opened:
            raise StorageError("storage is closed")
        if self.fail_next > 0:
            self.fail_next -= 1
            raise StorageError("injected write failure")

    async def room_ids(self) -> set[str]:
        return set(self._rooms)

    async def create_room(
        self,
        room: str,
        state: dict[str, Any],
        gm_user: str,
        gm_token_hash: bytes,
        admin: AdminRecord,
    ) -> None:
        self._write()
        if room in self._rooms or admin.cmd_id in self._admin:
            raise StorageError(f"room {room!r} or admin command {admin.cmd_id!r} exists")
        self._rooms[room] = _Room(0, {0: copy.deepcopy(state)}, created=self.clock.time())
        self._tokens[gm_token_hash] = (room, gm_user)
        self._admin[admin.cmd_id] = copy.deepcopy(admin)

    async def delete_room(self, room: str, admin: AdminRecord) -> None:
        self._write()
        if admin.cmd_id in self._admin:
            raise StorageError(f"admin command {admin.cmd_id!r} exists")
        self._rooms.pop(room, None)
        self._tokens = {h: ru for h, ru in self._tokens.items() if ru[0] != room}
        self._admin[admin.cmd_id] = copy.deepcopy(admin)

    async def admin_result(self, cmd_id: str) -> AdminRecord | None:
        return copy.deepcopy(self._admin.get(cmd_id))

    async def load_room(
        self, room: str, recent: int, dedup_window: int, dedup_since: float | None = None
    ) -> StoredRoom | None:
        r = self._rooms.get(room)
        if r is None:
            return None
        snap_v = max(r.snapshots)
        first = min(snap_v, r.head - recent)
        log = [_row(r.versions[v]) for v in sorted(r.versions) if v > first]
        since = float("-inf") if dedup_since is None else dedup_since
        dedup = [
            DedupEntry(rec.user, rec.cmd_id, rec.v, copy.deepcopy(rec.result), rec.ts)
            for v, rec in sorted(r.versions.items())
            if v > r.head - dedup_window and rec.cmd_id is not None and rec.ts >= since
        ]
        return StoredRoom(room, snap_v, copy.deepcopy(r.snapshots[snap_v]), log, dedup)

    async def stored_command(self, room: str, user: str, cmd_id: str) -> DedupEntry | None:
        r = self._rooms.get(room)
        if r is None or (user, cmd_id) not in r.cmd_ids:
            return None
        rec = next(rec for rec in r.versions.values() if (rec.user, rec.cmd_id) == (user, cmd_id))
        return DedupEntry(user, cmd_id, rec.v, copy.deepcopy(rec.result), rec.ts)

    async def commit(
        self,
        room: str,
        records: list[VersionRecord],
        snapshot: tuple[int, dict[str, Any]] | None,
        expected: int,
    ) -> None:
        self._write()
        r = self._rooms.get(room)
        if r is None or r.head != expected:
            raise VersionConflict(f"room {room!r} is no longer at version {expected}")
        keys = [(rec.user, rec.cmd_id) for rec in records if rec.cmd_id is not None]
        vs = [rec.v for rec in records]
        if (
            vs != list(range(expected + 1, expected + 1 + len(records)))
            or len(set(keys)) != len(keys)
            or any(k in r.cmd_ids for k in keys)
        ):
            raise StorageError(f"room {room!r}: versions or command ids already stored")
        # All checks passed: now apply, so that a refusal above stores nothing.
        for rec in records:
            r.versions[rec.v] = copy.deepcopy(rec)
            if rec.cmd_id is not None:
                r.cmd_ids.add((rec.user, rec.cmd_id))
            if rec.undoes is not None:
                r.undone.add(rec.undoes)
            for user in rec.token_del:
                self._tokens = {h: ru for h, ru in self._tokens.items() if ru != (room, user)}
            for user, token_hash in rec.token_set:
                self._tokens = {h: ru for h, ru in self._tokens.items() if ru != (room, user)}
                self._tokens[token_hash] = (room, user)
        r.head = expected + len(records)
        if snapshot is not None:
            r.snapshots[snapshot[0]] = copy.deepcopy(snapshot[1])
            for old in sorted(r.snapshots)[: -self.snapshots_kept]:
                del r.snapshots[old]

    async def find_token(self, token_hash: bytes) -> tuple[str, str] | None:
        return self._tokens.get(token_hash)

    async def undo_target(self, room: str, before: int | None = None) -> UndoTarget | None:
        r = self._rooms.get(room)
        if r is None:
            return None
        for v in sorted(r.versions, reverse=True):
            rec = r.versions[v]
            if rec.undoable and v not in r.undone and (before is None or v < before):
                return UndoTarget(v, rec.op, rec.user, copy.deepcopy(rec.inverse))
        return None

    async def room_summaries(self) -> list[RoomSummary]:
        out = []
        for room, r in sorted(self._rooms.items()):
            snap_v = max(r.snapshots)
            renames = [
                r.versions[v].args
                for v in sorted(r.versions)
                if v > snap_v and r.versions[v].op == "update_room"
            ]
            head = r.versions.get(r.head)
            name = name_after(r.snapshots[snap_v].get("name"), copy.deepcopy(renames))
            out.append(
                RoomSummary(room, r.head, r.created, None if head is None else head.ts, name)
            )
        return out

    async def export_room(self, room: str) -> RoomDump | None:
        r = self._rooms.get(room)
        if r is None:
            return None
        snap_v = max(r.snapshots)
        versions = [
            attrs.evolve(copy.deepcopy(r.versions[v]), token_set=(), token_del=())
            for v in sorted(r.versions)
        ]
        tokens = {user: h for h, (rm, user) in self._tokens.items() if rm == room}
        return RoomDump(
            room,
            r.head,
            r.created,
            snap_v,
            copy.deepcopy(r.snapshots[snap_v]),
            versions,
            frozenset(r.undone),
            tokens,
        )

    async def import_room(self, dump: RoomDump, admin: AdminRecord, replace: bool = False) -> None:
        self._write()
        room = dump.room
        if room in self._rooms and not replace:
            raise RoomExists(f"room {room!r} already exists")
        if admin.cmd_id in self._admin:
            raise StorageError(f"admin command {admin.cmd_id!r} exists")
        for user, token_hash in dump.tokens.items():
            owner = self._tokens.get(token_hash)
            if owner is not None and owner[0] != room:
                raise TokenInUse(
                    f"the token hash of user {user} is already used by {owner[1]} of room "
                    f"{owner[0]!r}: import without token hashes, or delete that room"
                )
        # All checks passed: now replace, so that a refusal above stores nothing.
        versions = {rec.v: copy.deepcopy(rec) for rec in dump.versions}
        self._rooms[room] = _Room(
            dump.head,
            {dump.snapshot_v: copy.deepcopy(dump.snapshot)},
            versions,
            set(dump.undone),
            {(rec.user, rec.cmd_id) for rec in dump.versions if rec.cmd_id is not None},
            dump.created,
        )
        self._tokens = {h: ru for h, ru in self._tokens.items() if ru[0] != room}
        for user, token_hash in dump.tokens.items():
            self._tokens[token_hash] = (room, user)
        self._admin[admin.cmd_id] = copy.deepcopy(admin)


def _row(rec: VersionRecord) -> PatchRow:
    return PatchRow(
        rec.v,
        rec.cmd_id,
        rec.user,
        copy.deepcopy(rec.ops),
        copy.deepcopy(rec.events),
        copy.deepcopy(rec.views),
    )
