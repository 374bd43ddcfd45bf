"""Admin commands: create_room and delete_room (PROTOCOL.md, Operations, role A).

They touch no room state, so they are the server's own (the rules engine only
builds a new room's initial state with `new_room`). One at a time, in
arrival order, under one lock. Their acks carry `result` and no `v`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import rules
from sync_server import protocol
from sync_server.auth import RecentTokens, hash_token, new_token
from sync_server.clock import Clock, SystemClock
from sync_server.limits import MAX_ROOM_NAME
from sync_server.metrics import Metrics
from sync_server.rooms import Rooms, valid_room_id
from sync_server.storage import AdminRecord, Storage

log = logging.getLogger(__name__)

ADMIN_USER = "admin"

# Argument specs: name -> (required, checker).
_ARGS: dict[str, dict[str, tuple[bool, str]]] = {
    "create_room": {"room": (True, "room"), "name": (True, "name"), "gm_name": (False, "name")},
    "delete_room": {"room": (True, "room")},
}


def _check_args(op: str, args: Any) -> tuple[str, str] | None:
    """invalid_args for missing, extra or mistyped arguments, else None."""
    if args is None:
        args = {}
    if type(args) is not dict:
        return ("invalid_args", "args must be a map")
    spec = _ARGS[op]
    extra = sorted(set(args) - set(spec))
    if extra:
        return ("invalid_args", f"unknown argument(s) for {op}: {', '.join(extra)}")
    for key, (required, kind) in spec.items():
        if key not in args:
            if required:
                return ("invalid_args", f"{op} needs {key!r}")
            continue
        value = args[key]
        if kind == "room" and not valid_room_id(value):
            return ("invalid_args", f"{key} must be 1-64 letters, digits, '_', '-' or '.'")
        if kind == "name" and not (
            isinstance(value, str) and len(value.strip()) > 0 and len(value) <= MAX_ROOM_NAME
        ):
            return ("invalid_args", f"{key} must be a non-empty string of at most {MAX_ROOM_NAME}")
    return None


def admin_args_error(op: str, args: Any) -> tuple[str, str] | None:
    """For room sessions sending an admin op: their args are checked before
    the role (PROTOCOL.md's order: invalid_args, then forbidden)."""
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
    ) -> None:
        self.storage = storage
        self.rooms = rooms
        self.metrics = metrics
        self.tokens = tokens
        self.clock = clock or SystemClock()
        self.new_token = token_source
        self._lock = asyncio.Lock()

    async def execute(self, cmd_id: str, op: Any, args: Any) -> dict[str, Any]:
        """Run one admin command; returns the ack or error frame."""
        started = self.clock.monotonic()
        async with self._lock:
            frame = await self._execute(cmd_id, op, args)
        outcome = "dup" if frame.get("dup") else ("ok" if frame["t"] == "ack" else frame["code"])
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
            return await self._delete_room(cmd_id, args)
        except rules.Refused as refused:
            return protocol.error(refused.code, refused.message, cmd_id)
        except Exception as exc:
            log.error("admin: %s failed: %s", op, exc)
            return protocol.error("internal", f"{op} could not be stored; retry", cmd_id)

    async def _create_room(self, cmd_id: str, args: dict[str, Any]) -> dict[str, Any]:
        room_id = args["room"]
        if self.rooms.exists(room_id):
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
        if not self.rooms.exists(room_id):
            return protocol.error("not_found", f"no room {room_id!r}", cmd_id)
        record = AdminRecord(cmd_id, "delete_room", args, {"room": room_id}, self.clock.time())
        await self.rooms.delete(room_id, record)
        log.info("room %s deleted", room_id)
        return protocol.ack(cmd_id, {"room": room_id})
