"""The clock port's fake (sync_server/clock.py): time moves only
when told (`advance`), or, with `autojump_threshold`, by itself to the next
deadline once every task waits (trio's `MockClock` semantics)."""

from __future__ import annotations

import asyncio
import time

import pytest

from sync_server.clock import FakeClock, SystemClock


async def test_advance_wakes_the_sleepers_due_in_deadline_order() -> None:
    clock = FakeClock(start=0.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.monotonic()))

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("late", 20), ("soon", 10))]
    await asyncio.sleep(0)
    clock.advance(15)
    await asyncio.sleep(0)
    assert woke == [("soon", 15.0)] and not tasks[0].done()
    clock.advance(5)
    await asyncio.gather(*tasks)
    assert woke == [("soon", 15.0), ("late", 20.0)]


async def test_a_timeout_expires_at_its_fake_deadline_not_before() -> None:
    clock = FakeClock(start=0.0)
    never = asyncio.Event()

    async def bounded() -> None:
        async with clock.timeout(30):
            await never.wait()

    task = asyncio.create_task(bounded())
    await asyncio.sleep(0)
    clock.advance(29.9)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.1)
    with pytest.raises(TimeoutError):
        await task
    async with clock.timeout(None):  # no bound at all
        await asyncio.sleep(0)
    async with clock.timeout(5):  # a block done in time leaves no timer behind
        pass
    assert clock.next_deadline() is None


async def test_without_autojump_time_stands_still() -> None:
    clock = FakeClock(start=0.0)
    with pytest.raises(TimeoutError):
        async with SystemClock().timeout(0.05):  # real time: a bound on the test only
            await clock.sleep(1)
    assert clock.monotonic() == 0.0 and clock.jumps == 0


async def test_autojump_moves_to_each_deadline_once_every_task_waits() -> None:
    clock = FakeClock(start=0.0, autojump_threshold=0)
    seen: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        seen.append((name, clock.monotonic()))

    await asyncio.gather(sleeper("hour", 3600), sleeper("minute", 60), sleeper("day", 86400))
    assert seen == [("minute", 60.0), ("hour", 3600.0), ("day", 86400.0)]
    assert clock.jumps == 3
    with pytest.raises(TimeoutError):
        async with clock.timeout(10):
            await asyncio.Event().wait()
    assert clock.monotonic() == 86410.0


async def test_autojump_waits_while_any_task_can_run() -> None:
    """A task that keeps working (yielding, never waiting) holds time still:
    the sleeper wakes only after it is done."""
    clock = FakeClock(start=0.0, autojump_threshold=0)
    steps = 0

    async def busy() -> None:
        nonlocal steps
        for _ in range(500):
            steps += 1
            await asyncio.sleep(0)

    async def sleeper() -> int:
        await clock.sleep(1)
        return steps

    worker = asyncio.create_task(busy())
    assert await sleeper() == 500
    await worker


async def test_a_cancelled_sleep_is_no_deadline_to_jump_to() -> None:
    clock = FakeClock(start=0.0, autojump_threshold=0)
    gone = asyncio.create_task(clock.sleep(100))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    await clock.sleep(10)
    assert clock.monotonic() == 10.0


async def test_a_threshold_lets_real_work_in_flight_finish_before_time_jumps() -> None:
    """With a threshold, a wait on a thread (real I/O, say) that ends well
    within it is not overtaken by the fake timeout around it."""
    clock = FakeClock(start=0.0, autojump_threshold=0.5)
    async with clock.timeout(5):
        await asyncio.to_thread(time.sleep, 0.001)
    assert clock.monotonic() == 0.0
    await clock.sleep(7)  # and then time does jump, to the sleep's deadline
    assert clock.monotonic() == 7.0


# Where the server reads real time around the port, on purpose, and why
# (docs/architecture.md, the seams: time). Anywhere else, a wait or a
# timestamp goes through a `Clock`, so a test moves it without sleeping.
REAL_TIME_ON_PURPOSE = {
    # The storage thread's group-commit window: a thread's wait for more
    # commits to join the group, off the event loop.
    "sync_server/storage/sqlite.py",
    # Each room's share of the CPU: metered by the time its steps take and
    # refilled in real time, the unit the CPU is spent in; the host's pause
    # and its meter around a step.
    "sync_server/hosting/share.py",
    "sync_server/hosting/room_host.py",
    # The node-id watch: another process's heartbeat in the database, which
    # a fake clock cannot move.
    "sync_server/cluster/pg_leases.py",
}
TIME_READS = {
    "time": {"time", "monotonic", "perf_counter", "thread_time", "process_time", "sleep",
             "time_ns", "monotonic_ns"},
    "asyncio": {"sleep", "timeout", "timeout_at", "wait_for"},
    "datetime": {"now", "utcnow", "today"},
}  # fmt: skip


def test_the_server_reads_time_through_the_clock_port() -> None:
    """No module of the server reads the time or waits on its own (bar the
    places named above, and `asyncio.sleep(0)`, a yield): it asks its
    `Clock` (sync_server/clock.py holds the only real one)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = []
    for path in sorted((root / "sync_server").rglob("*.py")):
        rel = str(path.relative_to(root))
        if rel == "sync_server/clock.py" or rel in REAL_TIME_ON_PURPOSE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        yields = {
            id(node.func)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == 0
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or id(node) in yields:
                continue
            owner = node.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if node.attr in TIME_READS.get(name, ()) or (name == "loop" and node.attr == "time"):
                found.append(f"{rel}:{node.lineno}: {name}.{node.attr}")
    assert found == []
