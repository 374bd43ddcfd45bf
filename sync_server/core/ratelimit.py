"""Rate limits: token buckets, sans-I/O (the time is passed in).

docs/protocol.md, "Limits": player and observer sessions over 20 commands/s
(burst 40) get
`rate_limited` errors, not a disconnect; GM and admin sessions are
unlimited unless the server is started with a limit.

Two refinements over a bucket per connection:
- Buckets are per *user* (`Buckets`, keyed by room and user), shared by all
  of that user's sessions: sixteen connections of one player get one
  player's allowance, not sixteen.
- Requests are weighed by what they cost: a command costs 1; a hello, a
  `sync` or a resume costs 1 up front and then what its reply cost to send
  (`reply_cost`, by its encoded size), as a debt the bucket must refill
  before the next request.
"""

from __future__ import annotations

from collections.abc import Hashable

import attrs

# What a reply costs, in commands: one per this many bytes encoded for it.
# An ordinary command costs the server ~300 us; encoding and writing 8 KiB
# for one client costs about as much, so a welcome with a 40 KiB state (a
# 50-character room) weighs 5 commands, and a small room's almost nothing.
REPLY_BYTES_PER_COST = 8 * 1024

# Buckets kept before the full ones (equivalent to fresh ones) are dropped.
MAX_IDLE_BUCKETS = 10_000


def reply_cost(nbytes: int) -> float:
    """The extra cost of a welcome or sync reply of `nbytes` encoded."""
    return nbytes / REPLY_BYTES_PER_COST


@attrs.frozen
class RateSpec:
    """A rate (requests per second, sustained) and a burst (bucket size)."""

    rate: float
    burst: int

    @classmethod
    def parse(cls, text: str) -> RateSpec | None:
        """`"20"` (burst twice the rate), `"20/40"` (rate/burst), or
        `"0"` / `"none"` / `"off"` for no limit."""
        text = text.strip().lower()
        if text in ("0", "none", "off", "unlimited", ""):
            return None
        rate_s, _, burst_s = text.partition("/")
        rate = float(rate_s)
        burst = int(burst_s) if burst_s else max(1, int(rate * 2))
        if rate <= 0 or burst < 1:
            raise ValueError(f"bad rate {text!r}: use RATE or RATE/BURST, both positive")
        return cls(rate, burst)

    def __str__(self) -> str:
        return f"{self.rate:g}/{self.burst}"


@attrs.define
class TokenBucket:
    """Allows `burst` requests at once, refilled at `rate` per second. A
    request is allowed when at least one token is left; its cost may take
    the bucket below zero (a debt paid by waiting)."""

    spec: RateSpec
    tokens: float = attrs.field(default=None)
    last: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.tokens is None:
            self.tokens = float(self.spec.burst)

    def _refill(self, now: float) -> None:
        if self.last is not None:
            self.tokens = min(
                float(self.spec.burst), self.tokens + (now - self.last) * self.spec.rate
            )
        self.last = now

    def allow(self, now: float, cost: float = 1.0) -> bool:
        """Take `cost` tokens at time `now` (monotonic seconds); False (and
        nothing taken) when less than one token is left."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= cost
            return True
        return False

    def charge(self, now: float, cost: float) -> None:
        """Add the cost of what was just done (may leave a debt)."""
        self._refill(now)
        self.tokens -= cost

    def refund(self, now: float, cost: float) -> None:
        """Give back what `allow` took for a request that turned out not to
        count (a reservation: a hello that succeeded), never past `burst`."""
        self._refill(now)
        self.tokens = min(float(self.spec.burst), self.tokens + cost)

    def full(self, now: float) -> bool:
        self._refill(now)
        return self.tokens >= self.spec.burst


class Buckets:
    """One bucket per key (a room and user, a peer address), shared by every
    session of that key."""

    def __init__(self, spec: RateSpec) -> None:
        self.spec = spec
        self._buckets: dict[Hashable, TokenBucket] = {}

    def get(self, key: Hashable, now: float) -> TokenBucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_IDLE_BUCKETS:
                self._buckets = {k: b for k, b in self._buckets.items() if not b.full(now)}
            bucket = self._buckets[key] = TokenBucket(self.spec)
        return bucket

    def __len__(self) -> int:
        return len(self._buckets)
