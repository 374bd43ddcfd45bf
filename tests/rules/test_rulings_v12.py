"""The rulings RULES.md added in v1.2, one by one (docs/rules.md says each in
the project's words): D5's exemption lost when the turn is passed over, T3
(dead combatants are passed over, a room setting) and T4 (initiative).

Default sheet: level 3, PV 20, PE 15, PP 6, Dex 14 (+2), Con 14; a round is 6 s.
"""

from __future__ import annotations

from tests.helpers.table import Table
from tests.rules.rulekit import ok


def combat(n: int = 3) -> tuple[Table, list[str]]:
    t = Table()
    ids = [t.add(name) for name in "ABCDEF"[:n]]
    t.do("combat_start", order=ids)
    return t, ids


def turn(t: Table) -> tuple[str, int, int]:
    c = t.room.combat
    assert c is not None
    return c.current, c.round, c.turn


# ------------------------------------------------------------ D5, a turn passed over


def test_D5_v12_turn_passed_over_by_set_order_costs_pp_at_the_next_own_turn():
    """D5 v1.2: A starts dying on its own turn; the GM's tracker edit gives the
    turn to B (A's turn passed over, no end-of-turn rule). The exemption was
    for that turn only: the end of A's next own turn costs 1 PP."""
    t, (a, b) = combat(2)
    t.down(a)
    assert t.char(a).dying_fresh
    t.do("set_order", order=[a, b], turn=1)  # passed over
    assert not t.char(a).dying_fresh
    t.do("end_turn", char=b)  # round 2, A's turn
    assert turn(t) == (a, 2, 0)
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    assert t.kinds("pp") == [{"kind": "pp", "char": a, "delta": -1, "cause": "dying"}]
    ok(t)


def test_D5_v12_turn_passed_over_by_ending_the_round_costs_pp_at_the_next_own_turn():
    """D5 v1.2: the same when the edit ends the round (`turn` = the order's
    length), even for a lone combatant whose next turn follows at once."""
    t, (a,) = combat(1)
    t.down(a)
    t.do("set_order", order=[a], turn=1)  # the round ends: round 2, A's turn again
    assert turn(t) == (a, 2, 0) and t.char(a).pp == 6
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    ok(t)


def test_D5_v12_turn_passed_over_by_a_reorder_costs_pp_at_the_next_own_turn():
    """D5 v1.2: a reorder whose `turn` names another combatant passes A over."""
    t, (a, b, c) = combat(3)
    t.down(a)
    t.do("set_order", order=[b, a, c], turn=0)  # B's turn now, A's turn passed over
    t.do("end_turn", char=b)
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    ok(t)


def test_D5_v12_leaving_the_order_and_coming_back_costs_pp_at_the_next_own_turn():
    """D5 v1.2: A starts dying on its turn, leaves the order and comes back:
    the end of its next own turn costs 1 PP."""
    t, (a, b) = combat(2)
    t.down(a)
    t.do("set_order", order=[b])
    t.do("set_order", order=[b, a])
    t.do("end_turn", char=b)
    assert turn(t) == (a, 1, 1)
    t.do("end_turn", char=a)
    assert t.char(a).pp == 5
    ok(t)


def test_D5_v12_a_reorder_that_keeps_the_turn_keeps_the_exemption():
    """D5 v1.2: only the turn passed over loses the exemption; a reorder that
    leaves A its turn does not, so the end of that very turn is still free."""
    t, (a, b) = combat(2)
    t.down(a)
    t.do("set_order", order=[b, a])  # A keeps its turn, now at index 1
    assert turn(t) == (a, 1, 1) and t.char(a).dying_fresh
    t.do("end_turn", char=a)
    assert t.char(a).pp == 6
    ok(t)
