"""The client's copy of a room: the welcome state plus every patch, in order."""

from __future__ import annotations

import copy
from typing import Any

from rules.patch import apply_ops  # the same replay the server's diffs are checked with

APPLIED, STALE, GAP = "applied", "stale", "gap"


class Mirror:
    """State + version. `feed(patch)` applies a patch that follows the current
    version, ignores one already seen, and buffers one from the future (a gap:
    the caller then asks the server for what it missed with `sync`)."""

    def __init__(self) -> None:
        self.state: dict[str, Any] | None = None
        self.version: int | None = None
        self._ahead: dict[int, dict[str, Any]] = {}

    @property
    def ready(self) -> bool:
        return self.state is not None and self.version is not None

    def reset(self, state: dict[str, Any], version: int) -> list[dict[str, Any]]:
        """Replace the whole state (welcome or snapshot); returns buffered
        patches that now apply on top of it."""
        self.state = copy.deepcopy(state)
        self.version = int(version)
        return self._drain()

    def feed(self, patch: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """Returns (status, applied patches in order)."""
        if not self.ready:
            return STALE, []
        v = int(patch["v"])
        assert self.version is not None
        if v <= self.version:
            return STALE, []
        if v > self.version + 1:
            self._ahead[v] = patch
            return GAP, []
        self._apply(patch)
        return APPLIED, [patch, *self._drain()]

    @property
    def has_gap(self) -> bool:
        return bool(self._ahead)

    def _apply(self, patch: dict[str, Any]) -> None:
        assert self.state is not None
        apply_ops(self.state, patch.get("ops") or [])
        self.version = int(patch["v"])

    def _drain(self) -> list[dict[str, Any]]:
        applied = []
        assert self.version is not None
        for v in sorted(self._ahead):
            if v <= self.version:
                del self._ahead[v]
            elif v == self.version + 1:
                patch = self._ahead.pop(v)
                self._apply(patch)
                applied.append(patch)
            else:
                break
        return applied
