"""A room core to drive with plain data (no socket, no storage, no asyncio):

    core, gm = new_core()
    d = core.evaluate(command(gm, "add_character", name="Aline", **SHEET))
    commit(core)                 # as the host does once storage said yes

or a whole batch as the host drives it (`run_batch`: take, evaluate if
asked, stored, and the outputs of its last step).

Tokens are numbered (`token-1`, ...), the clock is a `FakeClock`, the dice
are scripted, and the rules' invariants are checked after every command.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import rules
from sync_server.clock import FakeClock
from sync_server.core.auth import RecentTokens
from sync_server.core.inputs import NO_EXPECT, CommandIn, LogReader
from sync_server.core.limits import Limits
from sync_server.core.outputs import Done, Evaluate, Output, RememberToken, Store
from sync_server.core.room import RoomCore
from sync_server.storage import LoadedRoom

_ids = itertools.count(1)

# The server-wide token memory of each core made here, kept beside it as a
# host keeps it (the core reads it, and never writes there).
_tokens: weakref.WeakKeyDictionary[RoomCore, RecentTokens] = weakref.WeakKeyDictionary()


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
    tokens = RecentTokens(600.0, clock.monotonic)
    core = RoomCore(
        LoadedRoom(room_id, 0, room.to_dict(), [], []),
        dice=dice if dice is not None else rules.ScriptedDice(),
        wall_clock=clock.time,
        new_token=lambda: f"token-{next(numbers)}",
        recent_tokens=tokens,
        limits=limits,
        check_invariants=True,
    )
    _tokens[core] = tokens
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
    _remember(core, core.commit())


def run_batch(
    core: RoomCore, commands: list[CommandIn], reader: LogReader | None = None
) -> list[Output]:
    """One batch of all `commands` as the host drives it, storage saying
    yes: the outputs of its last step (tokens already remembered, as the
    host would)."""
    step = core.take(commands)
    if step.taken != len(commands):
        raise ValueError(f"these commands do not go in one batch (it takes {step.taken})")
    if isinstance(step, Evaluate):
        step = core.evaluate_batch(reader)
    if isinstance(step, Store):
        step = core.stored()
    assert isinstance(step, Done)
    _remember(core, step.outputs)
    return step.outputs


def _remember(core: RoomCore, outputs: list[Output] | list[RememberToken]) -> None:
    for out in outputs:
        if isinstance(out, RememberToken):  # (a core made by `new_core`)
            _tokens[core].remember(out.key, "token", out.token)
