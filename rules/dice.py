"""Dice sources (X1).

The engine never touches a global random generator: every natural d20 comes
from a `Dice` object passed to `apply`, after the room's queued rolls. The
server uses `ServerDice` (unpredictable); tests and replays use `SeededDice`
or `ScriptedDice`, which let a test choose every roll.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Protocol


class Dice(Protocol):
    def d20(self) -> int:
        """A natural d20, 1..20."""
        ...


class ServerDice:
    """Unpredictable dice for live tables: the OS's entropy via SystemRandom."""

    def __init__(self) -> None:
        self._rng = random.SystemRandom()

    def d20(self) -> int:
        return self._rng.randint(1, 20)


class SeededDice:
    """Reproducible dice for replays, benchmarks and statistical tests."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def d20(self) -> int:
        return self._rng.randint(1, 20)


class ScriptedDice:
    """Dice that return exactly the given rolls, and fail loudly when they run out.

    A test that forgets a roll gets an error rather than a silent random value.
    """

    def __init__(self, rolls: Iterable[int] = ()) -> None:
        self.rolls = list(rolls)
        self.used: list[int] = []

    def push(self, *rolls: int) -> None:
        self.rolls.extend(rolls)

    def d20(self) -> int:
        if not self.rolls:
            raise AssertionError("ScriptedDice ran out of rolls")
        roll = self.rolls.pop(0)
        self.used.append(roll)
        return roll
