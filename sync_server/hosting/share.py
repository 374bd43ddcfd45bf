"""Each room's share of the process's CPU, so that one room cannot starve the others.

One process serves many rooms on one event loop (and one interpreter lock).
A room whose commands are heavy and sent back to back keeps the loop busy
all the time. An example: a GM advancing the clock by a century and undoing
it, in a loop, in a room of 98 players who are each owed a snapshot. Every
other room's commands then wait behind its work, one slice after another. In
`bench.isolation_bench --load classes`, another room's median went from 1 to
12 ms and its p99 from 3 to 45 ms.

So each room's worker is metered. The CPU time its steps take is spent from
a `Budget`: its steps on the loop (`Metered`) and the evaluation of a big
room's commands in a thread (`metered_call`). The budget refills at `share`
seconds per second, up to `burst`. A room in debt waits before its next
item, but only while another room within its own budget has work
(`LoopShare`). A room alone on the node may use all of it (alone for a
while, it owes nothing for it later), and two heavy rooms never wait for
each other (the node would idle). A room of normal
play spends a few percent of its share: the wait is for a room that would
otherwise take the whole node.

This module does no I/O. `Budget`, `LoopShare` and `RoomMeter` take the times
they are given; the room host measures and sleeps. The meters read real
time, not the clock port, because they measure work done, not time passing:
`perf_counter` around each step on the loop, `thread_time` (the thread's
CPU time) around an evaluation in a thread, which shares the interpreter
with the loop and is not charged for waiting for it. The budget refills
with real time (`time.monotonic`), the unit it is spent in.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

import attrs

from sync_server.core.limits import OFF_LOOP_SWITCH_SECONDS, ROOM_DEBT_FORGIVEN_SECONDS

T = TypeVar("T")


@attrs.define
class Budget:
    """A room's CPU budget: `credit` seconds, refilled at `share` per
    second up to `burst` (full at the first use)."""

    share: float
    burst: float
    credit: float = 0.0
    at: float | None = None

    def refill(self, now: float) -> float:
        """The credit at `now`."""
        if self.at is None:
            self.credit = self.burst
        else:
            self.credit = min(self.burst, self.credit + max(0.0, now - self.at) * self.share)
        self.at = now
        return self.credit

    def spend(self, seconds: float, now: float) -> None:
        self.refill(now)
        self.credit -= seconds

    def pause(self, now: float, cap: float) -> float:
        """How long to wait before the next item (0: none): until the debt
        is paid back, at most `cap`."""
        credit = self.refill(now)
        return 0.0 if credit >= 0 else min(cap, -credit / self.share)


class LoopShare:
    """Which rooms within their budget had work lately. A room in debt
    waits only while another one did, within `window` seconds.

    Only the two most recent rooms are kept, because that is enough: the
    most recent room other than the one asking is one of them. A room that
    went into debt withdraws (`withdraw`); the answer may then miss an
    older room and say no where it could have said yes: never the reverse,
    so a room never waits for nobody."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._last: tuple[str | None, float] = (None, float("-inf"))
        self._prev: tuple[str | None, float] = (None, float("-inf"))

    def active(self, room: str, now: float) -> None:
        if self._last[0] == room:
            self._last = (room, now)
        else:
            self._prev, self._last = self._last, (room, now)

    def withdraw(self, room: str) -> None:
        """`room` is past its share: it no longer counts as having work."""
        if self._last[0] == room:
            self._last = (room, float("-inf"))
        elif self._prev[0] == room:
            self._prev = (room, float("-inf"))

    def others_active(self, room: str, now: float, window: float | None = None) -> bool:
        """Whether another room had work within `window` seconds (by
        default the share's)."""
        within = self.window if window is None else window
        return any(
            who is not None and who != room and now - at <= within
            for who, at in (self._last, self._prev)
        )


class RoomMeter:
    """One room's meter: what its worker spent since its last turn, its
    budget, and the share of the process it takes part in. `share` None:
    never waits (the meter still counts, for nothing)."""

    def __init__(
        self,
        room: str,
        loop_share: LoopShare,
        share: float | None,
        burst: float,
        max_pause: float,
        now: Callable[[], float] = time.monotonic,
        forgive_after: float = ROOM_DEBT_FORGIVEN_SECONDS,
    ) -> None:
        self.room = room
        self.forgive_after = forgive_after
        self.loop_share = loop_share
        self.budget = None if share is None or share <= 0 else Budget(share, burst)
        self.max_pause = max_pause
        self.now = now
        self.spent = 0.0

    def add(self, seconds: float) -> None:
        """CPU time the room's work took (a step of its worker, an
        evaluation in a thread while the worker awaits it)."""
        self.spent += seconds

    def submitted(self) -> None:
        """The room was given work: it counts as active for the others
        while it is within its budget."""
        if self.budget is None:
            return
        now = self.now()
        if self.budget.refill(now) >= 0:
            self.loop_share.active(self.room, now)

    def turn(self) -> float:
        """After an item: charge what it spent; how long to wait before
        the next one (0: go on)."""
        spent, self.spent = self.spent, 0.0
        if self.budget is None:
            return 0.0
        now = self.now()
        self.budget.spend(spent, now)
        if self.budget.credit >= 0:
            return 0.0
        self.loop_share.withdraw(self.room)
        if not self.loop_share.others_active(self.room, now):
            if not self.loop_share.others_active(self.room, now, self.forgive_after):
                # Alone on the node for a while: what it spent kept no room
                # waiting, so it is not owed (ROOM_DEBT_FORGIVEN_SECONDS).
                self.budget.credit = 0.0
            return 0.0
        return self.budget.pause(now, self.max_pause)


class Metered(Coroutine[Any, Any, T]):
    """A coroutine whose every step's duration is told to `spent`: what a
    task running it costs the event loop, which runs nothing else during a
    step. Timed by `perf_counter` (50 ns a reading, against 600 for the
    thread's CPU time, a system call): a step that waited for the
    interpreter lock is charged for the wait, a slight overcount."""

    __slots__ = ("_coro", "_spent")

    def __init__(self, coro: Coroutine[Any, Any, T], spent: Callable[[float], None]) -> None:
        self._coro = coro
        self._spent = spent

    def send(self, value: Any) -> Any:
        t = time.perf_counter()
        try:
            return self._coro.send(value)
        finally:
            self._spent(time.perf_counter() - t)

    def throw(self, *args: Any) -> Any:
        t = time.perf_counter()
        try:
            return self._coro.throw(*args)
        finally:
            self._spent(time.perf_counter() - t)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        return self

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        return self.send(None)


def metered_call(fn: Callable[..., T], spent: Callable[[float], None], *args: Any) -> T:
    """`fn(*args)`, its CPU time in the calling thread told to `spent`."""
    t = time.thread_time()
    try:
        return fn(*args)
    finally:
        spent(time.thread_time() - t)


class SwitchInterval:
    """The interpreter's switch interval, shortened while a room's command
    is evaluated in a thread (`sys.setswitchinterval`, process-wide: the
    count of such threads decides when it is restored).

    Why: the thread holds the interpreter lock in slices of the switch
    interval (5 ms by default), and every other room's next step on the
    event loop waits for the end of a slice: one command of another room
    takes several steps. At 1 ms the loop gets the lock back five times
    sooner; the cost, a lock hand-off per millisecond, is paid only while
    such a thread runs."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0.0

    def __enter__(self) -> None:
        with self._lock:
            if self._users == 0:
                self._saved = sys.getswitchinterval()
                if self.seconds < self._saved:
                    sys.setswitchinterval(self.seconds)
            self._users += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                sys.setswitchinterval(self._saved)


# Shortened while any heavy work runs in a thread: a room's command evaluated
# off the loop (room_host.py), an admin export read and encoded or an import
# parsed and checked (admin.py, admin_http.py). One instance: it counts them.
OFF_LOOP_SWITCH = SwitchInterval(OFF_LOOP_SWITCH_SECONDS)


class OpCosts:
    """What each op's evaluation has cost in one room (per command of its
    batch, CPU time): a batch goes off the event loop when one of its ops
    cost at least `heavy_seconds` lately, or was never evaluated here (its
    cost unknown). An op's figure is its worst, which fades by `fade` at
    each cheaper evaluation of it: an op heavy once (a century's advance
    over many patients) stays off the loop for a good many cheap ones
    after (a client cannot make a heavy command run on the loop by sending
    one cheap command of its kind first), and a one-off outlier (a garbage
    collection) does not send a cheap op off the loop for ever."""

    def __init__(self, heavy_seconds: float, fade: float = 0.95) -> None:
        self.heavy_seconds = heavy_seconds
        self.fade = fade
        self.worst: dict[Any, float] = {}

    def heavy(self, ops: list[Any]) -> bool:
        worst = self.worst
        return any(worst.get(_op_key(op), float("inf")) >= self.heavy_seconds for op in ops)

    def saw(self, ops: list[Any], seconds: float) -> None:
        """A batch of `ops` took `seconds` to evaluate."""
        if not ops:
            return
        each = seconds / len(ops)
        worst = self.worst
        for key in {_op_key(op) for op in ops}:
            before = worst.get(key)
            worst[key] = each if before is None else max(each, before * self.fade)


def _op_key(op: Any) -> Any:
    """An op's name as a key (a client's op may be anything: one that is
    no string is refused by the rules at once, and keyed as one)."""
    return op if isinstance(op, str) else "?"
