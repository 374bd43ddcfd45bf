"""The room's roster: its characters, its settings and the dice queue (the
users are rules/users.py). GM bookkeeping rather than game rules, but it
keeps the invariants. The ops `update_room` (`ROOM_OPS`), `add_character`,
`update_character`, `remove_character` (`CHARACTER_OPS`) and `queue_rolls`
(`DICE_OPS`)."""

from __future__ import annotations

from typing import Any

from rules.clock import leave_combat
from rules.conditions import become, stop_tending_by
from rules.context import Ctx
from rules.errors import Conflict, InvalidArgs, NotFound, RuleBroken
from rules.events import TIMED_EVENTS
from rules.invariants import character_violations
from rules.model import ABILITIES, Character, Room, default_shown
from rules.op import Args, Check, Doc, Facts, G, Op, Subject, WholeRoom, edit
from rules.validate import (
    ABILITY_SCORES,
    BOOL,
    CORRECTIONS,
    ID,
    LEVEL,
    MAX_CHARACTERS,
    MAX_QUEUED_ROLLS,
    NAME,
    OWNER,
    PE,
    PP,
    PV,
    PV_MAX,
    ROLLS,
    ROUND_SECONDS,
    SHOWN,
    SKILL,
    Arg,
    optional,
)


def _owner(ctx: Ctx, owner: str | None) -> str | None:
    """A character's owner is a user of the room who may play: a player or
    a GM (docs/rules.md, Refusals). An observer only watches: owning a
    character would give it a card it can do nothing with."""
    if owner is None:
        return None
    user = ctx.room.users.get(owner)
    if user is None:
        raise NotFound(f"no user {owner!r} in this room")
    if user.role == "observer":
        raise RuleBroken(
            f"{user.name} is an observer and plays no character: give it to a player,"
            " or to nobody (owner null) for the GM to play",
            "owner_observer",
            user=owner,
        )
    return owner


def room_has_space_for_a_character(room: Room, a: dict[str, Any]) -> None:
    """Bounds (v1.1): at most MAX_CHARACTERS per room; `invalid_args`, checked
    with the arguments (before not_found and forbidden)."""
    if len(room.characters) >= MAX_CHARACTERS:
        raise InvalidArgs(
            f"this room already holds {len(room.characters)} characters, the most a room may"
            f" hold ({MAX_CHARACTERS}); remove one before adding another",
            "room_full_characters",
            max=MAX_CHARACTERS,
        )


def add_character(ctx: Ctx, a: dict[str, Any]) -> None:
    room = ctx.room
    owner = _owner(ctx, a["owner"])
    cid = a["id"]
    if cid is None:
        n = room.next_seq
        while f"c{n}" in room.characters:
            n += 1
        cid = f"c{n}"
    elif cid in room.characters:
        raise Conflict(f"a character {cid!r} already exists in this room")
    c = Character(
        id=cid,
        seq=room.next_seq,
        name=a["name"],
        owner=owner,
        level=a["level"],
        pv=a["pv_max"] if a["pv"] is None else a["pv"],
        pv_max=a["pv_max"],
        pe=0,
        pe_max_base=a["pe_max"],
        pp=a["pp_max"] if a["pp"] is None else a["pp"],
        pp_max=a["pp_max"],
        abilities=dict(a["abilities"]),
        ability_damage=dict.fromkeys(ABILITIES, 0),
        medicine=a["medicine"],
        shown=a["shown"] or default_shown(None if owner is None else room.users[owner].role),
    )
    c.pe = c.pe_max if a["pe"] is None else a["pe"]
    problems = character_violations(c)
    if c.pv == 0:
        problems.append("a new character starts conscious, with pv of 1 or more")
    if problems:
        raise RuleBroken(f"cannot add {c.name}: {'; '.join(problems)}")
    room.next_seq += 1
    ctx.add_character(c)
    ctx.result["char"] = cid
    ctx.emit("character", char=cid, change="added", name=c.name)


def update_character(ctx: Ctx, c: Character, changes: dict[str, Any]) -> None:
    """A GM correction: set the fields, then refuse (never repair) a result
    that breaks an invariant. A change of condition runs the state machine's
    entry and exit actions (clocks, rests, tending)."""
    if "owner" in changes:
        _owner(ctx, changes["owner"])
    for field, value in changes.items():
        if field == "condition":
            continue
        if field == "pe_max":
            c.pe_max_base = value
        elif field in ("abilities", "ability_damage"):
            getattr(c, field).update(value)
        else:
            setattr(c, field, value)
    if "condition" in changes and changes["condition"] != c.condition:
        become(ctx, c, changes["condition"], "correction")
    problems = character_violations(c)
    if problems:
        raise RuleBroken(f"correction refused, it would break the sheet: {'; '.join(problems)}")
    ctx.emit("character", char=c.id, change="updated", fields=sorted(changes))


def remove_character(ctx: Ctx, c: Character) -> None:
    stop_tending_by(ctx, c, "removed")
    leave_combat(ctx, c.id)
    ctx.remove_character(c.id)
    ctx.emit("character", char=c.id, change="removed", name=c.name)


def check_update_room(a: dict[str, Any]) -> None:
    if all(a[k] is None for k in ROOM_SETTINGS):
        raise InvalidArgs(f"update_room: give one or more of {', '.join(ROOM_SETTINGS)}")


# update_room's arguments: the room's settings.
ROOM_SETTINGS = ("name", "round_seconds", "skip_dead")


def update_room(ctx: Ctx, a: dict[str, Any]) -> None:
    """The room's settings: its name, the length of a round, and whether dead
    combatants are passed over (T3). Turning `skip_dead` on or off moves no
    turn: it applies from the next end of turn."""
    room = ctx.room
    for key in ROOM_SETTINGS:
        if a[key] is not None:
            setattr(room, key, a[key])
    ctx.emit("room", **{key: getattr(room, key) for key in ROOM_SETTINGS})


def check_queue_space(at: Facts, a: Args) -> None:
    """X1: the queue holds at most MAX_QUEUED_ROLLS dice (with `rolls` open:
    room for one more)."""
    queued = len(at.room.queued_rolls)
    n = 1 if a["rolls"] is None else len(a["rolls"])
    if queued + n > MAX_QUEUED_ROLLS:
        raise RuleBroken(
            f"the dice queue holds at most {MAX_QUEUED_ROLLS} rolls ({queued} queued)",
            "dice_queue_full",
            max=MAX_QUEUED_ROLLS,
            queued=queued,
        )


def queue_rolls(ctx: Ctx, rolls: list[int]) -> None:
    """X1: natural d20s that the next automated checks consume, in order
    (the op's check passed: the queue has room for them)."""
    queue = ctx.room.queued_rolls
    queue.extend(rolls)
    ctx.emit("rolls_queued", rolls=list(rolls), queued=len(queue))


ROOM_OPS = (
    Op(
        "update_room",
        {
            "name": optional(NAME),
            "round_seconds": optional(ROUND_SECONDS),
            "skip_dead": optional(BOOL),
        },
        G,
        update_room,
        WholeRoom(),
        Doc(
            summary="change the room's settings: its name, a round's length, passing over the dead",
            changes="The room's `name`, `round_seconds` (world seconds per combat round: the"
            " dying PP clock out of combat and the time a round adds to the clock) and"
            " `skip_dead` (whether an end of turn passes over dead combatants, T3; from the next"
            " end of turn).",
            meaning={
                "name": "the room's new name",
                "round_seconds": "world seconds per combat round (default 6)",
                "skip_dead": "pass over dead combatants' turns (default true); false: a dead "
                "combatant's turn comes round and the GM ends it",
            },
            example={"name": "Thursday table", "round_seconds": 6},
            errors=(("invalid_args", "none of `name`, `round_seconds`, `skip_dead` is given"),),
            rules="T3",
        ),
        events=("room",),
        check=check_update_room,
    ),
)

CHARACTER_OPS = (
    Op(
        "add_character",
        {
            "name": Arg(NAME),
            "level": Arg(LEVEL),
            "pv_max": Arg(PV_MAX),
            "pe_max": Arg(PE),
            "pp_max": Arg(PP),
            "abilities": Arg(ABILITY_SCORES),
            "medicine": Arg(SKILL),
            "owner": optional(OWNER),
            "id": optional(ID),
            "pv": optional(PV),
            "pe": optional(PE),
            "pp": optional(PP),
            "shown": optional(SHOWN),
        },
        G,
        add_character,
        WholeRoom(),
        Doc(
            summary="add a character (its id is in the result)",
            changes="A new character, conscious, its current PV, PE and PP at their maxima"
            " unless given. Its id is `id`, else the next free `cN`.",
            meaning={
                "name": "the character's name",
                "level": "its level (R2/R3 recover `level` PV)",
                "pv_max": "hit points (PV) maximum",
                "pe_max": "stamina (PE) maximum, before Con damage (A2)",
                "pp_max": "perseverance (PP) maximum",
                "abilities": "the six ability scores",
                "medicine": "its Medicine bonus (first aid S1, tending L4)",
                "owner": "the player (user id) who acts for it; absent or null: the GM",
                "id": "the character's id (default: the next free c1, c2, ...)",
                "pv": "current PV (default pv_max)",
                "pe": "current PE (default the effective pe_max)",
                "pp": "current PP (default pp_max)",
                "shown": "what players and observers see of it: full, status (name, level, "
                "condition; no numbers) or hidden; default full for a player's character, "
                "status for the GM's or nobody's (docs/views.md)",
            },
            example={
                "name": "Aline",
                "level": 3,
                "pv_max": 20,
                "pe_max": 15,
                "pp_max": 6,
                "abilities": {"str": 10, "dex": 14, "con": 14, "int": 10, "wis": 12, "cha": 8},
                "medicine": 5,
                "owner": "u2",
            },
            errors=(
                ("conflict", "a character with this `id` exists"),
                (
                    "rule",
                    "the sheet breaks an invariant (a current value above its maximum, pv 0)",
                ),
                ("rule", "`owner` is an observer (observers play no character)"),
            ),
            result='{"char": "c5"}',
        ),
        events=("character",),
        users=("owner",),
        bounds=room_has_space_for_a_character,
    ),
    Op(
        "update_character",
        {"char": Arg(ID), "set": Arg(CORRECTIONS)},
        G,
        lambda ctx, a: update_character(ctx, edit(ctx, a), a["set"]),
        Subject(),
        Doc(
            summary="correct a character's sheet (any field, condition included)",
            changes="Sets the given fields. A change of condition runs that condition's entry"
            " and exit actions (clocks, rests, tending). A result that breaks an invariant is"
            " refused, never repaired. `shown` changes what players and observers see of it:"
            " each of them gets a patch adding or removing what they may now see.",
            meaning={
                "char": "the character's id",
                "set": "the fields to change and their new values",
            },
            example={"char": "c1", "set": {"pv": 12, "owner": "u3"}},
            errors=(
                ("rule", "the result breaks an invariant (pv above pv_max, dying with pv 1, ...)"),
                ("rule", "`owner` is an observer (observers play no character)"),
            ),
        ),
        events=("condition", "rest", "tend", "character"),
        chars=("char",),
        users=("set.owner",),
        on_dead=True,
    ),
    Op(
        "remove_character",
        {"char": Arg(ID)},
        G,
        lambda ctx, a: remove_character(ctx, edit(ctx, a)),
        Subject(),
        Doc(
            summary="remove a character",
            changes="Removes the character; it stops tending, leaves the combat order (the turn"
            " passes on if it was its turn; an empty order ends the combat).",
            meaning={"char": "the character's id"},
            example={"char": "c4"},
        ),
        events=("tend", "combat", "turn", "clock", *TIMED_EVENTS, "character"),
        chars=("char",),
        on_dead=True,
    ),
)

DICE_OPS = (
    Op(
        "queue_rolls",
        {"rolls": Arg(ROLLS)},
        G,
        lambda ctx, a: queue_rolls(ctx, a["rolls"]),
        WholeRoom(),
        Doc(
            summary="queue physical d20s for the next automated checks",
            changes="The dice queue: the next checks the server makes use these natural d20s,"
            " in order, before its own dice.",
            meaning={"rolls": "natural d20 results, in order"},
            example={"rolls": [15, 4]},
            errors=(("rule", "the queue would hold more than 100 rolls"),),
            rules="X1",
        ),
        events=("rolls_queued",),
        checks=(Check(check_queue_space),),
    ),
)
