"""`--demo`: a ready-to-play room `demo`, created once and reused.

The room is made with ordinary commands (create_room, add_user,
add_character), so it is exactly what a GM could have built by hand. Its
tokens are kept in `demo_tokens.json` (mode 0600, like the admin token) in
the data directory, because the database holds only their hashes and the
demo must print them again after a restart. If that file is lost, the
tokens are rotated (rotate_token) and the file written again.
"""

from __future__ import annotations

import json
from typing import Any

from sync_server.core.auth import write_secret_file
from sync_server.hosting.server import Server
from sync_server.wire import frames
from sync_server.wire.links import page_link

DEMO_ROOM = "demo"
DEMO_TOKENS_FILE = "demo_tokens.json"

PEOPLE = [  # (key, name, role)
    ("gm", "Maya (GM)", "gm"),
    ("p1", "Aline's player", "player"),
    ("p2", "Bastien's player", "player"),
    ("p3", "Chloe's player", "player"),
    ("obs", "Spectator", "observer"),
]

CHARACTERS = [  # (owner key or None, args)
    (
        "p1",
        {
            "name": "Aline",
            "level": 3,
            "pv_max": 20,
            "pe_max": 15,
            "pp_max": 6,
            "medicine": 5,
            "abilities": {"str": 10, "dex": 14, "con": 14, "int": 10, "wis": 12, "cha": 8},
        },
    ),
    (
        "p2",
        {
            "name": "Bastien",
            "level": 5,
            "pv_max": 38,
            "pe_max": 25,
            "pp_max": 9,
            "medicine": 1,
            "abilities": {"str": 17, "dex": 12, "con": 16, "int": 8, "wis": 10, "cha": 11},
        },
    ),
    (
        "p3",
        {
            "name": "Chloe",
            "level": 2,
            "pv_max": 12,
            "pe_max": 10,
            "pp_max": 4,
            "medicine": 9,
            "abilities": {"str": 8, "dex": 13, "con": 11, "int": 16, "wis": 15, "cha": 12},
        },
    ),
    (
        None,
        {
            "name": "Gorgol the goblin",
            "level": 1,
            "pv_max": 7,
            "pe_max": 4,
            "pp_max": 1,
            "medicine": 0,
            "abilities": {"str": 12, "dex": 15, "con": 10, "int": 7, "wis": 8, "cha": 6},
        },
    ),
]


class DemoError(Exception):
    pass


def _ok(frame: dict[str, Any], what: str) -> dict[str, Any]:
    reply = frames.parse_server(frame)
    if isinstance(reply, frames.Ack):
        return reply.result
    code, message = (reply.code, reply.message) if isinstance(reply, frames.Error) else (None, None)
    raise DemoError(f"demo setup: {what} failed: {code}: {message}")


async def ensure_demo(srv: Server) -> dict[str, dict[str, str]]:
    """Create the demo room if needed; return {key: {user, name, role, token}}."""
    path = srv.config.data_dir / DEMO_TOKENS_FILE
    if srv.rooms.exists(DEMO_ROOM):
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            if set(saved) == {k for k, _, _ in PEOPLE}:
                return saved
        except (OSError, ValueError):
            pass
        return await _rotate_all(srv, path)
    res = _ok(
        await srv.admin_command(
            "create_room", {"room": DEMO_ROOM, "name": "Demo table", "gm_name": PEOPLE[0][1]}
        ),
        "create_room",
    )
    gm = res["user"]
    people: dict[str, dict[str, str]] = {
        "gm": {"user": gm, "name": PEOPLE[0][1], "role": "gm", "token": res["gm_token"]}
    }
    for key, name, role in PEOPLE[1:]:
        r = _ok(
            await srv.room_command(DEMO_ROOM, gm, "add_user", {"name": name, "role": role}),
            "add_user",
        )
        people[key] = {"user": r["user"], "name": name, "role": role, "token": r["token"]}
    for owner, args in CHARACTERS:
        full = dict(args)
        if owner is not None:
            full["owner"] = people[owner]["user"]
        _ok(await srv.room_command(DEMO_ROOM, gm, "add_character", full), "add_character")
    write_secret_file(path, json.dumps(people, indent=2))
    return people


async def _rotate_all(srv: Server, path: Any) -> dict[str, dict[str, str]]:
    host = await srv.rooms.get(DEMO_ROOM)
    if host is None:
        raise DemoError("demo room vanished")
    users = host.state["users"]
    gm = next(uid for uid, u in users.items() if u["role"] == "gm")
    people: dict[str, dict[str, str]] = {}
    order = {
        role: [uid for uid, u in users.items() if u["role"] == role]
        for role in ("gm", "player", "observer")
    }
    keys = {"gm": ["gm"], "player": ["p1", "p2", "p3"], "observer": ["obs"]}
    for role, uids in order.items():
        for key, uid in zip(keys[role], uids, strict=False):
            r = _ok(
                await srv.room_command(DEMO_ROOM, gm, "rotate_token", {"user": uid}), "rotate_token"
            )
            people[key] = {
                "user": uid,
                "name": users[uid]["name"],
                "role": role,
                "token": r["token"],
            }
    write_secret_file(path, json.dumps(people, indent=2))
    return people


def page_url(srv: Server, token: str, room: str = DEMO_ROOM) -> str:
    """A page link for the demo: on the public URL when set, https with TLS."""
    return page_link(srv.page_url, room, token)
