"""A tour of the table: every op of the op table, accepted once, through the
rules engine, with the events each emitted. The reference tests use it to
check that each op's events are the ones rules/catalog.py lists, and that
every event kind and every undoable op reads as a sentence.

    for step in tour():
        step.op, step.args, step.events, step.state
"""

from __future__ import annotations

from typing import Any

import attrs

from tests.helpers.table import Table


@attrs.frozen
class Step:
    op: str
    args: dict[str, Any]
    events: list[dict[str, Any]]
    state: dict[str, Any]  # the room after the step (names for the sentences)


def tour() -> list[Step]:
    t = Table()
    steps: list[Step] = []

    def do(op: str, **args: Any) -> None:
        out = t.do(op, **args)
        steps.append(Step(op, args, out.events, out.room.to_dict()))

    do("update_room", name="Thursday table", round_seconds=6)
    do("add_user", name="Dana", role="player")
    dana = steps[-1].events[0]["user"]
    do("rotate_token", user=dana)
    sheet = {
        "level": 3, "pv_max": 20, "pe_max": 15, "pp_max": 6, "medicine": 5,
        "abilities": {"str": 10, "dex": 14, "con": 14, "int": 10, "wis": 12, "cha": 8},
    }  # fmt: skip
    do("add_character", name="Aline", owner=t.p1.user, **sheet)
    do("add_character", name="Bastien", **sheet)
    do("add_character", name="Chloe", owner=dana, **sheet)
    a, b, c = "c1", "c2", "c3"
    do("update_character", char=a, set={"pv_max": 22, "pv": 18})
    do("queue_rolls", rolls=[17, 12])
    do("combat_start", order=[a, b])
    do("damage", char=a, amount=40)  # dying (D2)
    do("end_turn", char=a)  # started dying this turn: no PP loss (D5 ruling)
    do("first_aid", char=b, patient=a)  # 17 + 5: stable
    do("tend", char=b, patient=a)
    do("untend", patient=a)
    do("stay_in_fight", char=a)  # 1 PP: conscious
    do("set_order", order=[b, a])  # the tracker reordered: b keeps its turn
    do("set_order", order=[a, b], turn=1)  # and back; still b's turn, now last
    do("roll_initiative", bonus={b: 1}, rolls={a: 11, b: 9})  # T4: 13, 12; b keeps its turn
    do("end_turn", char=b)  # new round: the clock moves
    do("damage", char=a, amount=5, pv_only=True)  # dying again
    do("end_turn", char=a)  # loses 1 PP (D5)
    do("stabilize", char=a)
    do("combat_end")
    do("rest", char=c, kind="night")
    do("stop_rest", char=c)
    do("rest", char=c, kind="short")
    do("advance_clock", seconds=3600)  # the short rest completes; Aline's hourly check
    do("ability_damage", char=c, ability="con", amount=2)
    do("ability_restore", char=c, ability="con", amount=1)
    do("heal", char=a, amount=5)
    do("remove_character", char=b)
    do("remove_user", user=dana)
    return steps
