"""Each op declared once (rules/op.py): the op table, the affordances and
the reference are built from the declarations, so an op's checks are the
ones `apply` runs and the ones its offer runs, and a declaration that could
not be read one way is refused when the rules load."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from rules import RuleBroken, SeededDice, Viewer, affordances, apply, catalog, engine, offers
from rules.op import OWNER_OR_GM, Args, Check, Doc, Facts, Op, Subject, WholeRoom, edit
from rules.server_ops import SERVER_OPS
from rules.validate import AMOUNT, ID, Arg
from tests.helpers.table import Table


def _no_pp(calls: list[Any]) -> Any:
    def test(at: Facts, a: Args) -> None:
        calls.append((at.actor.role, dict(a)))
        c = at.char(a)
        if c.pp == 0:
            raise RuleBroken(f"{c.name} has no PP", "poke_no_pp", char=c.id)

    return test


def _poke(calls: list[Any], offer: Any = None, checks: Any = None) -> Op:
    """A toy op: a character spends a PP, if it has one."""

    def spend(ctx: Any, a: Args) -> None:
        edit(ctx, a).pp -= 1

    return Op(
        "poke",
        {"char": Arg(ID)},
        OWNER_OR_GM,
        spend,
        Subject() if offer is None else offer,
        Doc("spend a PP", "One PP less.", {"char": "who"}, {"char": "c1"}),
        checks=(Check(_no_pp(calls)),) if checks is None else checks,
        chars=("char",),
    )


def test_apply_and_the_affordances_run_the_ops_own_declared_check(monkeypatch) -> None:
    calls: list[Any] = []
    op = _poke(calls)
    monkeypatch.setitem(engine.OPS, "poke", op)
    monkeypatch.setitem(offers.OFFERS, "poke", offers.SubjectOffer(op))
    t = Table()
    a = t.add("Aline", owner=t.p1, pp=0)
    mine = affordances(t.room, Viewer(t.p1.user, "player"))["chars"][a]["poke"]
    with pytest.raises(RuleBroken) as info:
        apply(t.room, "poke", {"char": a}, t.p1, SeededDice(1))
    assert mine == {"args": {"char": a}, "why": info.value.reason()}
    assert [args for _, args in calls] == [{"char": a}, {"char": a}]  # the offer's, apply's
    t.do("update_character", char=a, set={"pp": 1})
    assert affordances(t.room, Viewer(t.p1.user, "player"))["chars"][a]["poke"] == {
        "args": {"char": a}
    }
    assert apply(t.room, "poke", {"char": a}, t.p1, SeededDice(1)).room.characters[a].pp == 0


def test_an_op_is_declared_once() -> None:
    op = _poke([])
    with pytest.raises(ValueError, match="declared twice"):
        engine._table((op,), (op,))
    assert all(name == op.name for name, op in engine.OPS.items())
    # the reference's entry is the declaration's: its events, whether undo reverts it
    heal = catalog.OPS["heal"]
    assert (heal.summary, heal.events) == (
        engine.OPS["heal"].doc.summary,
        engine.OPS["heal"].events,
    )
    assert [op for op, doc in catalog.OPS.items() if not doc.undoable] == [
        "add_user",
        "remove_user",
        "rotate_token",
        *SERVER_OPS,
    ]


def test_an_offer_lists_the_values_its_checks_are_of() -> None:
    """A check of an argument (`Check.of`) decides each value the offer
    lists: an offer that lists none of that argument could not run it."""
    stray = _poke([], checks=(Check(lambda at, a: None, of="patient"),))
    with pytest.raises(ValueError, match="lists no values of"):
        offers.SubjectOffer(stray)
    amount = attrs.evolve(
        _poke([]), args={"char": Arg(ID), "amount": Arg(AMOUNT)}, offer=WholeRoom(choose="amount")
    )
    with pytest.raises(ValueError, match="no character, user or choice"):
        offers.RoomOffer(amount)  # an amount has no list of values to offer
