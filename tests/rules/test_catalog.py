"""The reference (rules/catalog.py, docs/operations.md) cannot drift from the
code: every op of the op table and every event kind the code emits has an
entry, every argument a meaning, every example is a valid command, each op's
events are the ones it lists, and docs/operations.md is what the generator
writes from all of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules import (
    ADMIN_OPS,
    LOG_OPS,
    OPS,
    InvalidArgs,
    Refused,
    SeededDice,
    UnknownOp,
    apply,
    catalog,
)
from rules.validate import MAX_LEVEL, Kind, check_args
from scripts import gen_operations
from sync_server.core import limits
from tests.helpers.table import Table
from tests.helpers.tour import tour
from tests.rules.test_properties import COMMANDS, fresh_table

REPO = Path(__file__).resolve().parents[2]
EMIT = re.compile(r"\.emit\(\s*\"(\w+)\"")  # ctx.emit("kind", ...) in rules/
SERVER_EVENT = re.compile(r"\{\"kind\": \"(\w+)\"")  # event dicts the server builds


def emitted_kinds() -> set[str]:
    found = set()
    for path in (REPO / "rules").glob("*.py"):
        found |= set(EMIT.findall(path.read_text(encoding="utf-8")))
    for path in (REPO / "sync_server").rglob("*.py"):
        found |= set(SERVER_EVENT.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_op_has_an_entry_and_every_entry_is_an_op() -> None:
    ops = set(OPS) | LOG_OPS | ADMIN_OPS
    assert set(catalog.OPS) == ops
    assert sorted(catalog.all_ops()) == sorted(ops)
    for op in ops - set(OPS):  # the server's own: their args and role are in the catalog
        assert catalog.OPS[op].args is not None and catalog.OPS[op].role in catalog.ROLE_TEXT


@pytest.mark.parametrize("op", sorted(set(OPS) | LOG_OPS | ADMIN_OPS))
def test_every_argument_has_a_meaning_and_a_kind_that_describes_itself(op: str) -> None:
    args = catalog.op_args(op)
    assert set(catalog.OPS[op].meaning) == set(args)
    for name, arg in args.items():
        assert isinstance(arg.check, Kind), f"{op}.{name}: use a validate.py kind"
        assert arg.check.describe()
    assert catalog.op_role(op) in catalog.ROLE_TEXT


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_example_is_a_valid_command(op: str) -> None:
    spec = OPS[op]
    clean = check_args(op, spec.args, catalog.OPS[op].example)
    if spec.check is not None:
        spec.check(clean)


def test_server_op_examples_and_limits_match_the_server() -> None:
    assert catalog.MAX_ROOM_NAME == limits.MAX_ROOM_NAME
    assert limits.ROOM_ID_PATTERN == r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  # our note says so
    assert catalog.ROOM_ID.hi == catalog.MAX_ROOM_ID == 64
    for op in ADMIN_OPS:
        example = catalog.OPS[op].example
        assert re.fullmatch(limits.ROOM_ID_PATTERN, example["room"])
        assert set(example) <= set(catalog.OPS[op].args or {})
    assert catalog.OPS["undo"].example == {}
    assert catalog.IMPORT_CHUNK_CHARS == limits.IMPORT_CHUNK_CHARS
    assert catalog.MAX_IMPORT_PARTS == limits.MAX_IMPORT_PARTS


def test_every_event_kind_the_code_emits_is_documented_and_no_other() -> None:
    kinds = emitted_kinds()
    assert "roll" in kinds and "undo" in kinds  # the scan sees both sources
    assert set(catalog.EVENTS) == kinds


@pytest.mark.parametrize("kind", sorted(catalog.EVENTS))
def test_event_examples_use_only_documented_fields(kind: str) -> None:
    doc = catalog.EVENTS[kind]
    assert doc.example["kind"] == kind
    assert set(doc.example) - {"kind"} <= set(doc.fields)


def _check_events(op: str, events: list[dict]) -> None:
    declared = set(catalog.OPS[op].events)
    for ev in events:
        assert ev["kind"] in declared, f"{op} emitted {ev['kind']}, not in its catalog entry"
        fields = set(catalog.EVENTS[ev["kind"]].fields) | set(catalog.COMMON_EVENT_FIELDS)
        assert set(ev) <= fields, f"{ev['kind']} has undocumented fields {set(ev) - fields}"


def test_the_tour_sends_every_op_and_its_events_are_the_documented_ones() -> None:
    steps = tour()
    assert {s.op for s in steps} == set(OPS)
    seen = set()
    for step in steps:
        _check_events(step.op, step.events)
        seen |= {e["kind"] for e in step.events}
    assert seen | {"undo"} == set(catalog.EVENTS)  # undo's event is the server's


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(COMMANDS, max_size=15), st.integers(0, 2**32))
def test_random_commands_emit_only_documented_events(commands, seed) -> None:
    """The property tests' random sequences, then a day of world time (every
    timed rule fires): each op's events are among those its entry lists."""
    t = fresh_table()
    dice = SeededDice(seed)
    for op, args in [*commands, ("advance_clock", {"seconds": 30 * 3600})]:
        try:
            out = apply(t.room, op, args, t.gm, dice)
        except Refused:
            continue
        t.room = out.room
        _check_events(op, out.events)


def test_docs_operations_md_is_what_the_generator_writes() -> None:
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    assert text == gen_operations.render(), "run: python3 -m scripts.gen_operations"
    assert gen_operations.main(["--check"]) == 0
    for op in catalog.all_ops():
        assert f"\n### {op}\n" in text
    for kind in catalog.EVENTS:
        assert f"\n### {kind}\n" in text


def test_check_args_names_every_missing_argument_at_once() -> None:
    t = Table()
    with pytest.raises(InvalidArgs) as info:
        t.do("add_character", name="Dana")
    assert info.value.message == (
        "add_character: missing arguments 'level', 'pv_max', 'pe_max', 'pp_max', "
        "'abilities', 'medicine'"
    )
    with pytest.raises(InvalidArgs) as info:
        t.do("damage", amount=3)
    assert info.value.message == "damage: missing argument 'char'"


def test_an_unknown_op_suggests_the_nearest_ones() -> None:
    t = Table()
    with pytest.raises(UnknownOp) as info:
        t.do("damge", char="c1")
    assert info.value.message == "unknown op 'damge' (did you mean damage?)"
    with pytest.raises(UnknownOp) as info:
        t.do("fly")
    assert info.value.message == "unknown op 'fly'"


def test_kinds_describe_their_range() -> None:
    args = OPS["add_character"].args
    assert args["level"].check.describe() == f"integer 1 to {MAX_LEVEL}"
    assert args["owner"].check.describe() == "id, 1 to 64 characters; or null"
    assert OPS["rest"].args["kind"].check.describe() == "one of short, night, bed"
    assert OPS["queue_rolls"].args["rolls"].check.describe() == (
        "list of 1 to 100 items, each integer 1 to 20"
    )
