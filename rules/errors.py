"""Refusals: every way a command can be turned down, as PROTOCOL.md's codes.

A refusal is an exception so that a handler can stop at the first problem;
the engine works on a copy of the state, so a refused command changes nothing.
"""

from __future__ import annotations


class Refused(Exception):
    """A command the rules turn down; `code` is one of PROTOCOL.md's error codes."""

    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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
