"""Issue 19, item 3: one GM, or one player, must not exhaust a node.
Every bound here is a named limit (sync_server/core/limits.py,
docs/security.md); the costs they bound are measured by the benchmarks
(bench/isolation_bench.py, bench/memory_bench.py), never timed here."""

from __future__ import annotations

from sync_server.core.auth import RecentTokens
from sync_server.hosting.clock import FakeClock


def test_recent_tokens_are_pruned_in_expiry_order_and_capped() -> None:
    """A rotate_token loop: the map stays at its cap (the oldest go first),
    expired entries leave from the front, a recent one is still recalled."""
    clock = FakeClock()
    recent = RecentTokens(600.0, clock.monotonic, max_items=100)
    for i in range(1_000):
        recent.remember(("r1", "u1", f"c{i}"), "token", f"t{i}")
    assert len(recent) == 100
    assert recent.recall(("r1", "u1", "c0")) is None  # past the cap: gone
    assert recent.recall(("r1", "u1", "c999")) == ("token", "t999")
    clock.advance(599.0)
    recent.remember(("r1", "u1", "late"), "token", "late")
    assert len(recent) == 100  # nothing expired yet: the cap held it
    clock.advance(2.0)  # the first 99 expire; "late" does not
    recent.remember(("r1", "u1", "later"), "token", "later")
    assert len(recent) == 2
    assert recent.recall(("r1", "u1", "late")) == ("token", "late")
    assert recent.recall(("r1", "u1", "c999")) is None


def test_a_remembered_token_remembered_again_moves_to_the_end() -> None:
    clock = FakeClock()
    recent = RecentTokens(10.0, clock.monotonic, max_items=3)
    for key in ("a", "b", "c"):
        recent.remember(("r", "u", key), "token", key)
    recent.remember(("r", "u", "a"), "token", "a2")  # a is the newest now
    recent.remember(("r", "u", "d"), "token", "d")  # the cap drops b, the oldest
    assert recent.recall(("r", "u", "b")) is None
    assert recent.recall(("r", "u", "a")) == ("token", "a2")
    assert len(recent) == 3
