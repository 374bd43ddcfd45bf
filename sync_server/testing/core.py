"""A room core to drive with plain data (no socket, no storage, no asyncio):

    core, gm = new_core()
    d = core.evaluate(command(gm, "add_character", name="Aline", **SHEET))
    core.commit()                # as the host does once storage said yes

Tokens are numbered (`token-1`, ...), the clock is a `FakeClock`, the dice
are scripted, and the rules' invariants are checked after every command.
"""

from __future__ import annotations

import itertools
from typing import Any

import rules
from sync_server.core.auth import RecentTokens
from sync_server.core.limits import Limits
from sync_server.core.room import NO_EXPECT, CommandIn, RoomCore
from sync_server.hosting.clock import FakeClock
from sync_server.storage import LoadedRoom

_ids = itertools.count(1)


def new_core(
    room_id: str = "r1",
    *,
    dice: rules.Dice | None = None,
    limits: Limits | None = None,
    clock: FakeClock | None = None,
) -> tuple[RoomCore, rules.Actor]:
    """A fresh room at version 0 with one GM (returned as an Actor)."""
    room, gm = rules.new_room(room_id, "Table du jeudi", "Maya")
    clock = clock or FakeClock()
    numbers = itertools.count(1)
    core = RoomCore(
        LoadedRoom(room_id, 0, room.to_dict(), [], []),
        dice=dice if dice is not None else rules.ScriptedDice(),
        wall_clock=clock.time,
        new_token=lambda: f"token-{next(numbers)}",
        recent_tokens=RecentTokens(600.0, clock.monotonic),
        limits=limits,
        check_invariants=True,
    )
    return core, rules.Actor(gm, "gm")


def command(
    actor: rules.Actor,
    op: str,
    /,
    *,
    cmd_id: str | None = None,
    epoch: int = 0,
    expect: Any = NO_EXPECT,
    **args: Any,
) -> CommandIn:
    """A `CommandIn` as a session would build it (a fresh id unless given)."""
    return CommandIn(actor, epoch, cmd_id or f"t-{next(_ids)}", op, args, expect)
