"""Refusals: every way a command can be turned down, as the protocol's error
codes (docs/protocol.md, "Refusals").

A refusal is an exception so that a handler can stop at the first problem;
the engine works on a copy of the state, so a refused command changes nothing.
"""

from __future__ import annotations

from typing import Any


class Refused(Exception):
    """A command the rules turn down; `code` is one of the protocol's error
    codes (docs/protocol.md, "Refusals").

    `message` is the server's sentence (names spelled out); `key` and
    `values` say the same as data, for the affordances (rules/affordances.py):
    a client words the reason from its own table of texts (`reasons` in
    client_stub/web/events.json), with names it may show. `key` defaults to
    the code for refusals no affordance reports (argument checks).
    """

    code = "internal"

    def __init__(self, message: str, key: str | None = None, **values: Any) -> None:
        super().__init__(message)
        self.message = message
        self.key = key or self.code
        self.values = values

    def reason(self) -> dict[str, Any]:
        """The refusal as data: {"key": ..., **values} (an affordance's `why`)."""
        return {"key": self.key, **self.values}


class InvalidArgs(Refused):
    """Missing, extra, mistyped or out-of-range arguments."""

    code = "invalid_args"


class UnknownOp(Refused):
    code = "unknown_op"


class NotFound(Refused):
    code = "not_found"


class Forbidden(Refused):
    code = "forbidden"


class Conflict(Refused):
    code = "conflict"


class RuleBroken(Refused):
    """The rules forbid it (not enough PP, target is dead...)."""

    code = "rule"
