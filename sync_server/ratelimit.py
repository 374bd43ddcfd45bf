"""Per-connection rate limit: a token bucket, sans-I/O (the clock is passed in).

PROTOCOL.md: player and observer sessions over 20 commands/s (burst 40) get
`rate_limited` errors, not a disconnect; GM and admin sessions are
unlimited unless the server is started with a limit.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class RateSpec:
    """A rate (frames per second, sustained) and a burst (bucket size)."""

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
    """Allows `burst` frames at once, refilled at `rate` per second."""

    spec: RateSpec
    tokens: float = attrs.field(default=None)
    last: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.tokens is None:
            self.tokens = float(self.spec.burst)

    def allow(self, now: float) -> bool:
        """Take one token at time `now` (monotonic seconds); False when empty."""
        if self.last is not None:
            self.tokens = min(
                float(self.spec.burst), self.tokens + (now - self.last) * self.spec.rate
            )
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False
