"""Argument checking: each op declares its arguments as data, and `check_args`
turns any mistyped, missing, extra or out-of-range argument into an
`invalid_args` refusal with a message a GM understands.

Every limit is a named constant with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from rules.errors import InvalidArgs
from rules.model import ABILITIES
from rules.model import SHOWN as SHOWN_LEVELS

MAX_NAME = 100  # names show in a tracker row; longer is a mistake or abuse
MAX_ID = 64  # ids travel in every patch path
MAX_AMOUNT = 1_000_000  # far above any real hit; bounds arithmetic and storage
MAX_LEVEL = 100  # levels above this are not a tabletop game any more
MAX_POOL = 1_000_000  # PV/PE/PP maxima
MIN_SCORE = 1  # a score of 0 is no living character: A2 would kill it at 0 Con damage
MAX_SCORE = 100  # ability scores
MAX_SKILL = 1_000  # medicine bonus, either sign
MAX_ADVANCE = 100 * 365 * 24 * 3600  # a century per clock jump; the scheduler is cheap anyway
MAX_ROUND_SECONDS = 3600  # a round longer than an hour is not a combat round
MAX_QUEUED_ROLLS = 100  # a GM's pre-rolled dice for the next checks; bounds the state
MAX_ORDER = 200  # combatants in one combat


@attrs.frozen
class Arg:
    """One argument: a checker returning the clean value, and whether it is required."""

    check: Callable[[str, Any], Any]
    required: bool = True
    default: Any = None


def _int(lo: int, hi: int) -> Callable[[str, Any], int]:
    def check(name: str, v: Any) -> int:
        # bool is an int subclass and floats are not counts: refuse both.
        if type(v) is not int:
            raise InvalidArgs(f"{name} must be an integer, not {_kind(v)}")
        if not lo <= v <= hi:
            raise InvalidArgs(f"{name} must be between {lo} and {hi}, got {v}")
        return v

    return check


def _str(lo: int, hi: int) -> Callable[[str, Any], str]:
    def check(name: str, v: Any) -> str:
        if type(v) is not str:
            raise InvalidArgs(f"{name} must be a string, not {_kind(v)}")
        if not lo <= len(v) <= hi:
            raise InvalidArgs(f"{name} must be {lo} to {hi} characters long")
        if any(ord(ch) < 32 for ch in v):
            raise InvalidArgs(f"{name} must not contain control characters")
        return v

    return check


def _bool(name: str, v: Any) -> bool:
    if type(v) is not bool:
        raise InvalidArgs(f"{name} must be true or false, not {_kind(v)}")
    return v


def _choice(*options: str) -> Callable[[str, Any], str]:
    def check(name: str, v: Any) -> str:
        if v not in options or type(v) is not str:
            raise InvalidArgs(f"{name} must be one of {', '.join(options)}")
        return v

    return check


def _list(item: Callable[[str, Any], Any], lo: int, hi: int) -> Callable[[str, Any], list]:
    def check(name: str, v: Any) -> list:
        if type(v) is not list:
            raise InvalidArgs(f"{name} must be a list, not {_kind(v)}")
        if not lo <= len(v) <= hi:
            raise InvalidArgs(f"{name} must hold {lo} to {hi} items")
        return [item(f"{name}[{i}]", x) for i, x in enumerate(v)]

    return check


def _abilities(lo: int, hi: int, partial: bool) -> Callable[[str, Any], dict[str, int]]:
    score = _int(lo, hi)

    def check(name: str, v: Any) -> dict[str, int]:
        if type(v) is not dict:
            raise InvalidArgs(f"{name} must be a map of {', '.join(ABILITIES)}")
        unknown = [k for k in v if k not in ABILITIES]
        if unknown:
            raise InvalidArgs(f"{name} has unknown abilities: {', '.join(map(str, unknown))}")
        missing = [a for a in ABILITIES if a not in v]
        if missing and not partial:
            raise InvalidArgs(f"{name} lacks {', '.join(missing)}")
        return {k: score(f"{name}.{k}", x) for k, x in v.items()}

    return check


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, float) and not math.isfinite(v):
        return "a non-finite number"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a decimal number",
        str: "a string",
        list: "a list",
        dict: "a map",
        bytes: "bytes",
    }.get(type(v), type(v).__name__)


def optional(check: Callable[[str, Any], Any], default: Any = None) -> Arg:
    return Arg(check, required=False, default=default)


# The argument kinds used by the op table.
ID = _str(1, MAX_ID)
NAME = _str(1, MAX_NAME)
AMOUNT = _int(0, MAX_AMOUNT)
BOOL = _bool
D20 = _int(1, 20)
LEVEL = _int(1, MAX_LEVEL)
POOL = _int(0, MAX_POOL)
PV_MAX = _int(1, MAX_POOL)
SKILL = _int(-MAX_SKILL, MAX_SKILL)
ABILITY = _choice(*ABILITIES)
ABILITY_SCORES = _abilities(MIN_SCORE, MAX_SCORE, partial=False)
ABILITY_SCORES_PARTIAL = _abilities(MIN_SCORE, MAX_SCORE, partial=True)
ABILITY_DAMAGE_PARTIAL = _abilities(0, MAX_SCORE, partial=True)
ROLE = _choice("gm", "player", "observer")
REST = _choice("short", "night", "bed")
CONDITION = _choice("conscious", "dying", "stable", "dead")
SHOWN = _choice(*SHOWN_LEVELS)
SECONDS = _int(1, MAX_ADVANCE)
ROUND_SECONDS = _int(1, MAX_ROUND_SECONDS)
ROUND = _int(1, 2**31)
ORDER = _list(ID, 1, MAX_ORDER)
ROLLS = _list(D20, 1, MAX_QUEUED_ROLLS)


def _nullable(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    def inner(name: str, v: Any) -> Any:
        return None if v is None else check(name, v)

    return inner


OWNER = _nullable(ID)

# update_character's `set` map: the fields a GM may correct, and their kinds.
CORRECTABLE: dict[str, Callable[[str, Any], Any]] = {
    "name": NAME,
    "owner": OWNER,
    "level": LEVEL,
    "pv": POOL,
    "pe": POOL,
    "pp": POOL,
    "pv_max": PV_MAX,
    "pe_max": POOL,
    "pp_max": POOL,
    "abilities": ABILITY_SCORES_PARTIAL,
    "ability_damage": ABILITY_DAMAGE_PARTIAL,
    "medicine": SKILL,
    "condition": CONDITION,
    "shown": SHOWN,
}


def _corrections(name: str, v: Any) -> dict[str, Any]:
    if type(v) is not dict or not v:
        raise InvalidArgs(f"{name} must be a non-empty map of fields to correct")
    unknown = [k for k in v if k not in CORRECTABLE]
    if unknown:
        raise InvalidArgs(
            f"{name} has fields that cannot be corrected: {', '.join(map(str, unknown))}"
            f" (allowed: {', '.join(CORRECTABLE)})"
        )
    return {k: CORRECTABLE[k](f"{name}.{k}", x) for k, x in v.items()}


CORRECTIONS = _corrections


def check_args(op: str, spec: dict[str, Arg], args: Any) -> dict[str, Any]:
    """Clean `args` against `spec`: every key known, every required one
    present, every value of its kind. Optional absent ones get defaults."""
    if type(args) is not dict:
        raise InvalidArgs(f"{op}: args must be a map, not {_kind(args)}")
    extra = [k for k in args if k not in spec]
    if extra:
        raise InvalidArgs(
            f"{op}: unknown argument(s) {', '.join(map(repr, extra))}"
            f" (expected: {', '.join(spec) or 'none'})"
        )
    clean: dict[str, Any] = {}
    for name, arg in spec.items():
        if name in args:
            value = args[name]
            if value is None and not arg.required:
                clean[name] = arg.default
            else:
                clean[name] = arg.check(name, value)
        elif arg.required:
            raise InvalidArgs(f"{op}: missing argument {name!r}")
        else:
            clean[name] = arg.default
    return clean
