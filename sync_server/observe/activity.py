"""What an operator reads at INFO: sessions opened and closed, commands summarised.

One line per session opened (room, user, role, peer) and closed (the same,
its duration, its close code and who closed it); refused hellos are logged
by the session itself. Commands are far too many for a line each at INFO
(a busy table sends several a second), so each room's are counted and
written as one summary line per room every `summary_seconds` (and at
shutdown): how many of each op, by outcome. Each command is a DEBUG line.

Every line carries its facts as structured fields too (`event`, `room`,
`user`, ...), which the JSON log format writes as keys. Never a token:
only ids, roles and addresses reach this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from typing import Any

# The logger keeps the name it had under ops/: operators filter on it.
log = logging.getLogger("sync_server.ops.activity")


class Activity:
    """Session lines and command summaries for one server."""

    def __init__(self, summary_seconds: float = 60.0) -> None:
        self.summary_seconds = summary_seconds
        self._counts: dict[str, Counter[tuple[str, str]]] = {}
        self._timer: asyncio.TimerHandle | None = None

    # --- sessions ---------------------------------------------------------

    def session_opened(self, room: str | None, user: str, role: str, peer: str) -> None:
        where = f"room {room}" if room is not None else "no room"
        log.info(
            "session opened: %s, user %s (%s), from %s",
            where,
            user,
            role,
            peer,
            extra={"event": "session_opened", "room": room, "user": user, "role": role,
                   "peer": peer},
        )  # fmt: skip

    def session_closed(
        self,
        room: str | None,
        user: str,
        role: str,
        peer: str,
        seconds: float,
        code: int | None,
        reason: str,
        by: str,
    ) -> None:
        where = f"room {room}" if room is not None else "no room"
        why = f"{code}" if code is not None else "no close code"
        if reason:
            why += f" ({reason})"
        log.info(
            "session closed: %s, user %s (%s), from %s, after %.1f s: %s, by the %s",
            where,
            user,
            role,
            peer,
            seconds,
            why,
            by,
            extra={"event": "session_closed", "room": room, "user": user, "role": role,
                   "peer": peer, "seconds": round(seconds, 3), "code": code,
                   "reason": reason, "closed_by": by},
        )  # fmt: skip

    # --- commands -----------------------------------------------------------

    def command(self, room: str | None, user: str, op: Any, outcome: str) -> None:
        """One answered command: a DEBUG line, and a count for the summary."""
        name = op if isinstance(op, str) and len(op) <= 64 else "other"
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "room %s: %s %s -> %s",
                room,
                user,
                name,
                outcome,
                extra={"event": "command", "room": room, "user": user, "op": name,
                       "outcome": outcome},
            )  # fmt: skip
        if self.summary_seconds <= 0:
            return
        key = room if room is not None else ""
        self._counts.setdefault(key, Counter())[(name, outcome)] += 1
        if self._timer is None:
            with contextlib.suppress(RuntimeError):  # no running loop: flushed at close
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(self.summary_seconds, self.flush)

    def flush(self) -> None:
        """One INFO line per room with commands since the last flush."""
        self._timer = None
        counts, self._counts = self._counts, {}
        for room, counter in sorted(counts.items()):
            total = sum(counter.values())
            by_op: dict[str, dict[str, int]] = {}
            for (op, outcome), n in sorted(counter.items()):
                by_op.setdefault(op, {})[outcome] = n
            parts = ", ".join(f"{op} {n} {outcome}" for (op, outcome), n in counter.most_common())
            where = f"room {room}" if room else "admin"
            log.info(
                "commands, %s, last %g s: %d (%s)",
                where,
                self.summary_seconds,
                total,
                parts,
                extra={"event": "commands", "room": room or None, "total": total,
                       "seconds": self.summary_seconds, "counts": by_op},
            )  # fmt: skip

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.flush()
