"""Reusable test helpers shipped with the product: a sample sheet, a test
table for the pure engine, and a ready-made room of stable characters.

The engine's own tests use them, and so do the benchmarks and anyone writing
a tool or a VTT module against `rules`: a benchmark must not import the test
suite, so what both need lives here. The server never uses this module
(only its own testing helpers do, for the sample sheet).

    t = Table()
    a = t.add("Aline", owner=t.p1, pv_max=20)
    t.dice.push(12)
    out = t.do("first_aid", char=b, patient=a)        # as the GM
    t.do("stabilize", by=t.p1, char=a)                 # as player 1
    t.char(a).condition == "stable"

`Table.do` keeps the new room on success and re-raises refusals untouched,
so `pytest.raises(RuleBroken)` works and `t.room` is still the old state.
"""

from __future__ import annotations

from typing import Any

from rules.context import Actor
from rules.dice import ScriptedDice
from rules.engine import Outcome, apply, new_room
from rules.model import ABILITIES, Character, Room
from rules.validate import MAX_CHARACTERS

# A level-3 sheet: PV 20, PE 15, PP 6, Con 14 (+2), Medicine +5.
SHEET: dict[str, Any] = {
    "level": 3,
    "pv_max": 20,
    "pe_max": 15,
    "pp_max": 6,
    "abilities": {"str": 10, "dex": 14, "con": 14, "int": 10, "wis": 12, "cha": 8},
    "medicine": 5,
}


class Table:
    """A room with a GM, two players and an observer, characters built from
    short sheets, every die chosen by the test (`ScriptedDice`)."""

    def __init__(self, round_seconds: int = 6) -> None:
        self.dice = ScriptedDice()
        room, gm = new_room("r1", "Table du jeudi", "Maya")
        self.room: Room = room
        self.gm = Actor(gm, "gm")
        self.p1 = self._user("Paul", "player")
        self.p2 = self._user("Zoé", "player")
        self.obs = self._user("Olga", "observer")
        self.events: list[dict[str, Any]] = []
        if round_seconds != 6:
            self.do("update_room", round_seconds=round_seconds)

    def _user(self, name: str, role: str) -> Actor:
        out = apply(self.room, "add_user", {"name": name, "role": role}, self.gm, self.dice)
        self.room = out.room
        return Actor(out.result["user"], role)

    def do(self, op: str, by: Actor | None = None, **args: Any) -> Outcome:
        out = apply(self.room, op, args, by or self.gm, self.dice)
        self.room = out.room
        self.events = out.events
        return out

    def add(self, name: str = "Aline", owner: Actor | None = None, **sheet: Any) -> str:
        args = {**SHEET, **sheet, "name": name}
        if owner is not None:
            args["owner"] = owner.user
        cid: str = self.do("add_character", **args).result["char"]
        return cid

    def char(self, cid: str) -> Character:
        return self.room.characters[cid]

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        """The last command's events of one kind."""
        return [e for e in self.events if e["kind"] == kind]

    # Shortcuts to put a character in a condition through the rules themselves.
    def down(self, cid: str) -> None:
        """Lethal damage to exactly 0 PV: dying (D2)."""
        c = self.char(cid)
        self.do("damage", char=cid, amount=c.pe + c.pv)
        assert self.char(cid).condition == "dying"

    def stabilised(self, cid: str) -> None:
        """Dying, then stable by a stabilising heal of 0 (S2)."""
        self.down(cid)
        self.do("heal", char=cid, amount=0, stabilize=True)
        assert self.char(cid).condition == "stable"


def _sheet(cid: str, seq: int, scores: dict[str, int], **fields: Any) -> Character:
    base = {"pv": 10, "pe": 5, "medicine": 0} | fields
    return Character(
        id=cid, seq=seq, name=cid, owner=None, level=2, pv_max=10, pe_max_base=5,
        pp=3, pp_max=3, abilities=scores, ability_damage=dict.fromkeys(ABILITIES, 0),
        shown="status", **base,
    )  # fmt: skip


def stable_room(n: int, con: int = 10, healer_medicine: int | None = None) -> Room:
    """A room of `n` characters stable at 0 PV since second 0 (L1), built as
    plain data so that hundreds cost nothing; with `healer_medicine`, each
    has a conscious healer of that Medicine bonus (L4). Used by the exact-odds
    test and the benchmarks."""
    room, _ = new_room("stable", "Stable", "GM")
    for i in range(n):
        patient = _sheet(
            f"s{i}", i + 1, dict.fromkeys(ABILITIES, 10) | {"con": con},
            pv=0, pe=0, condition="stable", stable_since=0,
        )  # fmt: skip
        room.characters[patient.id] = patient
        if healer_medicine is not None:
            healer = _sheet(
                f"h{i}", n + i + 1, dict.fromkeys(ABILITIES, 10), medicine=healer_medicine
            )
            room.characters[healer.id] = healer
            patient.healer = healer.id
    room.next_seq = 2 * n + 1
    return room


class AlwaysDice:
    """Dice that always roll the same natural. With 10, every hourly check
    of a Con 10 patient whose healer has Medicine +5 is a "stay" (the healer
    succeeds with 15, the patient makes 10 + 2 = 12): the most events eight
    hours can make (see `infirmary`)."""

    def __init__(self, natural: int = 10) -> None:
        self.natural = natural

    def d20(self) -> int:
        return self.natural


def infirmary() -> Table:
    """The room within the bounds whose clock advance emits the most events:
    MAX_CHARACTERS characters, one healer (Medicine +5) tending all the
    others, stable at 0 PV since second 0, all Con 10; built by ordinary
    commands. With `AlwaysDice(10)` each patient makes its eight checks with
    the healer's roll, then wakes (L2) and its tending ends: 19 events."""
    t = Table()
    con10 = {**SHEET["abilities"], "con": 10}
    healer = t.add("Healer", abilities=con10)
    for i in range(MAX_CHARACTERS - 1):
        p = t.add(f"P{i}", abilities=con10)
        t.stabilised(p)
        t.do("tend", char=healer, patient=p)
    return t
