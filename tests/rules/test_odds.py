"""Exact odds of long-term stability (L1, L2, L4, L5).

A stable character makes up to 8 hourly checks: each wakes it, keeps it
stable, or kills it. That is a small Markov chain whose absorption
probabilities we compute exactly with fractions, then compare with the
engine run on seeded dice over thousands of characters (a few standard
deviations of tolerance: the seed is fixed, so the test is deterministic).
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from rules import Actor, SeededDice, apply
from rules.model import Character
from rules.validate import MAX_CHARACTERS
from tests.helpers.table import stable_room

N = 4000


def after_eight_hours(con: int, healer: int | None, seed: int, nonlethal: bool = False):
    """N stable patients, each 8 hours later, run in as many rooms as the
    room bound (MAX_CHARACTERS, healers included) needs."""
    per_room = MAX_CHARACTERS // (1 if healer is None else 2)
    out: list[Character] = []
    for i in range(0, N, per_room):
        room = stable_room(min(per_room, N - i), con, healer)
        for c in room.characters.values():
            c.nonlethal = nonlethal and c.condition == "stable"
        done = apply(
            room, "advance_clock", {"seconds": 8 * 3600}, Actor("u1", "gm"), SeededDice(seed + i)
        ).room
        out += [c for c in done.characters.values() if c.id.startswith("s")]
    assert len(out) == N
    return out


def p_at_least(threshold: int) -> Fraction:
    """P(natural d20 >= threshold)."""
    return Fraction(max(0, min(20, 21 - threshold)), 20)


def hourly(con_mod: int, healer_medicine: int | None) -> tuple[Fraction, Fraction]:
    """(p_wake, p_die) of one hourly check (L1, with L4's healer)."""
    wake = p_at_least(20 - con_mod)
    die = 1 - p_at_least(10 - con_mod)
    if healer_medicine is None:
        return wake, die
    q = p_at_least(15 - healer_medicine)  # L4: the healer's Medicine check
    aided_wake = p_at_least(20 - con_mod - 2)
    return q * aided_wake + (1 - q) * wake, (1 - q) * die  # aided: a total < 10 becomes 10


def p_death(con_mod: int, healer_medicine: int | None) -> Fraction:
    wake, die = hourly(con_mod, healer_medicine)
    stay = 1 - wake - die
    return sum((stay**k * die for k in range(8)), Fraction(0))


@pytest.mark.parametrize(
    ("con", "healer"),
    [(10, None), (14, None), (6, None), (10, 5), (8, 0)],
    ids=["con10", "con14", "con6", "con10-healer+5", "con8-healer+0"],
)
def test_L1_L4_death_rate_matches_the_markov_chain(con, healer):
    """L1 (and L4 with a healer): the death rate over 8 hourly checks equals the exact chain."""
    con_mod = (con - 10) // 2
    expected = float(p_death(con_mod, healer))
    patients = after_eight_hours(con, healer, seed=(con * 100 + (healer or 0)) * N)
    dead = sum(c.condition == "dead" for c in patients)
    sigma = math.sqrt(N * expected * (1 - expected))
    assert abs(dead - N * expected) <= 4 * sigma + 1, (dead, N * expected, sigma)
    # L2: after the eighth check nobody is left stable.
    assert all(c.condition != "stable" for c in patients)


def test_L5_nonlethal_never_dies_from_the_checks():
    """L5: a character downed by nonlethal damage never dies from L1."""
    patients = after_eight_hours(6, None, seed=7, nonlethal=True)
    assert all(c.condition == "conscious" for c in patients)
    assert p_death(-2, None) > Fraction(1, 2)  # the same sheet would mostly die without L5


def test_exact_chain_sanity():
    """The chain itself: with con mod 0 and no healer, P(die per hour) = 9/20, P(wake) = 1/20."""
    assert hourly(0, None) == (Fraction(1, 20), Fraction(9, 20))
    assert hourly(0, 20) == (Fraction(3, 20), Fraction(0))
