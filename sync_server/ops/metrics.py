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

from collections import Counter as Tally

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

import rules

# Ops allowed as label values; anything else is counted as "other", so a
# client sending random op names cannot create unbounded label series.
KNOWN_OPS = frozenset(rules.OPS) | rules.USER_OPS | rules.LOG_OPS | rules.ADMIN_OPS


def op_label(op: object) -> str:
    return op if isinstance(op, str) and op in KNOWN_OPS else "other"


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
        self.command_seconds = Histogram(
            "vtt_command_seconds",
            "From a command's arrival to its ack or error",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
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
