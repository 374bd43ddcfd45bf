"""Admin commands: create_room and delete_room (docs/operations.md, "Operations";
role A), import_room (a room file, in parts: docs/protocol.md), and
reissue_gm_link (a new token for a GM who lost their link).

They touch no room state, so they are the server's own (the rules engine only
builds a new room's initial state with `new_room`). One at a time, in
arrival order, under one lock. Their acks carry `result` and no `v`.

import_room carries a room file (sync_server/storage/transfer.py) cut into parts,
since a client frame is at most 64 KiB: parts 0..parts-1 of one `upload`,
in order, each acked; a part sent again is acked again (a retry after a
lost ack). The last part's command imports the room: it alone is recorded
in the admin log (its retry gets its first result back). One upload at a
time, bounded by `Limits.max_import_bytes`, since the server holds it whole.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

import rules
from rules.catalog import op_args
from rules.errors import InvalidArgs
from rules.validate import check_args
from sync_server.clock import Clock, SystemClock
from sync_server.core.auth import RecentTokens, hash_token, new_token
from sync_server.core.limits import Limits
from sync_server.hosting.rooms import Rooms
from sync_server.hosting.share import OFF_LOOP_SWITCH
from sync_server.observe.metrics import Metrics
from sync_server.storage import AdminRecord, Storage, TokenInUse, transfer
from sync_server.wire import frames, protocol

log = logging.getLogger(__name__)

ADMIN_USER = "admin"


def _check_args(op: str, args: Any) -> tuple[str, str] | None:
    """invalid_args for missing, extra or mistyped arguments, else None: the
    same checker and kinds as every room op (rules/catalog.py holds the
    admin ops' arguments), and the one rule a kind cannot say alone."""
    try:
        clean = check_args(op, op_args(op), {} if args is None else args)
    except InvalidArgs as exc:
        return ("invalid_args", exc.message)
    if op == "import_room" and clean["part"] >= clean["parts"]:
        return ("invalid_args", "part must be below parts")
    return None


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(pairs)


def read_room_file(text: str, now: float) -> tuple[Any, dict[str, Any], bool]:
    """`transfer.from_document(transfer.loads(text), now)`, for a worker thread.
    The object hook is Python code, so the C parser returns to the
    interpreter at every object, and the interpreter hands the GIL back to
    the event loop every switch interval instead of once at the end of the
    whole file. A file that does not parse is parsed again by
    `transfer.loads`, which raises its own error."""
    try:
        doc = json.loads(text, object_pairs_hook=_pairs)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        doc = transfer.loads(text)  # raises BadRoomFile, saying why
    return transfer.from_document(doc, now)


def admin_args_error(op: str, args: Any) -> tuple[str, str] | None:
    """For room sessions sending an admin op: their args are checked before
    the role (docs/protocol.md, "Refusals": invalid_args, then forbidden)."""
    return _check_args(op, args)


class Admin:
    """Executes admin commands for admin sessions (and the CLI's --demo)."""

    def __init__(
        self,
        storage: Storage,
        rooms: Rooms,
        metrics: Metrics,
        tokens: RecentTokens,
        clock: Clock | None = None,
        token_source: Callable[[], str] = new_token,
        limits: Limits | None = None,
        room_command: Callable[..., Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.storage = storage
        self.rooms = rooms
        self.metrics = metrics
        self.tokens = tokens
        self.clock = clock or SystemClock()
        self.new_token = token_source
        self._lock = asyncio.Lock()
        self.limits = limits or Limits()
        self._upload: _Upload | None = None
        # Runs a room command as one of its users (Server.room_command).
        self.room_command = room_command

    async def execute(self, cmd_id: str, op: Any, args: Any) -> dict[str, Any]:
        """Run one admin command; returns the ack or error frame."""
        started = self.clock.monotonic()
        async with self._lock:
            frame = await self._execute(cmd_id, op, args)
        reply = frames.parse_server(frame)
        if isinstance(reply, frames.Ack):
            outcome = "dup" if reply.dup else "ok"
        else:
            outcome = reply.code if isinstance(reply, frames.Error) else "internal"
        self.metrics.command(op, outcome, self.clock.monotonic() - started)
        return frame

    async def _execute(self, cmd_id: str, op: Any, args: Any) -> dict[str, Any]:
        try:
            previous = await self.storage.admin_result(cmd_id)
        except Exception as exc:
            log.error("admin: cannot read the admin log: %s", exc)
            return protocol.error("internal", "the admin log could not be read", cmd_id)
        if previous is not None:
            result = dict(previous.result)
            remembered = self.tokens.recall(("", ADMIN_USER, cmd_id))
            if remembered is not None:
                result[remembered[0]] = remembered[1]
            return protocol.ack(cmd_id, result, dup=True)
        if not isinstance(op, str) or op not in rules.ADMIN_OPS:
            known = isinstance(op, str) and (
                op in rules.OPS or op in rules.USER_OPS or op in rules.LOG_OPS
            )
            if known:
                return protocol.error(
                    "forbidden", f"{op} is a room command; admin sessions have no room", cmd_id
                )
            return protocol.error("unknown_op", f"unknown op {op!r}", cmd_id)
        err = _check_args(op, args)
        if err is not None:
            return protocol.error(err[0], err[1], cmd_id)
        try:
            if op == "create_room":
                return await self._create_room(cmd_id, args)
            if op == "import_room":
                return await self._import_part(cmd_id, args)
            if op == "reissue_gm_link":
                return await self._reissue_gm_link(cmd_id, args)
            return await self._delete_room(cmd_id, args)
        except transfer.BadRoomFile as exc:
            return protocol.error("invalid_args", f"the room file is refused: {exc}", cmd_id)
        except rules.Refused as refused:
            return protocol.error(refused.code, refused.message, cmd_id)
        except Exception as exc:
            log.error("admin: %s failed: %s", op, exc)
            return protocol.error("internal", f"{op} could not be stored; retry", cmd_id)

    async def _create_room(self, cmd_id: str, args: dict[str, Any]) -> dict[str, Any]:
        room_id = args["room"]
        if await self.rooms.has(room_id):
            return protocol.error("conflict", f"room {room_id!r} already exists", cmd_id)
        room, gm_user = rules.new_room(room_id, args["name"], args.get("gm_name") or "GM")
        token = self.new_token()
        stored = {"room": room_id, "user": gm_user}
        record = AdminRecord(cmd_id, "create_room", args, stored, self.clock.time())
        await self.storage.create_room(room_id, room.to_dict(), gm_user, hash_token(token), record)
        self.rooms.created(room_id)
        self.tokens.remember(("", ADMIN_USER, cmd_id), "gm_token", token)
        log.info("room %s created (GM %s)", room_id, gm_user)
        return protocol.ack(cmd_id, {**stored, "gm_token": token})

    async def _delete_room(self, cmd_id: str, args: dict[str, Any]) -> dict[str, Any]:
        room_id = args["room"]
        if not await self.rooms.has(room_id):
            return protocol.error("not_found", f"no room {room_id!r}", cmd_id)
        record = AdminRecord(cmd_id, "delete_room", args, {"room": room_id}, self.clock.time())
        await self.rooms.delete(room_id, record)
        log.info("room %s deleted", room_id)
        return protocol.ack(cmd_id, {"room": room_id})

    async def _reissue_gm_link(self, cmd_id: str, args: dict[str, Any]) -> dict[str, Any]:
        """The GM's `rotate_token`, run in the room as that GM (so it is in
        the room's log, ends the GM's sessions, and its retry under the same
        id gets the same token back from the room's deduplication)."""
        room_id = args["room"]
        host = await self.rooms.get(room_id)
        if host is None or self.room_command is None:
            return protocol.error("not_found", f"no room {room_id!r} on this server", cmd_id)
        users = host.state.get("users", {})
        gms = [uid for uid, u in users.items() if u.get("role") == "gm"]
        gm = args.get("user") or (gms[0] if gms else None)
        if gm not in gms:
            return protocol.error("not_found", f"room {room_id!r} has no GM {gm!r}", cmd_id)
        frame = await self.room_command(
            room_id, gm, "rotate_token", {"user": gm}, cmd_id=f"admin-{cmd_id}"
        )
        reply = frames.parse_server(frame)
        if not isinstance(reply, frames.Ack):
            if isinstance(reply, frames.Error):
                return protocol.error(reply.code, reply.message, cmd_id)
            return protocol.error("internal", "", cmd_id)
        log.info("room %s: a new link for its GM %s", room_id, gm)
        token = reply.result["token"]
        return protocol.ack(cmd_id, {"room": room_id, "user": gm, "gm_token": token})

    # --- import_room ------------------------------------------------------

    async def _import_part(self, cmd_id: str, args: dict[str, Any]) -> dict[str, Any]:
        room, upload_id, part, parts = args["room"], args["upload"], args["part"], args["parts"]
        replace = bool(args.get("replace", False))
        now = self.clock.monotonic()
        up = self._upload
        if up is not None and up.id != upload_id:
            if now - up.active < self.limits.import_idle_seconds:
                return protocol.error(
                    "conflict", "another import is in progress; retry when it is done", cmd_id
                )
            self._upload = up = None  # abandoned: dropped
        if up is None:
            if part != 0:
                return protocol.error(
                    "invalid_args", f"upload {upload_id!r} is unknown: start at part 0", cmd_id
                )
            if await self.rooms.has(room) and not replace:
                return protocol.error(
                    "conflict",
                    f"room {room!r} already exists: to replace it, import again with replace "
                    "(vtt-sync admin import FILE --replace)",
                    cmd_id,
                )
            up = self._upload = _Upload(upload_id, room, parts, replace, now)
        if (room, parts, replace) != (up.room, up.parts, up.replace):
            return protocol.error(
                "invalid_args", "room, parts and replace must be the same in every part", cmd_id
            )
        if part < len(up.chunks):  # sent again (its ack was lost): same answer
            return protocol.ack(cmd_id, {"upload": upload_id, "received": part + 1})
        if part > len(up.chunks):
            return protocol.error(
                "invalid_args", f"part {part} out of order: part {len(up.chunks)} is next", cmd_id
            )
        up.size += len(args["data"])
        if up.size > self.limits.max_import_bytes:
            self._upload = None
            return protocol.error(
                "invalid_args",
                f"the room file is over {self.limits.max_import_bytes} bytes",
                cmd_id,
            )
        up.chunks.append(args["data"])
        up.active = now
        if len(up.chunks) < parts:
            return protocol.ack(cmd_id, {"upload": upload_id, "received": part + 1})
        self._upload = None
        return await self._import(cmd_id, up)

    async def _import(self, cmd_id: str, up: _Upload) -> dict[str, Any]:
        # Parsed and checked on a worker thread: a 60k-version file held the
        # event loop, and every room with it, for about a second. The switch
        # interval shortened meanwhile: the loop waits a millisecond, not
        # five, each time it wants the interpreter back (share.py).
        with OFF_LOOP_SWITCH:
            dump, state, with_hashes = await asyncio.to_thread(
                read_room_file, "".join(up.chunks), self.clock.time()
            )
        if dump.room != up.room:
            return protocol.error(
                "invalid_args", f"the file holds room {dump.room!r}, not {up.room!r}", cmd_id
            )
        issued: dict[str, str] = {}
        if not with_hashes:  # the file opens nothing: a new token for every user
            issued = {uid: self.new_token() for uid in sorted(state.get("users", {}))}
            dump = attrs.evolve(dump, tokens={uid: hash_token(t) for uid, t in issued.items()})
        stored = {"room": dump.room, "v": dump.head, "users": len(state.get("users", {}))}
        args = {"room": up.room, "upload": up.id, "parts": up.parts, "replace": up.replace}
        record = AdminRecord(cmd_id, "import_room", args, stored, self.clock.time())
        exists = await self.rooms.has(dump.room)
        if exists and not up.replace:
            return protocol.error(
                "conflict",
                f"room {dump.room!r} already exists: to replace it, import again with replace "
                "(vtt-sync admin import FILE --replace)",
                cmd_id,
            )

        async def store() -> None:
            with OFF_LOOP_SWITCH:  # the rows are prepared in a thread (storage)
                await self.storage.import_room(dump, record, replace=up.replace)

        try:
            if exists:
                await self.rooms.replace(dump.room, store)
            else:
                await store()
                self.rooms.created(dump.room)
        except TokenInUse as exc:
            return protocol.error("conflict", str(exc), cmd_id)
        log.info(
            "room %s imported at v%d (%d versions, tokens %s)%s",
            dump.room,
            dump.head,
            len(dump.versions),
            "kept" if with_hashes else "issued anew",
            ", replacing the old one" if exists else "",
            extra={"event": "room_imported", "room": dump.room, "v": dump.head},
        )
        result = dict(stored)
        if issued:
            result["tokens"] = issued
        return protocol.ack(cmd_id, result)


@attrs.define
class _Upload:
    """A room file arriving in parts (one at a time per server)."""

    id: str
    room: str
    parts: int
    replace: bool
    active: float  # monotonic time of its last part
    chunks: list[str] = attrs.Factory(list)
    size: int = 0
