"""The room file: a whole room as one JSON document, to back it up or move it.

`vtt-sync admin export ROOM > room.json` writes one; `vtt-sync admin import
room.json` reads it into a server, which then serves the room as it was:
same state, same version, the whole log (so `since`, history, undo and the
retry of an old command id all work as before, for every viewer: what
players and observers get of each version is rebuilt from the log on
import, not read from the file).

    {
      "format": "vtt-sync-room", "format_version": 1,
      "exported_at": "2026-05-10T12:00:00Z", "server_version": "0.2.0",
      "room": "thursday", "created": 1715342400.0, "head": 57,
      "state": {...},                        # the room at `head`
      "snapshot": {"v": 50, "state": {...}}, # the latest snapshot: replay starts there
      "versions": [                          # the whole log, 1..head
        {"v": 1, "id": "c-1", "user": "u1", "op": "add_user", "args": {...},
         "ops": [...], "inverse": [...], "events": [...], "result": {...},
         "undoable": false, "undone": false, "undoes": null, "ts": 1715342401.5}, ...],
      "users": [{"user": "u1", "name": "Maya", "role": "gm",
                 "token_hash": "9f86d0..."}], # token_hash only with --with-token-hashes
      "token_hashes": false
    }

Without token hashes (the default), the file opens nothing: the importing
server issues a new token for every user and returns them once (the CLI
prints their links). With them (`--with-token-hashes`), every old link
keeps working on the new server; keep such a file as you would the database.

`from_document` checks everything before anything is stored: the format
and its version, the room id, the log's continuity, every field's type,
that the snapshot plus the log after it gives exactly `state`, that the
state is a valid room (the rules' invariants), that undo marks point at
undoable versions. A file that fails is refused with the first reason.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
import time
from typing import Any

import attrs

import rules
from sync_server import __version__
from sync_server.core.limits import ROOM_ID_PATTERN
from sync_server.storage import (
    PatchRow,
    RoomDump,
    StoredRoom,
    VersionRecord,
    replay,
)
from sync_server.storage.base import backfill_views

FORMAT = "vtt-sync-room"
FORMAT_VERSION = 1


class BadRoomFile(ValueError):
    """A room file that cannot be imported; the message says why."""


def to_document(dump: RoomDump, with_token_hashes: bool = False) -> dict[str, Any]:
    """The export file of a room."""
    state = state_at_head(dump)
    users = []
    for uid, user in sorted(state.get("users", {}).items()):
        entry: dict[str, Any] = {"user": uid, "name": user.get("name"), "role": user.get("role")}
        if with_token_hashes and uid in dump.tokens:
            entry["token_hash"] = dump.tokens[uid].hex()
        users.append(entry)
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported_at": now.replace("+00:00", "Z"),
        "server_version": __version__,
        "room": dump.room,
        "created": dump.created,
        "head": dump.head,
        "state": state,
        "snapshot": {"v": dump.snapshot_v, "state": dump.snapshot},
        "versions": [_version(r, r.v in dump.undone) for r in dump.versions],
        "users": users,
        "token_hashes": with_token_hashes,
    }


def dumps(document: dict[str, Any]) -> str:
    """The file's text: ASCII JSON (any character escaped), so that it can be
    cut anywhere into parts for `import_room`."""
    return json.dumps(document, ensure_ascii=True, separators=(",", ":"))


def _version(r: VersionRecord, undone: bool) -> dict[str, Any]:
    return {
        "v": r.v,
        "id": r.cmd_id,
        "user": r.user,
        "op": r.op,
        "args": r.args,
        "ops": r.ops,
        "inverse": r.inverse,
        "events": r.events,
        "result": r.result,
        "undoable": r.undoable,
        "undone": undone,
        "undoes": r.undoes,
        "ts": r.ts,
    }


def state_at_head(dump: RoomDump) -> dict[str, Any]:
    """The room's state at its head: the snapshot plus the log after it."""
    rows = [
        PatchRow(r.v, r.cmd_id, r.user, r.ops, r.events)
        for r in dump.versions
        if r.v > dump.snapshot_v
    ]
    stored = StoredRoom(dump.room, dump.snapshot_v, copy.deepcopy(dump.snapshot), rows, [])
    return replay(stored, 0).state


# --- reading a file ---------------------------------------------------------------


def _need(cond: bool, message: str) -> None:
    if not cond:
        raise BadRoomFile(message)


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def loads(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise BadRoomFile(f"not JSON: {exc}") from None
    _need(isinstance(doc, dict), "not a room file: the top level must be an object")
    return doc


def from_document(doc: dict[str, Any]) -> tuple[RoomDump, dict[str, Any], bool]:
    """(the room to store, its state at head, whether the file held token
    hashes). Raises BadRoomFile with the first problem found."""
    _need(doc.get("format") == FORMAT, f"not a room file (format must be {FORMAT!r})")
    # Read as Any: each value is checked by `_need` before it is used.
    version: Any = doc.get("format_version")
    _need(_is_int(version), "format_version must be an integer")
    _need(
        version <= FORMAT_VERSION,
        f"format version {version} is newer than this server's ({FORMAT_VERSION}): "
        "import it with a newer vtt-sync",
    )
    room: Any = doc.get("room")
    _need(
        isinstance(room, str) and re.fullmatch(ROOM_ID_PATTERN, room) is not None,
        "room must be a room id (1-64 letters, digits, '_', '-' or '.')",
    )
    head: Any = doc.get("head")
    _need(_is_int(head) and head >= 0, "head must be an integer >= 0")
    created = doc.get("created", time.time())
    _need(_is_number(created), "created must be a number (seconds since 1970)")
    snapshot: Any = doc.get("snapshot")
    _need(isinstance(snapshot, dict), "snapshot must be an object")
    snap_v, snap_state = snapshot.get("v"), snapshot.get("state")
    _need(_is_int(snap_v) and 0 <= snap_v <= head, "snapshot.v must be a version 0..head")
    _need(isinstance(snap_state, dict), "snapshot.state must be an object")
    raw: Any = doc.get("versions")
    _need(isinstance(raw, list), "versions must be a list")
    _need(len(raw) == head, f"versions must hold the whole log, 1..{head} ({len(raw)} found)")
    versions, undone = [], set()
    for i, item in enumerate(raw, start=1):
        record, was_undone = _read_version(room, i, item)
        versions.append(record)
        if was_undone:
            undone.add(i)
    for record in versions:
        if record.undoes is not None:
            target = record.undoes
            _need(
                1 <= target < record.v and versions[target - 1].undoable and target in undone,
                f"version {record.v} undoes {target}, which is not an undone undoable version",
            )
    _need(
        all(versions[v - 1].undoable for v in undone),
        "only undoable versions can be marked undone",
    )
    with_hashes = doc.get("token_hashes", False)
    _need(type(with_hashes) is bool, "token_hashes must be true or false")
    dump = RoomDump(
        room,
        head,
        float(created),
        snap_v,
        copy.deepcopy(snap_state),
        versions,
        frozenset(undone),
        {},
    )
    try:
        state = state_at_head(dump)
    except Exception as exc:  # StorageError (a hole), or ops that do not apply
        raise BadRoomFile(f"the log does not apply to the snapshot: {exc}") from None
    if "state" in doc:
        _need(doc["state"] == state, "state is not what the snapshot and the log make")
    _need(state.get("room") == room, f"the room's state names room {state.get('room')!r}")
    try:
        problems = rules.violations(rules.Room.from_dict(copy.deepcopy(state)))
    except Exception as exc:
        raise BadRoomFile(f"the room's state is not a valid room: {exc}") from None
    _need(not problems, f"the room's state breaks the rules' invariants: {problems}")
    tokens = _read_users(doc.get("users", []), state, with_hashes)
    # What each viewer gets of each version is not in the file: it follows
    # from the log (and from this server's rules of views), so it is rebuilt
    # here rather than trusted, and resumes after the import are views.
    try:
        views = backfill_views(
            snap_v, dump.snapshot, ((r.v, r.ops, r.inverse, r.events) for r in versions)
        )
    except Exception as exc:  # inverse ops that do not apply
        raise BadRoomFile(f"the log's inverse ops do not apply to the snapshot: {exc}") from None
    versions = [attrs.evolve(r, views=views[r.v]) for r in versions]
    return (
        # state_at_head replayed onto a copy: the snapshot is still the file's
        attrs.evolve(dump, versions=versions, tokens=tokens),
        state,
        with_hashes,
    )


def _read_version(room: str, v: int, item: Any) -> tuple[VersionRecord, bool]:
    where = f"versions[{v - 1}]"
    _need(isinstance(item, dict), f"{where} must be an object")
    _need(item.get("v") == v and _is_int(item.get("v")), f"{where}.v must be {v}")
    cmd_id = item.get("id")
    _need(cmd_id is None or isinstance(cmd_id, str), f"{where}.id must be a string or null")
    for key in ("user", "op"):
        _need(isinstance(item.get(key), str), f"{where}.{key} must be a string")
    for key in ("ops", "inverse", "events"):
        _need(isinstance(item.get(key), list), f"{where}.{key} must be a list")
    _need(all(isinstance(e, dict) for e in item["events"]), f"{where}.events must be objects")
    _need(isinstance(item.get("result", {}), dict), f"{where}.result must be an object")
    for key in ("undoable", "undone"):
        _need(type(item.get(key)) is bool, f"{where}.{key} must be true or false")
    undoes = item.get("undoes")
    _need(undoes is None or _is_int(undoes), f"{where}.undoes must be a version or null")
    _need(_is_number(item.get("ts")), f"{where}.ts must be a number")
    record = VersionRecord(
        room=room,
        v=v,
        cmd_id=cmd_id,
        user=item["user"],
        op=item["op"],
        args=item.get("args"),
        ops=item["ops"],
        inverse=item["inverse"],
        events=item["events"],
        result=item.get("result", {}),
        undoable=item["undoable"],
        undoes=undoes,
        ts=float(item["ts"]),
    )
    return record, item["undone"]


def _read_users(raw: Any, state: dict[str, Any], with_hashes: bool) -> dict[str, bytes]:
    _need(isinstance(raw, list), "users must be a list")
    known = state.get("users", {})
    tokens: dict[str, bytes] = {}
    for entry in raw:
        _need(isinstance(entry, dict), "each user must be an object")
        uid = entry.get("user")
        _need(uid in known, f"user {uid!r} is not a user of the room's state")
        if not with_hashes:
            continue
        h = entry.get("token_hash")
        if h is None:
            continue
        try:
            digest = bytes.fromhex(h) if isinstance(h, str) else b""
        except ValueError:
            digest = b""
        _need(len(digest) == 32, f"user {uid}: token_hash must be 64 hex digits (SHA-256)")
        tokens[uid] = digest
    _need(len(set(tokens.values())) == len(tokens), "two users share a token hash")
    return tokens
