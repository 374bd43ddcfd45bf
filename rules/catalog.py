"""The reference of every operation and event kind, as data.

Each op of the table is declared once, in the rules module that applies it
(`rules.op.Op`: its arguments, role, events and words); the ops the server
handles itself (undo and the admin ops) are declared in rules/server_ops.py,
and the event kinds in rules/events.py. This module reads them together:
`OPS` (each op's entry), `all_ops`, and what an op accepts, who may send it
and every way it is refused. Together they make docs/operations.md
(`python3 -m scripts.gen_operations`), `vtt-sync client ops` / `cmd OP
--help` and the API documents. Tests fail when an argument has no meaning,
or an event kind the engine emits has no entry, so the reference cannot fall
behind the code.
"""

from __future__ import annotations

import json

from rules.engine import ADMIN_OPS, LOG_OPS
from rules.engine import OPS as TABLE
from rules.events import COMMON_EVENT_FIELDS, EVENTS, EXAMPLE_NAMES, TIMED_EVENTS, EventDoc
from rules.op import OWNER_OR_GM, UNTEND, G, OpDoc
from rules.server_ops import (
    IMPORT_CHUNK_CHARS,
    MAX_IMPORT_BYTES,
    MAX_IMPORT_PARTS,
    MAX_ROOM_ID,
    MAX_ROOM_NAME,
    MAX_UPLOAD_ID,
    ROOM_ID,
    ROOM_ID_PATTERN,
    SERVER_OPS,
    valid_room_id,
)
from rules.validate import Arg, Kind

# Read here with the rest of the reference (the server's limits, the API
# documents, the CLI): their homes are rules/events.py and rules/server_ops.py.
__all__ = [
    "COMMON_EVENT_FIELDS",
    "ERROR_ORDER",
    "EVENTS",
    "EXAMPLE_NAMES",
    "IMPORT_CHUNK_CHARS",
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_PARTS",
    "MAX_ROOM_ID",
    "MAX_ROOM_NAME",
    "MAX_UPLOAD_ID",
    "OPS",
    "ROLE_SHORT",
    "ROLE_TEXT",
    "ROOM_ID",
    "ROOM_ID_PATTERN",
    "TIMED_EVENTS",
    "EventDoc",
    "OpDoc",
    "all_ops",
    "describe_arg",
    "op_args",
    "op_errors",
    "op_role",
    "valid_room_id",
]

# Every op's entry: the table's, from their declarations, then the server's own.
OPS: dict[str, OpDoc] = {name: op.entry() for name, op in TABLE.items()} | SERVER_OPS


# --- reading the table and the catalog together (docs, CLI help) ----------------

ROLE_TEXT = {
    G: "the GM",
    OWNER_OR_GM: "the GM, or the player who owns `char`",
    UNTEND: "the GM, or the player who owns the patient or its healer",
    "A": "an admin session (the server's admin token, no room)",
}
ROLE_SHORT = {G: "GM", OWNER_OR_GM: "GM, owner", UNTEND: "GM, owners", "A": "admin"}


def all_ops() -> list[str]:
    """The table's ops in their order, then the server's own (room, then admin)."""
    return [*TABLE, *sorted(LOG_OPS - set(TABLE)), *sorted(ADMIN_OPS - set(TABLE))]


def op_args(name: str) -> dict[str, Arg]:
    spec = TABLE.get(name)
    if spec is not None:
        return spec.args
    doc = OPS[name]
    if doc.args is None:
        raise KeyError(f"{name}: an op the server handles needs `args` in rules/server_ops.py")
    return doc.args


def op_role(name: str) -> str:
    spec = TABLE.get(name)
    role = spec.role if spec is not None else OPS[name].role
    if role not in ROLE_TEXT:
        raise KeyError(f"{name}: role {role!r} has no description in rules/catalog.py")
    return role


# docs/protocol.md's order of refusal codes (the server's wire/protocol.py holds
# the same tuple; tests/server/test_apidoc.py compares).
ERROR_ORDER = (
    "rate_limited", "bad_frame", "unknown_op", "invalid_args", "not_found", "forbidden",
    "conflict", "rule", "internal",
)  # fmt: skip


def op_errors(name: str) -> list[tuple[str, str]]:
    """Every refusal of an op, (code, when), in the order they are checked:
    those the op table implies, then the catalog's own."""
    spec = TABLE.get(name)
    args = op_args(name)
    role = op_role(name)
    out: list[tuple[str, str]] = []
    if args:
        out.append(("invalid_args", "an argument is missing, unknown, mistyped or out of range"))
    else:
        out.append(("invalid_args", "any argument is given"))
    if spec is not None and spec.chars:
        names = ", ".join(f"`{c}`" for c in spec.chars)
        out.append(("not_found", f"{names} names no character of the room"))
    if spec is not None and spec.users:
        names = ", ".join(f"`{u.split('.')[-1]}`" for u in spec.users)
        out.append(("not_found", f"{names} names no user of the room"))
    if role == "A":
        out.append(("forbidden", "sent in a room session"))
    else:
        who = ROLE_TEXT[role]
        out.append(
            ("forbidden", f"the sender is not {who} (an observer or admin session never is)")
        )
    if spec is not None and spec.chars and not spec.on_dead:
        out.append(("rule", "a character it names is dead (D6)"))
    out.extend(OPS[name].errors)
    return sorted(out, key=lambda e: ERROR_ORDER.index(e[0]))


def describe_arg(arg: Arg) -> tuple[str, str]:
    """(required / optional with its default, the values it accepts)."""
    kind = arg.check
    accepts = kind.describe() if isinstance(kind, Kind) else "see the op's text"
    if arg.required:
        need = "required"
    elif arg.default is None:
        need = "optional"
    else:
        need = f"optional, default {json.dumps(arg.default)}"
    return need, accepts
