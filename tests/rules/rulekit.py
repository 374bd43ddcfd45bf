"""Small helpers shared by the rule-by-rule tests (tests/rules/test_*.py).

`refused` runs a command that must be turned down and checks both the error
class (hence its code, docs/protocol.md, "Refusals") and that the room did not change, neither
the object the table holds nor its dict form.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rules import Actor, Refused, violations
from tests.helpers.table import Table

HOUR = 3600


def combat(n: int = 3) -> tuple[Table, list[str]]:
    """A table of `n` characters (A, B, C...) in a combat in that order."""
    t = Table()
    ids = [t.add(name) for name in "ABCDEF"[:n]]
    t.do("combat_start", order=ids)
    return t, ids


def turn(t: Table) -> tuple[str, int, int]:
    """(whose turn, round, turn index) of the running combat."""
    c = t.room.combat
    assert c is not None
    return c.current, c.round, c.turn


def refused(t: Table, exc: type[Refused], op: str, by: Actor | None = None, **args: Any) -> Refused:
    """`op` must raise `exc` (exactly that class) and leave `t.room` as it was."""
    room = t.room
    before = copy.deepcopy(room.to_dict())
    with pytest.raises(Refused) as info:
        t.do(op, by=by, **args)
    err = info.value
    assert type(err) is exc, f"{op}: expected {exc.__name__}, got {type(err).__name__}: {err}"
    assert err.code == exc.code
    assert t.room is room
    assert t.room.to_dict() == before
    return err


def ok(t: Table) -> None:
    """No invariant of docs/rules.md's conditions table ("Conditions") is broken."""
    assert violations(t.room) == []


def state(t: Table) -> dict[str, Any]:
    return copy.deepcopy(t.room.to_dict())


def ch(t: Table, cid: str) -> dict[str, Any]:
    """A character's dict form (what clients see)."""
    return t.room.to_dict()["characters"][cid]


def kill(t: Table, cid: str) -> None:
    """Dying, then lethal damage until the PP run out (D3): dead."""
    if t.char(cid).condition == "conscious":
        t.down(cid)
    while t.char(cid).condition == "dying":
        t.do("damage", char=cid, amount=1, pv_only=True)
    assert t.char(cid).condition == "dead"


def knocked_out(t: Table, cid: str) -> None:
    """Nonlethal damage to exactly 0 PV: stable and marked nonlethal (N1)."""
    c = t.char(cid)
    t.do("damage", char=cid, amount=c.pe + c.pv, nonlethal=True)
    assert t.char(cid).condition == "stable" and t.char(cid).nonlethal


def no_at(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events without the scheduler's `at` field."""
    return [{k: v for k, v in e.items() if k != "at"} for e in events]
