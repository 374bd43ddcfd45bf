"""The clock port: where the server reads time and waits.

Everything time-based outside the rules (idle unloading, token retry
windows, rate limits, command timestamps) reads this port instead of the
`time` module, so a test moves time forward with `FakeClock.advance`
instead of sleeping. The rules' world clock is game state, not this.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds for intervals (never goes back)."""
        ...

    def time(self) -> float:
        """Wall-clock seconds since the epoch (for timestamps in the log)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that moves only when told: `advance(s)` moves both readings
    and wakes the sleepers whose time has come."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + max(0.0, seconds), fut))
        await fut

    def advance(self, seconds: float) -> None:
        self._now += seconds
        due = [(t, f) for t, f in self._sleepers if t <= self._now]
        self._sleepers = [(t, f) for t, f in self._sleepers if t > self._now]
        for _, fut in due:
            if not fut.done():
                fut.set_result(None)
