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
from rules.patch import FORBIDDEN_KEYS

MAX_NAME = 100  # names show in a tracker row; longer is a mistake or abuse
MAX_ID = 64  # ids travel in every patch path
MAX_AMOUNT = 1_000_000  # far above any real hit; bounds arithmetic and storage

# The sheet's maxima (docs/rules.md, "Bounds"): values a real table uses, with
# a wide margin, so that a typo (or a script) cannot make a sheet no game has.
# Starfinder and Pathfinder stop at level 20; epic and house-ruled campaigns
# go somewhat past it.
MAX_LEVEL = 40
# The toughest published creatures (Pathfinder's Tarrasque, 525 HP; the
# CR 25 bosses of Starfinder, about 700) have hundreds of hit points, and a
# level-20 character's Stamina is of the same order: ten times that.
MAX_PV = 10_000
MAX_PE = 10_000
# Starfinder's Resolve at level 20 is about 20 (half the level plus the key
# ability's modifier). Since T2 collapses repeated D5 losses, PP no longer
# drive the cost of a clock advance; this bound is only what a table needs.
MAX_PP = 100

# The room's size (docs/rules.md, "Bounds"). A table is a GM, a handful of
# players and some dozens of foes and NPCs per scene; a room keeps its cast
# between scenes. 200 characters is also MAX_ORDER, so that every character
# may join one combat. The cost of the heaviest command (a clock advance with
# every character stable and tended: bench/rules_bench.py) follows this.
MAX_CHARACTERS = 200
# Users: a GM and a few players, and observers (a club watching, a streamed
# game's guests); the users map travels in every welcome.
MAX_USERS = 100
# Events one command may emit. Within the bounds above a command emits at
# most 19 per character (a clock advance: eight hourly checks, each with its
# healer's roll, then the wake-up and the end of tending) plus a handful, so
# this refuses only a room built past them (a state stored by an older
# version); it bounds the patch every client receives and the work done.
MAX_EVENTS = 5_000

MIN_SCORE = 1  # a score of 0 is no living character: A2 would kill it at 0 Con damage
MAX_SCORE = 100  # ability scores
MAX_SKILL = 1_000  # medicine bonus, either sign
MAX_ADVANCE = 100 * 365 * 24 * 3600  # a century per clock jump; the scheduler is cheap anyway
MAX_ROUND_SECONDS = 3600  # a round longer than an hour is not a combat round
MAX_QUEUED_ROLLS = 100  # a GM's pre-rolled dice for the next checks; bounds the state
MAX_ORDER = 200  # combatants in one combat
MAX_CLOCK = 2**63 - 1  # world seconds: the largest integer both encodings carry


@attrs.frozen
class Arg:
    """One argument: a checker returning the clean value, and whether it is required."""

    check: Callable[[str, Any], Any]
    required: bool = True
    default: Any = None


@attrs.frozen
class Kind:
    """An argument kind: a checker (`kind(name, value)` returns the clean value
    or raises InvalidArgs) that also says what it accepts, so the reference
    (docs/operations.md) and `vtt-sync client cmd OP --help` are read from the
    very objects that check, and cannot drift from them."""

    check: Callable[[str, Any], Any] = attrs.field(repr=False)
    type: str  # "integer", "text", "id", "boolean", "choice", "list", "map"
    lo: int | None = None  # integers: smallest value; text and lists: shortest length
    hi: int | None = None
    options: tuple[str, ...] = ()  # choices; for maps, their keys
    item: Kind | None = None  # lists and maps: the kind of each item
    nullable: bool = False
    note: str = ""  # what a bare range cannot say ("all six required")

    def __call__(self, name: str, v: Any) -> Any:
        return self.check(name, v)

    def describe(self) -> str:
        """The accepted values in a few words, e.g. "integer 0 to 1000000"."""
        if self.type == "integer":
            text = f"integer {self.lo} to {self.hi}"
        elif self.type in ("text", "id"):
            text = f"{self.type}, {self.lo} to {self.hi} characters"
        elif self.type == "boolean":
            text = "true or false"
        elif self.type == "choice":
            text = "one of " + ", ".join(self.options)
        elif self.type == "list":
            assert self.item is not None
            text = f"list of {self.lo} to {self.hi} items, each {self.item.describe()}"
        elif self.type == "map" and not self.options:
            assert self.item is not None
            text = f"map of up to {self.hi} character ids, each to {self.item.describe()}"
        elif self.type == "map":
            text = "map of " + ", ".join(self.options)
            if self.item is not None:
                text += f" (each {self.item.describe()})"
        else:
            text = self.type
        if self.note:
            text += f"; {self.note}"
        if self.nullable:
            text += "; or null"
        return text


def _int(lo: int, hi: int) -> Kind:
    def check(name: str, v: Any) -> int:
        # bool is an int subclass and floats are not counts: refuse both.
        if type(v) is not int:
            raise InvalidArgs(f"{name} must be an integer, not {_kind(v)}")
        if not lo <= v <= hi:
            raise InvalidArgs(f"{name} must be between {lo} and {hi}, got {v}")
        return v

    return Kind(check, "integer", lo, hi)


def _str(lo: int, hi: int, type_: str = "text") -> Kind:
    def check(name: str, v: Any) -> str:
        if type(v) is not str:
            raise InvalidArgs(f"{name} must be a string, not {_kind(v)}")
        if not lo <= len(v) <= hi:
            raise InvalidArgs(f"{name} must be {lo} to {hi} characters long")
        if any(ord(ch) < 32 for ch in v):
            raise InvalidArgs(f"{name} must not contain control characters")
        if type_ == "id" and v in FORBIDDEN_KEYS:
            # ids travel in patch paths, where clients refuse these names
            raise InvalidArgs(f"{name} {v!r} is reserved; choose another id")
        return v

    return Kind(check, type_, lo, hi)


def _check_bool(name: str, v: Any) -> bool:
    if type(v) is not bool:
        raise InvalidArgs(f"{name} must be true or false, not {_kind(v)}")
    return v


_bool = Kind(_check_bool, "boolean")


def _choice(*options: str) -> Kind:
    def check(name: str, v: Any) -> str:
        if v not in options or type(v) is not str:
            raise InvalidArgs(f"{name} must be one of {', '.join(options)}")
        return v

    return Kind(check, "choice", options=options)


def _list(item: Kind, lo: int, hi: int) -> Kind:
    def check(name: str, v: Any) -> list[Any]:
        if type(v) is not list:
            raise InvalidArgs(f"{name} must be a list, not {_kind(v)}")
        if not lo <= len(v) <= hi:
            raise InvalidArgs(f"{name} must hold {lo} to {hi} items")
        return [item(f"{name}[{i}]", x) for i, x in enumerate(v)]

    return Kind(check, "list", lo, hi, item=item)


def _abilities(lo: int, hi: int, partial: bool) -> Kind:
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

    note = "any of them" if partial else "all six"
    return Kind(check, "map", options=ABILITIES, item=score, note=note)


def _by_char(item: Kind, hi: int) -> Kind:
    """A map from character ids to values of `item` (a value per character)."""

    def check(name: str, v: Any) -> dict[str, Any]:
        if type(v) is not dict:
            raise InvalidArgs(f"{name} must be a map of character ids, not {_kind(v)}")
        if len(v) > hi:
            raise InvalidArgs(f"{name} must hold at most {hi} characters")
        return {ID(f"{name} key", k): item(f"{name}.{k}", x) for k, x in v.items()}

    return Kind(check, "map", hi=hi, item=item)


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
ID = _str(1, MAX_ID, "id")
NAME = _str(1, MAX_NAME)
AMOUNT = _int(0, MAX_AMOUNT)
BOOL = _bool
D20 = _int(1, 20)
LEVEL = _int(1, MAX_LEVEL)
PV = _int(0, MAX_PV)
PV_MAX = _int(1, MAX_PV)  # a character with no PV at all cannot be conscious
PE = _int(0, MAX_PE)
PP = _int(0, MAX_PP)
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
CLOCK = _int(0, MAX_CLOCK)
TURN = _int(0, MAX_ORDER)  # a place in the combat order, or one past its end
ROLLS = _list(D20, 1, MAX_QUEUED_ROLLS)
CHAR_IDS = _list(ID, 1, MAX_ORDER)  # characters an op acts on at once (initiative)
BONUSES = _by_char(SKILL, MAX_ORDER)  # a bonus per character (initiative, T4)
D20S = _by_char(D20, MAX_ORDER)  # a natural d20 per character, the GM's own dice (X1)


def _nullable(kind: Kind) -> Kind:
    def inner(name: str, v: Any) -> Any:
        return None if v is None else kind(name, v)

    return attrs.evolve(kind, check=inner, nullable=True)


OWNER = _nullable(ID)

# update_character's `set` map: the fields a GM may correct, and their kinds.
CORRECTABLE: dict[str, Kind] = {
    "name": NAME,
    "owner": OWNER,
    "level": LEVEL,
    "pv": PV,
    "pe": PE,
    "pp": PP,
    "pv_max": PV_MAX,
    "pe_max": PE,
    "pp_max": PP,
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


CORRECTIONS = Kind(
    _corrections, "map", options=tuple(CORRECTABLE), note="one or more of these fields"
)


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
    # Every missing argument at once: a GM typing add_character should learn
    # of all seven required ones in one answer, not one per attempt.
    missing = [name for name, arg in spec.items() if arg.required and name not in args]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise InvalidArgs(f"{op}: missing argument{plural} {', '.join(map(repr, missing))}")
    clean: dict[str, Any] = {}
    for name, arg in spec.items():
        if name in args:
            value = args[name]
            if value is None and not arg.required:
                clean[name] = arg.default
            else:
                clean[name] = arg.check(name, value)
        else:
            clean[name] = arg.default
    return clean
