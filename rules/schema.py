"""The schema of a room's state: what each field of the dict form may hold.

`rules.validate` checks a command's arguments and `rules.invariants` the
relations between a character's numbers; this module checks the shape a
state arrives in from outside the engine (a room file, an undo's stored
inverse): every key known, every value of its type and in its range, ids
that are ids, roles that are a room's roles (never `admin`), and derived
fields (`mods`, `pe_max`) equal to what the rules compute from the rest,
never trusted. It also checks an op's path and value against the state it
would change, so that a crafted op (`["set", ["__proto__", "x"], 1]`, a
map where an integer belongs) is refused before it is stored or served.

Pure: plain dicts in, a list of problems out (each names its path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from rules.model import (
    ABILITIES,
    CONDITIONS,
    REST_KINDS,
    ROLES,
    SHOWN,
    STABILITY_CHECKS,
    ability_mod,
)
from rules.patch import FORBIDDEN_KEYS
from rules.validate import (
    MAX_CHARACTERS,
    MAX_CLOCK,
    MAX_ID,
    MAX_LEVEL,
    MAX_NAME,
    MAX_ORDER,
    MAX_PE,
    MAX_PP,
    MAX_PV,
    MAX_QUEUED_ROLLS,
    MAX_ROUND_SECONDS,
    MAX_SCORE,
    MAX_SKILL,
    MAX_USERS,
    MIN_SCORE,
)

# Counters that only grow (character seq, next user number, stability
# checks): far above what a room reaches, and an integer every encoding and
# every JavaScript number carries exactly.
MAX_COUNTER = 2**53 - 1
# The combat round: the same bound as set_order's `round` argument.
MAX_ROUND = 2**31
# World seconds the rules compute from the clock (a rest's end, the next PP
# loss): a little past MAX_CLOCK at most; bounded where msgpack's unsigned
# 64-bit integers end.
MAX_WORLD_SECOND = 2**64 - 1

# An initiative total (T4): a d20, a Dexterity modifier (at most MAX_SCORE
# away from 0) and a bonus (a skill's bound).
INITIATIVE_BOUND = 20 + MAX_SCORE + MAX_SKILL

Check = Callable[[Any], str | None]


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a map"}.get(type(v), type(v).__name__)  # fmt: skip


def integer(lo: int, hi: int) -> Check:
    def check(v: Any) -> str | None:
        if type(v) is not int:
            return f"must be an integer, not {_kind(v)}"
        if not lo <= v <= hi:
            return f"must be between {lo} and {hi}, got {v}"
        return None

    return check


def text(lo: int, hi: int, *, controls: bool = False) -> Check:
    def check(v: Any) -> str | None:
        if type(v) is not str:
            return f"must be a string, not {_kind(v)}"
        if not lo <= len(v) <= hi:
            return f"must be {lo} to {hi} characters long"
        if not controls and any(ord(ch) < 32 or ord(ch) == 127 for ch in v):
            return "must not contain control characters"
        return None

    return check


def ident(v: Any) -> str | None:
    """An id (a user's, a character's, the room's): it travels in patch paths."""
    problem = text(1, MAX_ID)(v)
    if problem is None and v in FORBIDDEN_KEYS:
        return f"{v!r} is not allowed as an id"
    return problem


def boolean(v: Any) -> str | None:
    return None if type(v) is bool else f"must be true or false, not {_kind(v)}"


def choice(*options: str) -> Check:
    def check(v: Any) -> str | None:
        if type(v) is not str or v not in options:
            return f"must be one of {', '.join(options)}"
        return None

    return check


def nullable(inner: Check) -> Check:
    def check(v: Any) -> str | None:
        return None if v is None else inner(v)

    return check


def list_of(item: Check, lo: int, hi: int) -> Check:
    def check(v: Any) -> str | None:
        if type(v) is not list:
            return f"must be a list, not {_kind(v)}"
        if not lo <= len(v) <= hi:
            return f"must hold {lo} to {hi} items"
        for i, x in enumerate(v):
            problem = item(x)
            if problem is not None:
                return f"[{i}] {problem}"
        return None

    return check


# --- nodes: what a path may reach ---------------------------------------------


@attrs.frozen
class Leaf:
    """A value set whole (scalars and lists: ops never reach inside them)."""

    check: Check


@attrs.frozen
class Record:
    """A map with known keys (a character, the room): `optional` keys may be
    absent (a state stored by an older version lacks them; the model gives
    them their defaults)."""

    fields: dict[str, Leaf | Record | Table | Nullable]
    optional: frozenset[str] = frozenset()
    # A check of the whole record once its fields are fine (derived fields).
    whole: Callable[[dict[str, Any]], list[str]] | None = None


@attrs.frozen
class Table:
    """A map of ids to items (users, characters, initiative totals), at
    most `most` of them."""

    item: Leaf | Record
    most: int


@attrs.frozen
class Nullable:
    """null, or a record (the combat, a rest in progress)."""

    inner: Record


Node = Leaf | Record | Table | Nullable


def _abilities(lo: int, hi: int) -> Record:
    return Record({a: Leaf(integer(lo, hi)) for a in ABILITIES})


def _character_whole(c: dict[str, Any]) -> list[str]:
    """Derived fields are what the rules compute from the rest (model.py)."""
    out: list[str] = []
    damage = c.get("ability_damage") or dict.fromkeys(ABILITIES, 0)
    if "pe_max_base" in c:
        want = max(0, c["pe_max_base"] - c["level"] * (damage["con"] // 2))
        if c["pe_max"] != want:
            out.append(
                f"pe_max is {c['pe_max']}, but pe_max_base, level and Constitution "
                f"damage give {want}"
            )
    if "mods" in c:
        want_mods = {a: ability_mod(c["abilities"][a], damage[a]) for a in ABILITIES}
        if c["mods"] != want_mods:
            out.append(f"mods are not what the abilities and their damage give ({want_mods})")
    return out


SECOND = integer(0, MAX_WORLD_SECOND)

ACTIVITY = Record({"kind": Leaf(choice(*REST_KINDS)), "ends": Leaf(SECOND)})

# L1's next check (derived: `Character.next_check_dict`). Its shape is checked,
# not its value: like `mods` it is recomputed, never read back, and an inverse
# stored before the field existed (a room upgraded since, then undone or
# exported) restores the fields it follows without it.
NEXT_CHECK = Record(
    {
        "at": Leaf(SECOND),
        "n": Leaf(integer(1, STABILITY_CHECKS)),
        "of": Leaf(integer(STABILITY_CHECKS, STABILITY_CHECKS)),
    }
)

CHARACTER = Record(
    {
        "seq": Leaf(integer(1, MAX_COUNTER)),
        "name": Leaf(text(1, MAX_NAME)),
        "owner": Leaf(nullable(ident)),
        "shown": Leaf(choice(*SHOWN)),
        "level": Leaf(integer(1, MAX_LEVEL)),
        "pv": Leaf(integer(0, MAX_PV)),
        "pv_max": Leaf(integer(1, MAX_PV)),
        "pe": Leaf(integer(0, MAX_PE)),
        "pe_max": Leaf(integer(0, MAX_PE)),
        "pp": Leaf(integer(0, MAX_PP)),
        "pp_max": Leaf(integer(0, MAX_PP)),
        "pe_max_base": Leaf(integer(0, MAX_PE)),
        "abilities": _abilities(MIN_SCORE, MAX_SCORE),
        "ability_damage": _abilities(0, MAX_SCORE),
        # mods are derived; their range is what the scores allow (checked whole)
        "mods": _abilities(-MAX_SCORE, MAX_SCORE),
        "medicine": Leaf(integer(-MAX_SKILL, MAX_SKILL)),
        "condition": Leaf(choice(*CONDITIONS)),
        "nonlethal": Leaf(boolean),
        "stable_since": Leaf(nullable(SECOND)),
        "stability_checks": Leaf(integer(0, MAX_COUNTER)),
        "next_check": Nullable(NEXT_CHECK),
        "healer": Leaf(nullable(ident)),
        "activity": Nullable(ACTIVITY),
        "regained_this_turn": Leaf(boolean),
        "dying_next": Leaf(nullable(SECOND)),
        "dying_fresh": Leaf(boolean),
        "regained_at": Leaf(nullable(SECOND)),
    },
    # model.Character.from_dict gives these their defaults
    optional=frozenset(
        [
            "shown",
            "pe_max_base",
            "ability_damage",
            "mods",
            "condition",
            "nonlethal",
            "stable_since",
            "stability_checks",
            "next_check",
            "healer",
            "activity",
            "regained_this_turn",
            "dying_next",
            "dying_fresh",
            "regained_at",
        ]
    ),
    whole=_character_whole,
)

# A room's users are its GM(s), players and observers: never the server's
# admin (model.ROLES), whatever a file says.
USER = Record({"name": Leaf(text(1, MAX_NAME)), "role": Leaf(choice(*ROLES))})

COMBAT = Record(
    {
        "order": Leaf(list_of(ident, 1, MAX_ORDER)),
        "turn": Leaf(integer(0, MAX_ORDER - 1)),
        "round": Leaf(integer(1, MAX_ROUND)),
    }
)

CHARACTERS = Table(CHARACTER, MAX_CHARACTERS)

STATE = Record(
    {
        "room": Leaf(ident),
        # a room's name comes from create_room or update_room (NAME)
        "name": Leaf(text(1, MAX_NAME, controls=True)),
        "clock": Leaf(integer(0, MAX_CLOCK)),
        "round_seconds": Leaf(integer(1, MAX_ROUND_SECONDS)),
        "combat": Nullable(COMBAT),
        "skip_dead": Leaf(boolean),
        # T4: d20 + Dexterity modifier + a bonus, per combatant who rolled
        "initiative": Table(Leaf(integer(-INITIATIVE_BOUND, INITIATIVE_BOUND)), MAX_ORDER),
        "queued_rolls": Leaf(list_of(integer(1, 20), 0, MAX_QUEUED_ROLLS)),
        "users": Table(USER, MAX_USERS),
        "characters": CHARACTERS,
        "next_seq": Leaf(integer(1, MAX_COUNTER)),
        "next_user": Leaf(integer(1, MAX_COUNTER)),
    },
    # model.Room.from_dict gives these their defaults
    optional=frozenset(
        [
            "clock",
            "round_seconds",
            "combat",
            "skip_dead",
            "initiative",
            "queued_rolls",
            "users",
            "characters",
            "next_seq",
            "next_user",
        ]
    ),
)


def _where(path: list[Any]) -> str:
    return ".".join(str(p) for p in path) or "the state"


def node_problems(node: Node, value: Any, path: list[Any]) -> list[str]:
    """Every problem of `value` as the content of `node` (at `path`)."""
    if isinstance(node, Leaf):
        problem = node.check(value)
        return [] if problem is None else [f"{_where(path)} {problem}"]
    if isinstance(node, Nullable):
        return [] if value is None else node_problems(node.inner, value, path)
    if type(value) is not dict:
        return [f"{_where(path)} must be a map, not {_kind(value)}"]
    if isinstance(node, Table):
        out: list[str] = []
        if len(value) > node.most:
            out.append(f"{_where(path)} holds {len(value)} entries, at most {node.most}")
        for key, item in value.items():
            problem = ident(key)
            if problem is not None:
                out.append(f"{_where([*path, key])}: the key {problem}")
                continue
            out += node_problems(node.item, item, [*path, key])
        return out
    out = []
    for key in value:
        if key not in node.fields:
            out.append(f"{_where(path)} has an unknown field {str(key)[:40]!r}")
    for key, sub in node.fields.items():
        if key not in value:
            if key not in node.optional:
                out.append(f"{_where(path)} lacks {key}")
            continue
        out += node_problems(sub, value[key], [*path, key])
    if not out and node.whole is not None:
        out += [f"{_where(path)}: {p}" for p in node.whole(value)]
    return out


def state_problems(state: Any) -> list[str]:
    """Every problem of a whole state's shape (not its invariants: those
    are `rules.violations`, which needs a readable state first)."""
    return node_problems(STATE, state, [])


def _node_at(path: list[Any]) -> tuple[Node | None, bool, str | None]:
    """(the node `path` names, whether it may be deleted, or the problem)."""
    node: Node = STATE
    deletable = False
    for i, key in enumerate(path):
        where = _where(path[: i + 1])
        if type(key) is not str:
            return None, False, f"path part {i} must be a string, not {_kind(key)}"
        if key in FORBIDDEN_KEYS:
            return None, False, f"path part {key!r} is not allowed"
        if isinstance(node, Nullable):
            node = node.inner
        if isinstance(node, Leaf):
            return None, False, f"{_where(path[:i])} holds no fields ({where})"
        if isinstance(node, Table):
            problem = ident(key)
            if problem is not None:
                return None, False, f"{where}: the key {problem}"
            node, deletable = node.item, True
        else:
            assert isinstance(node, Record)
            if key not in node.fields:
                return None, False, f"{where} is not a field of the state"
            deletable = key in node.optional
            node = node.fields[key]
    return node, deletable, None


def op_problems(op: Any) -> list[str]:
    """Problems of one patch op against the state's schema: its form, its
    path (a place the state has; no `__proto__`) and, for `set`, its value
    (of that place's type). Whether the op applies to a given state, and
    what the whole becomes, is for the caller to check."""
    if type(op) is not list or not op or op[0] not in ("set", "del"):
        return ['an op must be a list ["set", path, value] or ["del", path]']
    kind = op[0]
    if len(op) != (3 if kind == "set" else 2):
        return [f"a {kind} op has {3 if kind == 'set' else 2} items"]
    path = op[1]
    if type(path) is not list or not path:
        return ["an op's path must be a non-empty list"]
    node, deletable, problem = _node_at(path)
    if problem is not None:
        return [problem]
    assert node is not None
    if kind == "del":
        return [] if deletable else [f"{_where(path)} cannot be deleted"]
    return node_problems(node, op[2], list(path))


def changed_problems(state: dict[str, Any], ops: list[Any]) -> list[str]:
    """The problems of `state` where `ops` (just applied) changed it: each
    touched character whole, each other touched field of the room (the
    users, the combat, the clock...) whole. Proportional to the change, not
    to the table, so a long log is checked version by version (a clock
    advance in a room of 200 characters checks the clock, not them)."""
    chars: set[str] = set()
    fields: set[str] = set()
    for op in ops:
        path = op[1]
        if path[0] == "characters" and len(path) >= 2:
            chars.add(path[1])
        else:
            fields.add(path[0])
    if type(state) is not dict:
        return state_problems(state)
    out: list[str] = []
    for key in sorted(fields):
        if key in state:
            out += node_problems(STATE.fields[key], state[key], [key])
        elif key not in STATE.optional:
            out.append(f"the state lacks {key}")
    table = state.get("characters", {})
    if chars and "characters" not in fields:
        if type(table) is not dict:
            return state_problems(state)
        if len(table) > CHARACTERS.most:
            out.append(f"characters holds {len(table)} entries, at most {CHARACTERS.most}")
        for cid in sorted(chars):
            if cid in table:
                out += node_problems(CHARACTER, table[cid], ["characters", cid])
    return out
