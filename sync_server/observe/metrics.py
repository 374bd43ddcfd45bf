"""Prometheus metrics, in a registry of the server's own.

Not the global registry: tests run several servers in one process, and each
must count only its own traffic.

Two expositions: `/metrics` is public and coarse (commands by outcome,
patches, frames, timings: counts that say nothing of what a command was);
`/admin/metrics` adds the commands by op, behind the admin token, since a
count by op names what each version was, even one whose patch a viewer gets
empty.

The per-command and per-frame counts (commands by op and outcome, patches,
frames sent: about ten per command) are plain integer additions on the hot
path; `render` folds them into the Prometheus counters before each scrape.
A prometheus_client `Counter.inc` takes a lock and, with labels, a lookup
under another: ~3% of the server's time at 20 rooms x 8 clients. The
exposition is unchanged (same names, labels, values at scrape time). Every
use is on the event-loop thread, scrapes included (`web.py`), so the plain
counts need no lock.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

import rules

# Ops allowed as label values; anything else is counted as "other", so a
# client sending random op names cannot create unbounded label series.
KNOWN_OPS = frozenset(rules.OPS) | rules.USER_OPS | rules.LOG_OPS | rules.ADMIN_OPS


def op_label(op: object) -> str:
    return op if isinstance(op, str) and op in KNOWN_OPS else "other"


# The command latency histogram's bucket bounds (seconds).
COMMAND_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class PlainHistogram:
    """A histogram observed with one bisect and two additions (no lock: the
    event loop's thread only), exposed to Prometheus as the same series a
    prometheus_client `Histogram` gives (`_bucket`, `_count`, `_sum`).
    `Histogram.observe`, once per command, was the metrics' remaining cost
    (a lock and a Python loop over the bounds)."""

    def __init__(self, name: str, documentation: str, bounds: tuple[float, ...]) -> None:
        self.name, self.documentation, self.bounds = name, documentation, bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def collect(self) -> Iterator[HistogramMetricFamily]:
        buckets, total = [], 0
        for bound, n in zip((*map(floatToGoString, self.bounds), "+Inf"), self.counts, strict=True):
            total += n
            buckets.append((bound, total))
        yield HistogramMetricFamily(
            self.name, self.documentation, buckets=buckets, sum_value=self.sum
        )


class Metrics:
    """Every instrument of one server."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.rooms = Gauge("vtt_rooms", "Rooms that exist", registry=r)
        self.rooms_loaded = Gauge("vtt_rooms_loaded", "Rooms loaded in memory", registry=r)
        self.connections = Gauge("vtt_connections", "Authenticated connections", registry=r)
        self.commands = Counter("vtt_commands", "Commands by outcome", ["outcome"], registry=r)
        # By op: behind the admin token (`/admin/metrics`), in a registry of
        # its own. Public, a count by op tells a watcher what each version
        # was, an empty patch included (a player's view hides it).
        self.op_registry = CollectorRegistry(auto_describe=True)
        self.op_commands = Counter(
            "vtt_op_commands",
            "Commands by op and outcome (admin only)",
            ["op", "outcome"],
            registry=self.op_registry,
        )
        self.command_seconds = PlainHistogram(
            "vtt_command_seconds",
            "From a command's arrival to its ack or error",
            COMMAND_SECONDS_BUCKETS,
        )
        r.register(self.command_seconds)
        self.patches = Counter("vtt_patches", "Patches published (versions)", registry=r)
        self.frames_sent = Counter("vtt_frames_sent", "Frames written to clients", registry=r)
        self.commit_group = Histogram(
            "vtt_commit_group_jobs",
            "Write jobs committed per transaction (group commit)",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.slow_closes = Counter(
            "vtt_slow_consumer_closes", "Clients closed with 1013 (too slow)", registry=r
        )
        self.rate_limited = Counter(
            "vtt_rate_limited", "Frames refused by the rate limit", registry=r
        )
        self.http_requests = Counter(
            "vtt_http_requests", "HTTP API requests by route and status", ["route", "status"],
            registry=r,
        )  # fmt: skip
        self.room_pauses = Counter(
            "vtt_room_pauses",
            "Turns a room waited, past its share of the CPU while other rooms had work",
            registry=r,
        )
        self.room_pause_seconds = Counter(
            "vtt_room_pause_seconds", "Seconds rooms waited past their share of the CPU", registry=r
        )
        self.sse_streams = Gauge("vtt_sse_streams", "Open Server-Sent Events streams", registry=r)
        # Counted here, folded into the counters above by `fold`.
        self._commands: Tally[tuple[str, str]] = Tally()
        self._patches = 0
        self._frames_sent = 0

    def command(self, op: object, outcome: str, seconds: float) -> None:
        """One command answered (ack or error) after `seconds`."""
        self._commands[op_label(op), outcome] += 1
        self.command_seconds.observe(seconds)

    def http_request(self, route: str, status: int) -> None:
        """One HTTP API request answered (a stream: when it ends)."""
        self.http_requests.labels(route, str(status)).inc()

    def room_paused(self, seconds: float) -> None:
        """A room past its share of the CPU waits `seconds` (hosting/share.py)."""
        self.room_pauses.inc()
        self.room_pause_seconds.inc(seconds)

    def patch(self) -> None:
        self._patches += 1

    def frames(self, n: int) -> None:
        """`n` frames written to clients (an outbox's `on_sent`)."""
        self._frames_sent += n

    def fold(self) -> None:
        """Move the plain counts into the Prometheus counters."""
        outcomes: Tally[str] = Tally()
        for (op, outcome), n in self._commands.items():
            self.op_commands.labels(op, outcome).inc(n)
            outcomes[outcome] += n
        for outcome, n in outcomes.items():
            self.commands.labels(outcome).inc(n)
        self._commands.clear()
        if self._patches:
            self.patches.inc(self._patches)
            self._patches = 0
        if self._frames_sent:
            self.frames_sent.inc(self._frames_sent)
            self._frames_sent = 0

    def render(self) -> bytes:
        """The public exposition (`/metrics`): counts, no op names."""
        self.fold()
        return generate_latest(self.registry)

    def render_admin(self) -> bytes:
        """The admin's (`/admin/metrics`): the public one and the counts by op."""
        self.fold()
        return generate_latest(self.registry) + generate_latest(self.op_registry)
