"""The API described for tools: OpenAPI 3.1 for the HTTP door, AsyncAPI 3.0
for the WebSocket protocol, both generated, never written by hand.

The OpenAPI document's command body is read from the op table and the
catalog (rules/engine.py, rules/catalog.py): every op a room accepts, each
argument's JSON Schema from the very `Kind` that checks it (types, ranges,
lengths, choices, defaults, nullability), who may send it and every refusal
it can give. The AsyncAPI document's messages are read from the frame
builders of wire/protocol.py (their fields, from frames they build), with the
subprotocols, error codes and close codes of the same module.

The server answers both at /api/v1/openapi.json and /api/v1/asyncapi.json;
`python3 -m scripts.gen_apidocs` writes them to docs/ and a test fails when
those copies are out of date. Pure: no I/O, and the same bytes every time.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from rules.catalog import EVENTS, OPS, all_ops, describe_arg, op_args, op_errors, op_role
from rules.catalog import ROLE_TEXT as ROLES
from rules.engine import ADMIN_OPS
from rules.validate import CORRECTABLE, CORRECTIONS, MAX_ID, Arg, Kind
from sync_server.core.limits import (
    HISTORY_DEFAULT_LIMIT,
    MAX_CMD_ID_LENGTH,
    MAX_HTTP_BODY_BYTES,
    RECENT_PATCHES_IN_MEMORY,
    ROOM_ID_PATTERN,
)
from sync_server.version import __version__
from sync_server.wire import protocol
from sync_server.wire.frames import frame_type

OPENAPI_VERSION = "3.1.0"
# Text arguments refuse control characters (rules/validate.py).
NO_CONTROL_CHARACTERS = "^[^\\u0000-\\u001f]*$"
ASYNCAPI_VERSION = "3.0.0"
TITLE = "vtt-sync"


# --- argument kinds as JSON Schema -------------------------------------------


def kind_schema(kind: Kind) -> dict[str, Any]:
    """The JSON Schema of what `kind` accepts (the checker stays the judge;
    this says the same in the schema's words)."""
    t = kind.type
    schema: dict[str, Any]
    if t == "integer":
        schema = {"type": "integer", "minimum": kind.lo, "maximum": kind.hi}
    elif t in ("text", "id"):
        schema = {"type": "string", "minLength": kind.lo, "maxLength": kind.hi,
                  "pattern": NO_CONTROL_CHARACTERS}  # fmt: skip
    elif t == "boolean":
        schema = {"type": "boolean"}
    elif t == "choice":
        schema = {"type": "string", "enum": list(kind.options)}
    elif t == "list":
        assert kind.item is not None
        schema = {"type": "array", "minItems": kind.lo, "maxItems": kind.hi,
                  "items": kind_schema(kind.item)}  # fmt: skip
    elif t == "map" and kind is CORRECTIONS:
        schema = {
            "type": "object",
            "properties": {k: kind_schema(v) for k, v in CORRECTABLE.items()},
            "additionalProperties": False,
            "minProperties": 1,
        }
    elif t == "map" and not kind.options:  # keyed by character ids (validate._by_char)
        assert kind.item is not None
        schema = {
            "type": "object",
            "additionalProperties": kind_schema(kind.item),
            "propertyNames": {
                "minLength": 1,
                "maxLength": MAX_ID,
                "pattern": NO_CONTROL_CHARACTERS,
            },
        }
        if kind.hi is not None:
            schema["maxProperties"] = kind.hi
    elif t == "map":
        assert kind.item is not None
        schema = {
            "type": "object",
            "properties": {k: kind_schema(kind.item) for k in kind.options},
            "additionalProperties": False,
        }
        if kind.note == "all six":
            schema["required"] = list(kind.options)
    else:
        schema = {}
    schema["description"] = kind.describe()
    if t == "integer":  # JSON Schema calls 3.0 an integer; the checkers do not
        schema["description"] += ", without a decimal point"

    if kind.nullable:
        return {"anyOf": [schema, {"type": "null"}], "description": schema.pop("description")}
    return schema


def arg_schema(arg: Arg, meaning: str) -> dict[str, Any]:
    kind = arg.check
    schema = kind_schema(kind) if isinstance(kind, Kind) else {"description": "see the op"}
    need, accepts = describe_arg(arg)
    if isinstance(kind, Kind) and kind.type == "integer":
        accepts += ", without a decimal point"
    schema = {**schema, "description": f"{meaning} ({need}; {accepts})"}
    if not arg.required:
        if arg.default is not None:
            schema["default"] = arg.default
        if "anyOf" not in schema:  # an optional argument may be sent as null
            notes = {k: schema.pop(k) for k in ("description", "default") if k in schema}
            schema = {"anyOf": [schema, {"type": "null"}], **notes}
    return schema


def room_ops() -> list[str]:
    """The ops a room session (and the HTTP door) may send."""
    return [op for op in all_ops() if op not in ADMIN_OPS]


def command_schema(op: str) -> dict[str, Any]:
    doc = OPS[op]
    args = op_args(op)
    properties = {name: arg_schema(arg, doc.meaning[name]) for name, arg in args.items()}
    required = [name for name, arg in args.items() if arg.required]
    args_schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        args_schema["required"] = required
    errors = op_errors(op)
    body: dict[str, Any] = {
        "title": op,
        "description": (
            f"{doc.summary[0].upper()}{doc.summary[1:]}. Who: {ROLES[op_role(op)]}. "
            f"Result: {doc.result}. Refused with: "
            + "; ".join(f"{code} ({when})" for code, when in errors)
        ),
        "type": "object",
        "properties": {
            "op": {"const": op},
            "args": args_schema,
            "expect": {
                "type": "integer",
                "minimum": 0,
                "description": "refuse with conflict unless the room is at this version",
            },
        },
        "required": ["op", "args"] if required else ["op"],
        "examples": [{"op": op, "args": doc.example}],
        "x-role": op_role(op),
        "x-undoable": doc.undoable,
        "x-errors": [{"code": code, "when": when} for code, when in errors],
        "x-events": list(dict.fromkeys(doc.events)),
    }
    return body


# --- the OpenAPI document ---------------------------------------------------

ERROR_CODES = [*protocol.ERROR_ORDER, protocol.UNAUTHENTICATED]

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "description": "The protocol's error frame; `code` says what went wrong.",
        "properties": {
            "t": {"const": "error"},
            "code": {"type": "string", "enum": ERROR_CODES},
            "message": {"type": "string"},
            "id": {"type": "string"},
        },
        "required": ["t", "code", "message"],
    },
    "Event": {
        "type": "object",
        "description": "One rule event, for the table's log; kinds in docs/operations.md.",
        "properties": {"kind": {"type": "string", "enum": list(EVENTS)}},
        "required": ["kind"],
    },
    "Patch": {
        "type": "object",
        "description": "One version: the ops that turn the previous state (of this viewer's "
        "view) into this one, and its events.",
        "properties": {
            "t": {"const": "patch"},
            "v": {"type": "integer", "minimum": 1},
            "ops": {"type": "array", "items": {"type": "array"}},
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/Event"}},
            "by": {"type": "string"},
            "id": {"type": ["string", "null"]},
        },
        "required": ["t", "v", "ops", "events", "by", "id"],
    },
    "Ack": {
        "type": "object",
        "description": "The command was applied (or, with `dup`, had been: the first "
        "reply's version and result). `patch`: the version as the sender sees it.",
        "properties": {
            "t": {"const": "ack"},
            "id": {"type": "string"},
            "v": {"type": "integer", "minimum": 1},
            "result": {"type": "object"},
            "dup": {"type": "boolean"},
            "patch": {"$ref": "#/components/schemas/Patch"},
        },
        "required": ["t", "id", "v", "result"],
    },
    "RoomView": {
        "type": "object",
        "description": "The room as the caller may see it (docs/views.md), with what the "
        "caller may do where the server provides it.",
        "properties": {
            "room": {"type": "string"},
            "user": {"type": "string"},
            "role": {"type": "string", "enum": ["gm", "player", "observer"]},
            "v": {"type": "integer", "minimum": 0},
            "state": {"type": "object"},
        },
        "required": ["room", "user", "role", "v", "state"],
    },
    "History": {
        "type": "object",
        "description": "The events of the room's recent versions (oldest first) as the "
        "caller may see them; clients render them as sentences (docs/http.md).",
        "properties": {
            "room": {"type": "string"},
            "v": {"type": "integer", "minimum": 0},
            "history": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "v": {"type": "integer", "minimum": 1},
                        "by": {"type": "string"},
                        "events": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Event"},
                        },
                    },
                    "required": ["v", "by", "events"],
                },
            },
        },
        "required": ["room", "v", "history"],
    },
}

_ERRORS_BY_STATUS = {
    "307": "Cluster mode: another node serves the room (`Location`); send it there.",
    "400": "bad_frame, unknown_op or invalid_args: the request or its arguments are wrong.",
    "401": "unauthenticated: no token, or not a token of this room.",
    "403": "forbidden: the caller's role may not do this, or the page's origin is refused.",
    "404": "not_found: no such room, endpoint or named character/user.",
    "405": "This method is not allowed here (`Allow`).",
    "409": "conflict (`expect` or the room's state) or rule (the rules refuse it now).",
    "413": "The body is over the bound of a command (its bytes, or the pieces it came in).",
    "422": "conflict: this Idempotency-Key was used for another command; a new command "
    "needs a new key (the same command under the same key gets its first answer).",
    "429": "rate_limited: the user's allowance (shared with their WebSocket sessions) "
    "or the address's (too many refused requests) is spent; retry after `Retry-After` "
    "seconds.",
    "500": "internal: the server could not do it; retry.",
}


def _error(status: str) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": _ERRORS_BY_STATUS[status],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    if status == "429":
        answer["headers"] = {
            "Retry-After": {"schema": {"type": "string"}, "description": "seconds"}
        }
    if status == "405":
        answer["headers"] = {"Allow": {"schema": {"type": "string"}}}
    if status == "307":  # the WebSocket's redirect frame
        redirect = {"type": "object", "properties": {"t": {"const": "redirect"},
                    "url": {"type": "string"}}, "required": ["t", "url"]}  # fmt: skip
        answer["content"] = {"application/json": {"schema": redirect}}
        answer["headers"] = {"Location": {"schema": {"type": "string"}}}
    return answer


def _errors(*statuses: str) -> dict[str, Any]:
    return {s: _error(s) for s in statuses}


ROOM_PARAM = {
    "name": "room",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": f"^{ROOM_ID_PATTERN}$"},
    "description": "the room's id",
}

ROOM_ERRORS = ("307", "401", "403", "404", "405", "429", "500")


def _document(operation_id: str, summary: str) -> dict[str, Any]:
    """The path of a document the server describes itself with (no token)."""
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "security": [],
            "responses": {
                "200": {
                    "description": summary,
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                # 429: every request is first counted against its address's
                # allowance of refused ones (api.py, `Attempt`), these too.
                **_errors("403", "405", "429"),
            },
        }
    }


def openapi() -> dict[str, Any]:
    ops = room_ops()
    schemas = dict(_SCHEMAS)
    for op in ops:
        schemas[f"Command_{op}"] = command_schema(op)
    schemas["Command"] = {
        "description": "One command: an op of the room and its arguments.",
        "oneOf": [{"$ref": f"#/components/schemas/Command_{op}"} for op in ops],
        "discriminator": {
            "propertyName": "op",
            "mapping": {op: f"#/components/schemas/Command_{op}" for op in ops},
        },
    }
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": f"{TITLE} HTTP API",
            "version": __version__,
            "description": (
                "Commands over HTTP and a room's patches as Server-Sent Events: the same "
                "rooms, tokens, roles, views, limits, ids and replies as the WebSocket "
                "protocol (its AsyncAPI document is at /api/v1/asyncapi.json). "
                "docs/http.md has examples."
            ),
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        # Relative to where this document is served (/api/v1/openapi.json):
        # the server's root, under whatever sub-path a proxy puts it.
        "servers": [{"url": "../..", "description": "this server (the WebSocket's port)"}],
        "security": [{"bearer": []}],
        "paths": {
            "/api/v1/rooms/{room}/commands": {
                "parameters": [ROOM_PARAM],
                "post": {
                    "operationId": "sendCommand",
                    "summary": "Send a command (the reply is its ack or error)",
                    "parameters": [
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "required": False,
                            "schema": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": MAX_CMD_ID_LENGTH,
                            },
                            "description": "the command's id: a retry with the same key "
                            "and the same command is answered with the first reply and "
                            "applies nothing again; the same key with another command is "
                            "422; an empty one is 400 (leave the header out for a fresh id)",
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "description": f"at most {MAX_HTTP_BODY_BYTES} bytes",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Command"}}
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "applied (or a retry of an applied command)",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Ack"}}
                            },
                        },
                        **_errors("400", "409", "413", "422", *ROOM_ERRORS),
                    },
                },
            },
            "/api/v1/rooms/{room}": {
                "parameters": [ROOM_PARAM],
                "get": {
                    "operationId": "getRoom",
                    "summary": "The caller's view of the room, its version, user and role",
                    "responses": {
                        "200": {
                            "description": "the view",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/RoomView"}
                                }
                            },
                        },
                        **_errors(*ROOM_ERRORS),
                    },
                },
            },
            "/api/v1/rooms/{room}/history": {
                "parameters": [ROOM_PARAM],
                "get": {
                    "operationId": "getHistory",
                    "summary": "The events of the room's recent versions",
                    "parameters": [
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {
                                "type": "integer",
                                "minimum": 1,
                                "maximum": RECENT_PATCHES_IN_MEMORY,
                                "default": HISTORY_DEFAULT_LIMIT,
                            },
                            "description": "how many versions with events, the latest ones",
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "the history",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/History"}
                                }
                            },
                        },
                        **_errors("400", *ROOM_ERRORS),
                    },
                },
            },
            "/api/v1/rooms/{room}/events": {
                "parameters": [ROOM_PARAM],
                "get": {
                    "operationId": "streamEvents",
                    "summary": "The caller's patches as Server-Sent Events",
                    "description": (
                        "`event: snapshot` (the caller's view: `v`, `state`, `room`, `user`, "
                        "`role`) first, unless `Last-Event-ID` resumes; then `event: patch`, "
                        "one per version, `id` the version, `data` the patch frame as the "
                        "WebSocket carries it; `event: close` (a WebSocket close code and "
                        "reason) when the server ends it. Comment lines keep it alive."
                    ),
                    "parameters": [
                        {
                            "name": "Last-Event-ID",
                            "in": "header",
                            "required": False,
                            "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"},
                            "description": "resume after this version (as `since`)",
                        },
                        {
                            "name": "since",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 0},
                            "description": "resume after this version (for clients that "
                            "cannot set Last-Event-ID)",
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": "the stream",
                            "content": {"text/event-stream": {"schema": {"type": "string"}}},
                        },
                        **_errors("400", *ROOM_ERRORS),
                    },
                },
            },
            "/api/v1/openapi.json": _document("getOpenApi", "This document (OpenAPI 3.1)"),
            "/api/v1/asyncapi.json": _document(
                "getAsyncApi", "The WebSocket protocol, described (AsyncAPI 3.0)"
            ),
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a user's token of the room (the one of their link)",
                }
            },
        },
    }


# --- the AsyncAPI document ----------------------------------------------------


def _schema_of(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    if value is None:
        return {"type": "null"}
    return {"type": "object"}


def frame_schema(*frames: dict[str, Any], summary: str) -> dict[str, Any]:
    """A frame's schema from frames its builder made: every field seen, its
    type, required when every example has it; `t` a constant."""
    properties: dict[str, Any] = {}
    for frame in frames:
        for key, value in frame.items():
            seen = properties.setdefault(key, {"anyOf": []})
            typed = _schema_of(value)
            if typed not in seen["anyOf"]:
                seen["anyOf"].append(typed)
    for key, seen in properties.items():
        if len(seen["anyOf"]) == 1:
            properties[key] = seen["anyOf"][0]
    properties["t"] = {"const": frame_type(frames[0])}
    if "code" in properties:
        properties["code"] = {"type": "string", "enum": ERROR_CODES}
    required = sorted(set.intersection(*(set(f) for f in frames)))
    return {"type": "object", "description": summary, "properties": properties,
            "required": required}  # fmt: skip


def _messages() -> dict[str, tuple[str, list[dict[str, Any]], str]]:
    """name -> (direction, example frames from the builders, summary)."""
    p = protocol
    state = {"room": "r1", "name": "Table", "characters": {}, "users": {}}
    return {
        "hello": ("send", [p.hello("TOKEN", "r1", 41), p.hello("TOKEN")],
                  "The first frame: a token, a room (none for an admin session), `since` "
                  "to resume."),
        "cmd": ("send", [p.cmd("c-17", "damage", {"char": "c1", "amount": 3}, 57),
                         p.cmd("c-18", "combat_end")],
                "A command: an op of docs/operations.md; `id` dedups retries; `expect` a "
                "version."),
        "sync": ("send", [p.sync(41), p.sync(41, "q1")],
                 "What follows `since` (patches or a snapshot)."),
        "welcome": ("receive", [p.welcome("r1", "u1", "gm", 57, state=state),
                                p.welcome("r1", "u1", "gm", 57, patches=[]),
                                p.admin_welcome()],
                    "The answer to a hello: the viewer's state, or the patches after "
                    "`since`."),
        "patch": ("receive", [p.patch(58, [], [], "u1", "c-17"), p.patch(59, [], [], "u1", None)],
                  "A new version, as this viewer sees it."),
        "ack": ("receive", [p.ack("c-17", {}, 58), p.ack("c-17", {}, 58, dup=True),
                            p.ack("a-1", {})],
                "A command was applied (after its patch reached everyone)."),
        "error": ("receive", [p.error("conflict", "nothing to undo", "c-18"),
                              p.error("bad_frame", "a second hello")],
                  "A refusal; nothing changed. Codes in the order they are checked."),
        "patches": ("receive", [p.patches([], "q1"), p.patches([])],
                    "The answer to a sync: the patches after `since`."),
        "snapshot": ("receive", [p.snapshot(57, state, "q1"), p.snapshot(57, state)],
                     "The answer to a sync too far behind: the viewer's state."),
        "redirect": ("receive", [p.redirect("wss://node-b.example/")],
                     "Cluster mode: the room is served by another node (then close 4302)."),
    }  # fmt: skip


def asyncapi() -> dict[str, Any]:
    messages = _messages()
    components = {
        name: {
            "name": name,
            "title": name,
            "summary": summary,
            "contentType": "application/json",
            "payload": frame_schema(*frames, summary=summary),
            "examples": [{"payload": frames[0]}],
        }
        for name, (_, frames, summary) in messages.items()
    }
    refs = {name: {"$ref": f"#/components/messages/{name}"} for name in messages}
    close_codes = {
        str(v): k.removeprefix("CLOSE_").lower()
        for k, v in vars(protocol).items()
        if k.startswith("CLOSE_") and isinstance(v, int)
    }
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {
            "title": f"{TITLE} WebSocket protocol",
            "version": __version__,
            "description": (
                f"Protocol version {protocol.PROTO_VERSION}. Subprotocols "
                f"{', '.join(protocol.SUBPROTOCOLS)} (the same maps in MessagePack or "
                f"JSON), frames of at most {protocol.MAX_FRAME_BYTES} bytes. "
                "docs/protocol.md is the reference; the HTTP door is at /api/v1/openapi.json."
            ),
            "license": {"name": "MIT"},
        },
        "defaultContentType": "application/json",
        "servers": {
            "vtt-sync": {
                "host": "localhost:8765",
                "protocol": "ws",
                "description": "any path; wss:// with TLS",
            }
        },
        "channels": {
            "room": {
                "address": "/",
                "title": "A room session (or an admin session)",
                "messages": refs,
                "x-subprotocols": list(protocol.SUBPROTOCOLS),
                "x-error-order": list(protocol.ERROR_ORDER),
                "x-close-codes": close_codes,
                "x-final-close-codes": sorted(protocol.FINAL_CLOSE_CODES),
            }
        },
        "operations": {
            f"{direction}_{name}": {
                "action": direction,
                "channel": {"$ref": "#/channels/room"},
                "messages": [{"$ref": f"#/channels/room/messages/{name}"}],
            }
            for name, (direction, _, _) in messages.items()
        },
        "components": {"messages": components},
    }


DOCUMENTS = {"openapi.json": openapi, "asyncapi.json": asyncapi}


def render(name: str) -> str:
    """A document as the repository keeps it (docs/NAME)."""
    return json.dumps(DOCUMENTS[name](), indent=2, ensure_ascii=False) + "\n"


@functools.cache
def document_bytes(name: str) -> bytes | None:
    """A document as the server serves it (made once)."""
    return render(name).encode() if name in DOCUMENTS else None
