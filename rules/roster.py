"""The room's roster: characters, users, the room's settings and the dice
queue. GM bookkeeping rather than game rules, but it keeps the invariants."""

from __future__ import annotations

from typing import Any

from rules.clock import leave_combat
from rules.conditions import become, stop_tending_by
from rules.context import Ctx
from rules.effects import EndSessions, IssueToken, RevokeToken
from rules.errors import Conflict, InvalidArgs, NotFound, RuleBroken
from rules.invariants import character_violations
from rules.model import ABILITIES, Character, Room, User, default_shown
from rules.validate import MAX_CHARACTERS, MAX_QUEUED_ROLLS, MAX_USERS


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


def room_has_space_for_a_user(room: Room, a: dict[str, Any]) -> None:
    """Bounds (v1.1): at most MAX_USERS per room; `invalid_args` as above."""
    if len(room.users) >= MAX_USERS:
        raise InvalidArgs(
            f"this room already has {len(room.users)} users, the most a room may have"
            f" ({MAX_USERS}); remove one before adding another",
            "room_full_users",
            max=MAX_USERS,
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


def add_user(ctx: Ctx, name: str, role: str) -> None:
    room = ctx.room
    uid = f"u{room.next_user}"
    room.next_user += 1
    ctx.edit_users()
    room.users[uid] = User(name, role)
    ctx.result["user"] = uid
    ctx.effects.append(IssueToken(uid))
    ctx.emit("user", user=uid, change="added", name=name, role=role)


def _user(ctx: Ctx, uid: str) -> User:
    try:
        return ctx.room.users[uid]
    except KeyError:
        raise NotFound(f"no user {uid!r} in this room")


def check_remove_user(room: Room, uid: str) -> None:
    user = room.users[uid]
    if user.role == "gm" and sum(u.role == "gm" for u in room.users.values()) == 1:
        raise RuleBroken("the room's last GM cannot be removed", "last_gm", user=uid)


def remove_user(ctx: Ctx, uid: str) -> None:
    room = ctx.room
    user = _user(ctx, uid)
    check_remove_user(room, uid)
    ctx.edit_users()
    del room.users[uid]
    for c in room.ordered():
        if c.owner == uid:
            ctx.edit(c.id).owner = None
    ctx.result["user"] = uid
    ctx.effects += [RevokeToken(uid), EndSessions(uid)]
    ctx.emit("user", user=uid, change="removed", name=user.name)


def rotate_token(ctx: Ctx, uid: str) -> None:
    _user(ctx, uid)
    ctx.result["user"] = uid
    ctx.effects += [IssueToken(uid), EndSessions(uid)]
    ctx.emit("user", user=uid, change="token_rotated")


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


def check_queue_space(room: Room, n: int = 1) -> None:
    """X1: the queue holds at most MAX_QUEUED_ROLLS dice."""
    queued = len(room.queued_rolls)
    if queued + n > MAX_QUEUED_ROLLS:
        raise RuleBroken(
            f"the dice queue holds at most {MAX_QUEUED_ROLLS} rolls ({queued} queued)",
            "dice_queue_full",
            max=MAX_QUEUED_ROLLS,
            queued=queued,
        )


def queue_rolls(ctx: Ctx, rolls: list[int]) -> None:
    """X1: natural d20s that the next automated checks consume, in order."""
    check_queue_space(ctx.room, len(rolls))
    queue = ctx.room.queued_rolls
    queue.extend(rolls)
    ctx.emit("rolls_queued", rolls=list(rolls), queued=len(queue))
