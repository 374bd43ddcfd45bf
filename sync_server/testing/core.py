"""A room core to drive with plain data (no socket, no storage, no asyncio):

    core, gm = new_core()
    d = core.evaluate(command(gm, "add_character", name="Aline", **SHEET))
    commit(core)                 # as the host does once storage said yes

or a whole batch as the host drives it (`run_batch`: begin, evaluate,
stored, and the outputs it returns).

Tokens are numbered (`token-1`, ...), the clock is a `FakeClock`, the dice
are scripted, and the rules' invariants are checked after every command.
"""

from __future__ import annotations

import itertools
from typing import Any

import rules
from sync_server.clock import FakeClock
from sync_server.core.auth import RecentTokens
from sync_server.core.limits import Limits
from sync_server.core.room import NO_EXPECT, CommandIn, LogReader, Output, RememberToken, RoomCore
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


def commit(core: RoomCore) -> None:
    """`core.commit()`, and the tokens it minted kept as the host keeps
    them (in the server-wide `RecentTokens`), so retries get them again."""
    for out in core.commit():
        core.recent_tokens.remember(out.key, "token", out.token)


def run_batch(
    core: RoomCore, commands: list[CommandIn], reader: LogReader | None = None
) -> list[Output]:
    """One batch as the host drives it, storage saying yes: the outputs
    `stored` returns (tokens already remembered, as the host would)."""
    batch = core.begin(commands)
    core.evaluate_batch(batch, reader)
    outputs = core.stored(batch)
    for out in outputs:
        if isinstance(out, RememberToken):
            core.recent_tokens.remember(out.key, "token", out.token)
    return outputs
