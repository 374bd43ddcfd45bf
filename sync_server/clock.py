"""The clock port: where the server reads time and waits.

Everything time-based outside the rules (idle unloading, token retry
windows, rate limits, command timestamps, the bounds on waits: drains,
closes, storage calls) reads this port instead of the `time` module or
`asyncio.sleep`/`asyncio.timeout`, so a test moves time forward with
`FakeClock.advance`, or lets it jump (`autojump_threshold`), instead of
sleeping. The rules' world clock is game state, not this.

It stands at the ground of the server package (it imports nothing of
ours): storage, the cluster leases and the asyncio side all read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Protocol

# How many loop iterations in a row the autojump must find nothing to run
# before it calls the loop settled: one for the callbacks the last ones
# scheduled, one more for the I/O events the selector then reports.
SETTLED_ITERATIONS = 2


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds for intervals (never goes back)."""
        ...

    def time(self) -> float:
        """Wall-clock seconds since the epoch (for timestamps in the log)."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    def timeout(self, seconds: float | None) -> contextlib.AbstractAsyncContextManager[object]:
        """Bound the block to `seconds` (None: no bound): past it, the block
        is cancelled and `TimeoutError` raised, as `asyncio.timeout`."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def timeout(self, seconds: float | None) -> contextlib.AbstractAsyncContextManager[object]:
        return asyncio.timeout(seconds)


class FakeClock:
    """A clock that moves only when told: `advance(s)` moves both readings
    and wakes the sleepers and expires the timeouts whose time has come, in
    deadline order.

    With `autojump_threshold` finite (trio's `MockClock` semantics), the
    clock also moves by itself: once the event loop has settled (nothing
    left to run but tasks waiting) and stays so for that many real seconds
    while something waits on this clock, it jumps to the earliest deadline.
    Zero suits tests with no real I/O; a small value (0.01) lets real I/O in
    flight (a database, a socket) finish before time jumps past it."""

    def __init__(self, start: float = 1_000_000.0, autojump_threshold: float = math.inf) -> None:
        if not autojump_threshold >= 0:
            raise ValueError("autojump_threshold must be >= 0")
        self._now = start
        self.autojump_threshold = autojump_threshold
        # (deadline, order, wake): wake(None) fires; cancelled entries stay
        # in the heap with `wake` removed from `_live`.
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._live: set[int] = set()
        self._order = itertools.count()
        self._jumper: asyncio.Task[None] | None = None
        self.jumps = 0  # how many times the autojump moved the clock

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._now

    # --- timers -------------------------------------------------------------

    def _at(self, deadline: float, wake: Callable[[], None]) -> int:
        key = next(self._order)
        heapq.heappush(self._timers, (deadline, key, wake))
        self._live.add(key)
        self._arm()
        return key

    def _cancel(self, key: int) -> None:
        self._live.discard(key)

    def next_deadline(self) -> float | None:
        """The earliest deadline anything waits for, if any."""
        while self._timers and self._timers[0][1] not in self._live:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        key = self._at(self._now + max(0.0, seconds), wake)
        try:
            await fut
        finally:
            self._cancel(key)

    @contextlib.asynccontextmanager
    async def _timeout(self, seconds: float | None) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(None) as bound:
            key = None
            if seconds is not None:
                # Expire it now (loop time) when the fake deadline comes.
                key = self._at(self._now + seconds, lambda: bound.reschedule(loop.time()))
            try:
                yield
            finally:
                if key is not None:
                    self._cancel(key)

    def timeout(self, seconds: float | None) -> contextlib.AbstractAsyncContextManager[object]:
        return self._timeout(seconds)

    def advance(self, seconds: float) -> None:
        """Move time forward; everything due fires, earliest first (a
        callback run meanwhile reads the clock at that one's deadline)."""
        target = self._now + seconds
        while (deadline := self.next_deadline()) is not None and deadline <= target:
            _, key, wake = heapq.heappop(self._timers)
            self._live.discard(key)
            self._now = max(self._now, deadline)
            wake()
        self._now = target

    # --- autojump -------------------------------------------------------------

    def _arm(self) -> None:
        """Start the autojump task when something waits (it ends when
        nothing does: no task outlives the waits)."""
        if not math.isfinite(self.autojump_threshold):
            return
        if self._jumper is None or self._jumper.done():
            loop = asyncio.get_running_loop()
            self._jumper = loop.create_task(self._autojump(), name="FakeClock autojump")

    async def _settled(self) -> None:
        """Return once the loop has nothing to run but this task."""
        loop = asyncio.get_running_loop()
        ready = getattr(loop, "_ready", None)  # the loop's run queue (CPython's loops)
        calm = 0
        while calm < SETTLED_ITERATIONS:
            await asyncio.sleep(0)
            calm = calm + 1 if ready is None or len(ready) == 0 else 0

    async def _autojump(self) -> None:
        while self.next_deadline() is not None:
            await self._settled()
            if self.autojump_threshold > 0:
                await asyncio.sleep(self.autojump_threshold)  # real seconds
                await self._settled()
            deadline = self.next_deadline()
            if deadline is not None:
                self.jumps += 1
                self.advance(max(0.0, deadline - self._now))
