"""The API's descriptions: OpenAPI 3.1 (the HTTP door) and AsyncAPI 3.0 (the
WebSocket protocol) are generated from the op table, the catalog and
wire/protocol.py, pass a validator, say what the checkers accept, and the
copies in docs/ are the generator's (python3 -m scripts.gen_apidocs)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from openapi_spec_validator import validate

from rules import catalog
from rules.engine import ADMIN_OPS, OPS
from rules.validate import InvalidArgs, check_args
from scripts import gen_apidocs
from sync_server.hosting import apidoc
from sync_server.wire import protocol


def validator(doc: dict[str, Any], ref: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({"$ref": ref, "components": doc["components"]})


def test_the_openapi_document_is_valid_openapi_3_1() -> None:
    doc = apidoc.openapi()
    assert doc["openapi"].startswith("3.1")
    validate(doc)


def test_every_room_op_and_argument_is_described_with_its_bounds() -> None:
    doc = apidoc.openapi()
    schemas = doc["components"]["schemas"]
    room_ops = [op for op in catalog.all_ops() if op not in ADMIN_OPS]
    assert [r["$ref"] for r in schemas["Command"]["oneOf"]] == [
        f"#/components/schemas/Command_{op}" for op in room_ops
    ]
    for op in room_ops:
        body = schemas[f"Command_{op}"]
        props = body["properties"]["args"]["properties"]
        assert set(props) == set(catalog.op_args(op)), op
        assert [e["code"] for e in body["x-errors"]] == [c for c, _ in catalog.op_errors(op)]
    damage = schemas["Command_damage"]["properties"]["args"]
    assert damage["required"] == ["char", "amount"]
    assert damage["properties"]["amount"]["minimum"] == 0
    assert damage["properties"]["amount"]["maximum"] == 1_000_000
    rest = schemas["Command_rest"]["properties"]["args"]["properties"]["kind"]
    assert rest["enum"] == ["short", "night", "bed"]
    assert not any(f"Command_{op}" in schemas for op in ADMIN_OPS)


def test_the_catalog_examples_match_the_schema_and_the_checker_agrees() -> None:
    doc = apidoc.openapi()
    command = validator(doc, "#/components/schemas/Command")
    for op in (op for op in catalog.all_ops() if op not in ADMIN_OPS):
        example = {"op": op, "args": catalog.OPS[op].example}
        command.validate(example)
    # The schema refuses what the checker refuses (a few out-of-range values).
    for op, args in [
        ("damage", {"char": "c1", "amount": -1}),
        ("damage", {"char": "c1", "amount": 3, "extra": 1}),
        ("rest", {"char": "c1", "kind": "forever"}),
        ("add_character", {**catalog.OPS["add_character"].example, "level": 0}),
        ("update_character", {"char": "c1", "set": {}}),
        ("update_character", {"char": "c1", "set": {"name": "a\x01b"}}),
    ]:
        assert not command.is_valid({"op": op, "args": args}), (op, args)
        with pytest.raises(InvalidArgs):
            check_args(op, OPS[op].args, args)
            if OPS[op].check is not None:
                OPS[op].check(check_args(op, OPS[op].args, args))


def test_the_error_codes_are_the_protocols() -> None:
    assert catalog.ERROR_ORDER == protocol.ERROR_ORDER
    schemas = apidoc.openapi()["components"]["schemas"]
    assert schemas["Error"]["properties"]["code"]["enum"] == [
        *protocol.ERROR_ORDER,
        protocol.UNAUTHENTICATED,
    ]


# A JSON Schema of the AsyncAPI 3.0 structure the document uses (the parts
# a tool reads: info, servers, channels with messages, operations that
# point at them, messages with payload schemas).
ASYNCAPI_SHAPE = {
    "type": "object",
    "required": ["asyncapi", "info", "channels", "operations", "components"],
    "properties": {
        "asyncapi": {"const": "3.0.0"},
        "info": {"type": "object", "required": ["title", "version"]},
        "servers": {
            "type": "object",
            "additionalProperties": {"type": "object", "required": ["host", "protocol"]},
        },
        "channels": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["address", "messages"],
                "properties": {
                    "messages": {
                        "type": "object",
                        "additionalProperties": {"type": "object", "required": ["$ref"]},
                    }
                },
            },
        },
        "operations": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["action", "channel", "messages"],
                "properties": {"action": {"enum": ["send", "receive"]}},
            },
        },
        "components": {
            "type": "object",
            "required": ["messages"],
            "properties": {
                "messages": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "required": ["name", "payload"],
                    },
                }
            },
        },
    },
}


def resolve(doc: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = doc
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def test_the_asyncapi_document_has_the_structure_and_its_refs_resolve() -> None:
    doc = apidoc.asyncapi()
    jsonschema.validate(doc, ASYNCAPI_SHAPE)
    text = json.dumps(doc)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        resolve(doc, ref)
    for message in doc["components"]["messages"].values():
        jsonschema.Draft202012Validator.check_schema(message["payload"])
    for op in doc["operations"].values():
        for m in op["messages"]:
            assert resolve(doc, m["$ref"]) is not None


def test_the_protocols_frames_match_their_asyncapi_messages() -> None:
    messages = apidoc.asyncapi()["components"]["messages"]
    for frame in protocol.vectors()["frames"].values():
        jsonschema.validate(frame, messages[frame["t"]]["payload"])
    assert not jsonschema.Draft202012Validator(messages["cmd"]["payload"]).is_valid(
        {"t": "cmd", "op": "damage"}  # no id
    )
    assert set(messages) >= {"hello", "cmd", "sync", "welcome", "ack", "error", "patch"}


def test_the_copies_in_docs_are_up_to_date() -> None:
    assert gen_apidocs.stale() == [], "run python3 -m scripts.gen_apidocs"


def test_every_command_the_schema_allows_passes_the_argument_checks() -> None:
    """Generated from the document (schemathesis), checked by the very
    checkers the rules use: the schema promises nothing they refuse (what
    needs several arguments at once, OpSpec.check, is the op's own text)."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings

    schema = schemathesis.openapi.from_dict(apidoc.openapi())
    operation = schema["/api/v1/rooms/{room}/commands"]["POST"]
    seen: set[str] = set()

    @given(case=operation.as_strategy())
    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    def accepted(case: Any) -> None:
        op, args = case.body["op"], case.body.get("args", {})
        if "." in json.dumps(args):  # 3.0: an integer to JSON Schema, refused by the checker
            return  # (the schema's descriptions say so: no decimal point)
        seen.add(op)
        if op == "undo":
            assert args in ({}, None) or not args
            return
        check_args(op, OPS[op].args, args)

    accepted()
    assert len(seen) > 10


def test_the_asyncapi_examples_are_frames_the_parsers_read() -> None:
    """Each message's example is what the protocol's own parsers accept
    (wire/frames.py), in the direction the document says."""
    from sync_server.wire.frames import parse_client, parse_server

    doc = apidoc.asyncapi()
    for op in doc["operations"].values():
        for ref in op["messages"]:
            name = ref["$ref"].rsplit("/", 1)[1]
            example = doc["components"]["messages"][name]["examples"][0]["payload"]
            parse = parse_client if op["action"] == "send" else parse_server
            parse(example)
