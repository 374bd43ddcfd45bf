"""The working context of one command: a private copy of the room, the dice,
the acting user and the events emitted so far.

Handlers change `ctx.room` freely: it is a copy, so a `Refused` raised midway
leaves the caller's state untouched.
"""

from __future__ import annotations

from typing import Any

import attrs

from rules.dice import Dice
from rules.effects import Effect
from rules.errors import InvalidArgs, NotFound
from rules.model import Character, Room
from rules.validate import MAX_EVENTS
from rules.view import HIDDEN, level_for

# How a refusal names a character its sender may not see (views).
UNSEEN_NAME = "a character you cannot see"


@attrs.frozen
class Actor:
    """Who sends the command: a user id and its role in the room
    ("gm", "player" or "observer")."""

    user: str
    role: str

    @property
    def is_gm(self) -> bool:
        return self.role == "gm"

    def sees(self, c: Character) -> bool:
        """Is `c` in this user's view at all (not `hidden` from them)?"""
        return level_for(self.role, self.user, c.owner, c.shown) != HIDDEN

    def name_of(self, c: Character) -> str:
        """`c`'s name for a message to this user: a refusal must not name a
        character hidden from its sender."""
        return c.name if self.sees(c) else UNSEEN_NAME


@attrs.define
class Ctx:
    room: Room
    dice: Dice
    actor: Actor
    events: list[dict[str, Any]] = attrs.Factory(list)
    result: dict[str, Any] = attrs.Factory(dict)
    # What the server must do besides storing the new state (effects.py).
    effects: list[Effect] = attrs.Factory(list)
    # While the scheduler fires a timed rule, the world second it fires at;
    # its events carry it as `at` so the table's log can place them.
    at: int | None = None

    # Characters this command has copied already (copy-on-write, Room.copy).
    owned: set[str] = attrs.Factory(set)
    # Ids of the characters this command changed, added or removed (every
    # other one is still the caller's object): `Outcome.touched`.
    touched: set[str] = attrs.Factory(set)

    def char(self, cid: str) -> Character:
        """A character to read (and to change: see `edit`)."""
        try:
            return self.edit(cid)
        except KeyError:
            raise NotFound(f"no character {cid!r} in this room")

    def edit(self, cid: str) -> Character:
        """The command's own copy of a character, made on first use: the
        only way the engine gets a character it may change, so the caller's
        state is never touched."""
        if cid not in self.owned:
            self.room.characters[cid] = self.room.characters[cid].copy()
            self.owned.add(cid)
            self.touched.add(cid)
            if self.room.timed is not None:  # it may start a timed rule (clock.py)
                self.room.timed.add(cid)
        return self.room.characters[cid]

    def add_character(self, c: Character) -> None:
        """Put a new character in the room (it is this command's own)."""
        self.room.characters[c.id] = c
        self.owned.add(c.id)
        self.touched.add(c.id)
        if self.room.timed is not None:
            self.room.timed.add(c.id)

    def remove_character(self, cid: str) -> None:
        del self.room.characters[cid]
        self.touched.add(cid)

    def edit_users(self) -> None:
        """Give this command its own users map before changing it."""
        if "users" not in self.owned:
            self.room.users = dict(self.room.users)
            self.owned.add("users")

    def emit(self, kind: str, **fields: Any) -> None:
        """Add an event to the command's log. Past MAX_EVENTS the command is
        refused (`invalid_args`, v1.1 Bounds) at once, which also stops its
        work: the handler changed only this context's copy of the room."""
        if len(self.events) >= MAX_EVENTS:
            raise InvalidArgs(
                f"this command would emit more than {MAX_EVENTS} events, the most one change"
                " may carry; for a clock advance, advance in shorter steps"
            )
        event = {"kind": kind, **fields}
        if self.at is not None:
            event["at"] = self.at
        self.events.append(event)

    def d20(self, roll: int | None = None) -> tuple[int, str]:
        """X1: a natural d20 and where it came from: the GM's own die
        (`roll`), the room's queue, else the server's dice."""
        if roll is not None:
            return roll, "gm"
        if self.room.queued_rolls:
            return self.room.queued_rolls.pop(0), "queued"
        return self.dice.d20(), "server"

    def check(
        self,
        char: Character,
        check: str,
        mod: int,
        *,
        dc: int | None,
        bonus: int = 0,
        roll: int | None = None,
        floor: int | None = None,
        outcome: Any = None,
        **extra: Any,
    ) -> int:
        """Roll d20 + mod + bonus, emit the X2 roll event, return the total.

        `outcome(total) -> str` names the result; without it the check is a
        plain success/failure against `dc`. `floor` raises a low total (L4);
        the event then keeps the sum it replaced (`raised_from`).
        """
        d20, source = self.d20(roll)
        total = d20 + mod + bonus
        if floor is not None and total < floor:
            extra["raised_from"] = total  # so the sentence says the rule raised it
            total = floor
        if outcome is not None:
            result = outcome(total)
        else:
            assert dc is not None
            result = "success" if total >= dc else "failure"
        self.emit(
            "roll",
            char=char.id,
            check=check,
            d20=d20,
            mod=mod,
            bonus=bonus,
            total=total,
            dc=dc,
            outcome=result,
            source=source,
            **extra,
        )
        return total
