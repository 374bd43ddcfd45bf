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

A room file is untrusted input: whoever wrote it chooses every byte, and
what it holds reaches every client of the room (states, patches, history)
and the room core (roles, undo's inverses). `from_document` checks it whole
before anything is stored: the format and its version, the room id, the
log's continuity; every version's fields (a known op, ids that are ids, and
each op and inverse against the state's schema, `rules.schema`: a place the
state has, a value of its type, never a `__proto__` path part); the
snapshot, and every state the log passes through, in both directions from
the snapshot (its ops checked against what they lead to, each state checked
where a version changed it), against that schema: types, ranges, roles (gm,
player or observer: never the server's admin), and derived fields (`mods`,
`pe_max`) recomputed, never trusted; that the snapshot plus the log after it
gives exactly `state`; that the snapshot and the state are valid rooms (the
rules' invariants); that undo marks point at undoable versions. A file that
fails is refused with the first reason.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
import re
from typing import Any

import attrs

import rules
from rules import schema
from rules.patch import apply_ops
from sync_server.clock import Clock, SystemClock
from sync_server.core.limits import MAX_CMD_ID_LENGTH, MAX_EVENT_KIND, ROOM_ID_PATTERN
from sync_server.core.views import backfill_views
from sync_server.storage import (
    PatchRow,
    RoomDump,
    StoredRoom,
    VersionRecord,
    replay,
)
from sync_server.version import __version__

FORMAT = "vtt-sync-room"
FORMAT_VERSION = 1


class BadRoomFile(ValueError):
    """A room file that cannot be imported; the message says why."""


def to_document(
    dump: RoomDump, with_token_hashes: bool = False, clock: Clock | None = None
) -> dict[str, Any]:
    """The export file of a room (`exported_at`: the clock's wall time)."""
    state = state_at_head(dump)
    users = []
    for uid, user in sorted(state.get("users", {}).items()):
        entry: dict[str, Any] = {"user": uid, "name": user.get("name"), "role": user.get("role")}
        if with_token_hashes and uid in dump.tokens:
            entry["token_hash"] = dump.tokens[uid].hex()
        users.append(entry)
    wall = (clock or SystemClock()).time()
    now = datetime.datetime.fromtimestamp(wall, datetime.UTC).isoformat(timespec="seconds")
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
    return type(v) is int or (type(v) is float and math.isfinite(v))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def loads(text: str) -> dict[str, Any]:
    try:
        # NaN and Infinity are not JSON: no client could read them back
        doc = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise BadRoomFile(f"not JSON: {exc}") from None
    _need(isinstance(doc, dict), "not a room file: the top level must be an object")
    return doc


def from_document(
    doc: dict[str, Any], now: float | None = None
) -> tuple[RoomDump, dict[str, Any], bool]:
    """(the room to store, its state at head, whether the file held token
    hashes). Raises BadRoomFile with the first problem found. `now` is the
    creation time of a room whose file has none (the caller's clock port;
    the system clock's if None)."""
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
    created = doc.get("created", SystemClock().time() if now is None else now)
    _need(_is_number(created), "created must be a number (seconds since 1970)")
    snapshot: Any = doc.get("snapshot")
    _need(isinstance(snapshot, dict), "snapshot must be an object")
    snap_v, snap_state = snapshot.get("v"), snapshot.get("state")
    _need(_is_int(snap_v) and 0 <= snap_v <= head, "snapshot.v must be a version 0..head")
    _need(isinstance(snap_state, dict), "snapshot.state must be an object")
    _need_state(snap_state, "snapshot.state")
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
    _check_before_snapshot(snap_state, versions[:snap_v])
    state = _check_after_snapshot(snap_state, versions[snap_v:])
    if "state" in doc:
        _need(doc["state"] == state, "state is not what the snapshot and the log make")
    _need(state.get("room") == room, f"the room's state names room {state.get('room')!r}")
    _need_state(state, "the room's state")
    _need_valid_room(snap_state, "the snapshot")
    _need_valid_room(state, "the room's state")
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


def _first(problems: list[str]) -> str:
    return "; ".join(problems[:3])


def _need_state(state: Any, where: str) -> None:
    problems = schema.state_problems(state)
    _need(not problems, f"{where} is not a valid state: {_first(problems)}")


def _need_valid_room(state: dict[str, Any], where: str) -> None:
    try:
        problems = rules.violations(rules.Room.from_dict(copy.deepcopy(state)))
    except Exception as exc:
        raise BadRoomFile(f"{where} is not a valid room: {exc}") from None
    _need(not problems, f"{where} breaks the rules' invariants: {problems}")


_ABSENT = object()


def _at(state: dict[str, Any], path: list[str]) -> Any:
    node: Any = state
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _ABSENT
        node = node[key]
    return node


def _apply(state: dict[str, Any], ops: list[Any], where: str) -> None:
    try:
        apply_ops(state, ops)
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise BadRoomFile(f"{where} do not apply: {exc!r}") from None


def _check_before_snapshot(snapshot: dict[str, Any], before: list[VersionRecord]) -> None:
    """The versions at or below the snapshot are not replayed, but `sync`
    serves their ops and undo applies their inverses: walk back from the
    snapshot, each version's ops must be what its state holds, and its
    inverse must lead to a valid state (checked where it changes it)."""
    state = copy.deepcopy(snapshot)
    for record in reversed(before):
        where = f"version {record.v}"
        for op in record.ops:
            want = _ABSENT if op[0] == "del" else op[2]
            _need(
                _at(state, op[1]) == want,
                f"{where}'s ops do not lead to the snapshot (at {'.'.join(op[1])})",
            )
        _apply(state, record.inverse, f"{where}'s inverse ops")
        problems = schema.changed_problems(state, record.inverse)
        _need(not problems, f"{where}'s inverse gives an invalid state: {_first(problems)}")


def _check_after_snapshot(snapshot: dict[str, Any], after: list[VersionRecord]) -> dict[str, Any]:
    """Replay the log after the snapshot (as `storage.replay` will), each
    state checked where the version changed it; returns the head state."""
    state = copy.deepcopy(snapshot)
    for record in after:
        where = f"version {record.v}"
        _apply(state, record.ops, f"{where}'s ops")
        problems = schema.changed_problems(state, record.ops)
        _need(not problems, f"{where} gives an invalid state: {_first(problems)}")
    return state


_KNOWN_OPS = frozenset(rules.OPS) | rules.LOG_OPS


def _read_version(room: str, v: int, item: Any) -> tuple[VersionRecord, bool]:
    where = f"versions[{v - 1}]"
    _need(isinstance(item, dict), f"{where} must be an object")
    _need(item.get("v") == v and _is_int(item.get("v")), f"{where}.v must be {v}")
    cmd_id = item.get("id")
    _need(
        cmd_id is None or schema.text(1, MAX_CMD_ID_LENGTH)(cmd_id) is None,
        f"{where}.id must be null or a string of 1 to {MAX_CMD_ID_LENGTH} "
        "characters, none a control character",
    )
    _need(schema.ident(item.get("user")) is None, f"{where}.user must be a user id")
    _need(
        isinstance(item.get("op"), str) and item["op"] in _KNOWN_OPS,
        f"{where}.op must be a room command ({str(item.get('op'))[:40]!r} is not one)",
    )
    for key in ("ops", "inverse", "events"):
        _need(isinstance(item.get(key), list), f"{where}.{key} must be a list")
    for key in ("ops", "inverse"):
        for i, op in enumerate(item[key]):
            problems = schema.op_problems(op)
            _need(not problems, f"{where}.{key}[{i}]: {_first(problems)}")
    for i, event in enumerate(item["events"]):
        _need(
            isinstance(event, dict) and schema.text(1, MAX_EVENT_KIND)(event.get("kind")) is None,
            f"{where}.events[{i}] must be an object with a kind",
        )
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
        _need(
            isinstance(uid, str) and uid in known,
            f"user {str(uid)[:70]!r} is not a user of the room's state",
        )
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
