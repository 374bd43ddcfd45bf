"""The collector's tuning in a served process (sync_server/ops/serving.py):
the loop freezes the heap out of the collector's passes now and then, and
a thaw frees the cycles that died frozen."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from sync_server.clock import FakeClock
from sync_server.ops.serving import (
    FREEZE_SECONDS,
    THAW_SECONDS,
    keep_frozen,
    thaw,
)


class Node:
    """A container the collector tracks; two of them make a cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> Node:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a


def frozen(obj: object) -> bool:
    """Tracked, yet in no generation: in the permanent one."""
    return gc.is_tracked(obj) and not any(
        any(o is obj for o in gc.get_objects(g)) for g in range(3)
    )


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_a_thaw_frees_the_cycles_that_died_frozen(unfrozen: None) -> None:
    gone = cycle()
    watch = weakref.ref(gone)
    kept = cycle()
    gc.freeze()
    del gone  # a frozen cycle dies: no pass sees it while frozen
    gc.collect()
    assert watch() is not None
    thaw()
    assert watch() is None
    assert frozen(kept) and frozen(kept.other)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_loop_freezes_then_thaws(unfrozen: None) -> None:
    clock = FakeClock()
    task = asyncio.create_task(keep_frozen(clock))
    try:
        await settle()
        gone = cycle()
        watch = weakref.ref(gone)
        clock.advance(FREEZE_SECONDS)
        await settle()
        assert frozen(gone)
        assert not frozen(cycle())  # made after: walked by the next passes
        del gone
        clock.advance(THAW_SECONDS)
        await settle()
        assert watch() is None
    finally:
        task.cancel()
