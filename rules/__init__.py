"""vtt-sync's rules engine: a pure core.

    outcome = apply(room, op, args, actor, dice)

takes a room's state (`Room`), one command (an op name and its args map), the
acting user (`Actor`) and a dice source, and returns the new state, the
ordered events for the table's log and the command's result; and

    affordances(room, viewer, undo)

says what a viewer may send now (rules/affordances.py), from the same
checks. `apply` never mutates its input: a refused command raises a `Refused` (carrying one of
the protocol's error codes, docs/protocol.md, "Refusals") and the caller still holds the
unchanged state.
No asyncio, no I/O, no clock, no global random.
"""

from rules import schema
from rules.affordances import (
    RuleTable,
    UndoEntry,
    affordances,
    affordances_begin,
    affordances_for,
    affordances_of,
    nothing_to_undo,
)
from rules.dice import Dice, ScriptedDice, SeededDice, ServerDice
from rules.effects import Effect, EndSessions, IssueToken, RevokeToken
from rules.engine import (
    ADMIN_OPS,
    LOG_OPS,
    OPS,
    USER_OPS,
    Actor,
    Outcome,
    apply,
    authorize_undo,
    new_room,
)
from rules.errors import Conflict, Forbidden, InvalidArgs, NotFound, Refused, RuleBroken, UnknownOp
from rules.invariants import violations
from rules.model import Character, Room, from_dict, to_dict
from rules.patch import applied, apply_ops, diff, invert
from rules.revert import revert
from rules.view import (
    Viewer,
    patch_class,
    restricted,
    view_class,
    view_events,
    view_ops,
    view_patch,
    view_state,
)

__all__ = [
    "ADMIN_OPS",
    "LOG_OPS",
    "OPS",
    "USER_OPS",
    "Actor",
    "Character",
    "Conflict",
    "Dice",
    "Effect",
    "EndSessions",
    "Forbidden",
    "InvalidArgs",
    "IssueToken",
    "NotFound",
    "Outcome",
    "Refused",
    "RevokeToken",
    "Room",
    "RuleTable",
    "RuleBroken",
    "ScriptedDice",
    "SeededDice",
    "ServerDice",
    "UndoEntry",
    "UnknownOp",
    "Viewer",
    "affordances",
    "affordances_begin",
    "affordances_for",
    "affordances_of",
    "apply",
    "applied",
    "apply_ops",
    "authorize_undo",
    "diff",
    "from_dict",
    "invert",
    "new_room",
    "nothing_to_undo",
    "patch_class",
    "restricted",
    "revert",
    "schema",
    "to_dict",
    "view_class",
    "view_events",
    "view_ops",
    "view_patch",
    "view_state",
    "violations",
]
