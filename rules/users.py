"""The room's users: adding a GM, a player or an observer, revoking one,
giving one a new token; the ops `add_user`, `remove_user` and
`rotate_token` (`OPS`). Tokens are the server's: these ops only say which
user gets a new one or loses theirs (rules/effects.py), and none of them can
be undone (a token, once issued or revoked, is not brought back)."""

from __future__ import annotations

from typing import Any

from rules.context import Ctx
from rules.effects import EndSessions, IssueToken, RevokeToken
from rules.errors import InvalidArgs, NotFound, RuleBroken
from rules.model import Room, User
from rules.op import Args, Check, Doc, Facts, G, Op, WholeRoom
from rules.validate import ID, MAX_USERS, NAME, ROLE, Arg


def room_has_space_for_a_user(room: Room, a: dict[str, Any]) -> None:
    """Bounds (v1.1): at most MAX_USERS per room; `invalid_args`, checked
    with the arguments (before not_found and forbidden)."""
    if len(room.users) >= MAX_USERS:
        raise InvalidArgs(
            f"this room already has {len(room.users)} users, the most a room may have"
            f" ({MAX_USERS}); remove one before adding another",
            "room_full_users",
            max=MAX_USERS,
        )


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


def check_remove_user(at: Facts, a: Args) -> None:
    """A room keeps a GM."""
    uid = a["user"]
    room = at.room
    user = room.users[uid]
    if user.role == "gm" and sum(u.role == "gm" for u in room.users.values()) == 1:
        raise RuleBroken("the room's last GM cannot be removed", "last_gm", user=uid)


def remove_user(ctx: Ctx, uid: str) -> None:
    """The user is gone (the op's check passed: not the last GM); their
    characters have no owner."""
    room = ctx.room
    user = _user(ctx, uid)
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


OPS = (
    Op(
        "add_user",
        {"name": Arg(NAME), "role": Arg(ROLE)},
        G,
        lambda ctx, a: add_user(ctx, a["name"], a["role"]),
        WholeRoom(),
        Doc(
            summary="invite a GM, a player or an observer: returns their token",
            changes="Adds a user to the room; the server makes their token, which this ack"
            " alone carries (never a patch, an event or a log line). The GM's page turns it"
            " into a link to send them: `http://HOST:PORT/#room=ROOM&token=TOKEN`.",
            meaning={"name": "how the table calls them", "role": "gm, player or observer"},
            example={"name": "Dana", "role": "player"},
            result='{"user": "u5", "token": "..."}',
        ),
        events=("user",),
        bounds=room_has_space_for_a_user,
        undoable=False,
    ),
    Op(
        "remove_user",
        {"user": Arg(ID)},
        G,
        lambda ctx, a: remove_user(ctx, a["user"]),
        WholeRoom(choose="user"),
        Doc(
            summary="revoke a user: their link stops working",
            changes="Removes the user; their characters get `owner` null; their open"
            " connections are closed (4403).",
            meaning={"user": "the user's id (u2, ...)"},
            example={"user": "u5"},
            errors=(("rule", "the user is the room's last GM"),),
        ),
        events=("user",),
        checks=(Check(check_remove_user, of="user"),),
        users=("user",),
        undoable=False,
    ),
    Op(
        "rotate_token",
        {"user": Arg(ID)},
        G,
        lambda ctx, a: rotate_token(ctx, a["user"]),
        WholeRoom(choose="user"),
        Doc(
            summary="give a user a new token (a new link); the old one stops working",
            changes="The user's token is replaced by a new one, which this ack alone carries;"
            " their open connections are closed (4403).",
            meaning={"user": "the user's id"},
            example={"user": "u5"},
            result='{"user": "u5", "token": "..."}',
        ),
        events=("user",),
        users=("user",),
        undoable=False,
    ),
)
