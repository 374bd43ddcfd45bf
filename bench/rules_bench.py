"""Benchmark of the pure rules engine (no I/O): prints figures and ratios.

    python -m bench.rules_bench [--repeat 5]

- commands per second on a typical table (6 characters, mixed commands),
  for `apply` alone and with the server's per-command work (to_dict + diff);
- the cost of advance_clock over 8 hours vs 1 year with 100 stable
  characters, and with 100 dying ones (T2: the cost follows the rule
  firings, not the seconds; D5's repeated losses are one firing);
- the worst command we can build within the bounds of rules/validate.py
  (docs/rules.md, "Bounds"): its time, events and patch size, since a
  command's rules evaluation holds the server's event loop.
- views (rules/view.py) on a 6-character room (4 players' characters in
  full, a GM's NPC in status, a hidden one): `restricted` on every patch,
  and `view_patch` for the public view of the patches it flags.
Medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from rules import (
    Actor,
    Dice,
    Refused,
    Room,
    SeededDice,
    Viewer,
    apply,
    diff,
    new_room,
    restricted,
    view_patch,
    view_state,
)
from rules.testing import SHEET, AlwaysDice, Table, infirmary, stable_room
from rules.validate import MAX_ADVANCE, MAX_CHARACTERS, MAX_EVENTS, MAX_ORDER, MAX_PP

HOUR = 3600
YEAR = 365 * 24 * HOUR


def typical_table() -> tuple[Room, Actor]:
    room, gm = new_room("bench", "Bench", "GM")
    actor = Actor(gm, "gm")
    dice = SeededDice(1)
    for i in range(6):
        room = apply(room, "add_character", {**SHEET, "name": f"PC{i}"}, actor, dice).room
    return room, actor


def mixed_commands(n: int) -> list[tuple[str, dict]]:
    cids = [f"c{i + 1}" for i in range(6)]
    script: list[tuple[str, dict]] = []
    for i in range(n):
        c = cids[i % 6]
        k = i % 10
        if k in (0, 1, 2):
            script.append(("damage", {"char": c, "amount": 7}))
        elif k in (3, 4):
            script.append(("heal", {"char": c, "amount": 9}))
        elif k == 5:
            script.append(("first_aid", {"char": cids[(i + 1) % 6], "patient": c}))
        elif k == 6:
            script.append(("stabilize", {"char": c}))
        elif k == 7:
            script.append(("advance_clock", {"seconds": 60}))
        elif k == 8:
            script.append(("ability_damage", {"char": c, "ability": "str", "amount": 1}))
        else:
            script.append(("heal", {"char": c, "amount": 30}))
    return script


def bench_commands(n: int, with_diff: bool) -> float:
    room, actor = typical_table()
    dice = SeededDice(2)
    script = mixed_commands(n)
    old = room.to_dict()
    t0 = time.perf_counter()
    for op, args in script:
        try:
            new_room = apply(room, op, args, actor, dice).room
        except Refused:
            continue
        if with_diff:
            new = new_room.to_dict(since=(room, old))
            diff(old, new)
            old = new
        room = new_room
    return n / (time.perf_counter() - t0)


def views_table() -> tuple[Room, Actor, list[str]]:
    """Six characters: four players' (full), the GM's NPC (status by
    default) and a hidden one; two players own two characters each."""
    room, gm = new_room("bench", "Bench", "GM")
    actor = Actor(gm, "gm")
    dice = SeededDice(1)
    players = []
    for name in ("P1", "P2"):
        out = apply(room, "add_user", {"name": name, "role": "player"}, actor, dice)
        room = out.room
        players.append(out.result["user"])
    for i in range(6):
        args: dict = {**SHEET, "name": f"C{i}"}
        if i < 4:
            args["owner"] = players[i % 2]
        elif i == 5:
            args["shown"] = "hidden"
        room = apply(room, "add_character", args, actor, dice).room
    return room, actor, players


def bench_views(n: int) -> dict[str, float]:
    """Per patch of the mixed script: the server's work without views
    (to_dict + diff), `restricted`, and `view_patch` for the public view
    when restricted (the GM's view is the plain patch)."""
    room, actor, _ = views_table()
    dice = SeededDice(2)
    patches = []
    old = room.to_dict()
    for op, args in mixed_commands(n):
        try:
            out = apply(room, op, args, actor, dice)
        except Refused:
            continue
        new = out.room.to_dict(since=(room, old))
        patches.append((old, new, diff(old, new), out.events))
        room, old = out.room, new
    public = Viewer("u9", "observer")
    t0 = time.perf_counter()
    flags = [restricted(ops, events, b, a) for b, a, ops, events in patches]
    t1 = time.perf_counter()
    flagged = [p for p, f in zip(patches, flags, strict=True) if f]
    for b, a, ops, events in flagged:
        view_patch(b, a, ops, events, public)
    t2 = time.perf_counter()
    unflagged = [p for p, f in zip(patches, flags, strict=True) if not f]
    t3 = time.perf_counter()
    for b, a, ops, events in unflagged:
        view_patch(b, a, ops, events, public)
    t4 = time.perf_counter()
    for b, a, _ops, _events in flagged:
        diff(view_state(b, public), view_state(a, public))
    t5 = time.perf_counter()
    return {
        "patches": len(patches),
        "restricted share": len(flagged) / len(patches),
        "restricted us": (t1 - t0) / len(patches) * 1e6,
        "view_patch us": (t2 - t1) / max(1, len(flagged)) * 1e6,
        "view_patch shared us": (t4 - t3) / max(1, len(unflagged)) * 1e6,
        "whole views diff us": (t5 - t4) / max(1, len(flagged)) * 1e6,
    }


def bench_advance(seconds: int, n: int = 100) -> float:
    room = stable_room(n, con=14)
    actor = Actor("u1", "gm")
    t0 = time.perf_counter()
    apply(room, "advance_clock", {"seconds": seconds}, actor, SeededDice(3))
    return time.perf_counter() - t0


def dying_room(n: int, pp: int, round_seconds: int) -> Table:
    """`n` characters dying out of combat with `pp` PP each, all since the
    same instant (their losses tie and go in character order)."""
    t = Table(round_seconds=round_seconds)
    for i in range(n):
        t.down(t.add(f"D{i}", pp_max=pp))
    return t


def bench_dying_advance(seconds: int, t: Table) -> float:
    t0 = time.perf_counter()
    apply(t.room, "advance_clock", {"seconds": seconds}, t.gm, SeededDice(3))
    return time.perf_counter() - t0


# ---------------------------------------------------------------- worst cases within the bounds


def resting_camp() -> Table:
    """MAX_ORDER characters each in a rest, all thrown into one combat."""
    t = Table()
    for i in range(MAX_ORDER):
        c = t.add(f"R{i}")
        t.do("rest", char=c, kind="bed")
    return t


def last_turn_of_a_full_round() -> Table:
    """A combat of MAX_ORDER dying combatants at the last one's turn, the
    round's six seconds of world time still to run."""
    t = Table()
    ids = [t.add(f"C{i}", pp_max=MAX_PP) for i in range(MAX_ORDER)]
    t.do("combat_start", order=ids)
    for c in ids:
        t.down(c)
    for c in ids[:-1]:
        t.do("end_turn", char=c)
    return t


def worst_cases() -> list[tuple[str, Table, str, dict, Dice]]:
    inf = infirmary()
    dying = dying_room(MAX_CHARACTERS, MAX_PP, 1)
    camp = resting_camp()
    order = list(camp.room.characters)
    last = last_turn_of_a_full_round()
    assert last.room.combat is not None
    last_turn = last.room.combat.order[-1]
    healer = next(iter(inf.room.characters))
    return [
        (
            f"advance_clock a century, {MAX_CHARACTERS - 1} tended patients staying stable",
            inf, "advance_clock", {"seconds": MAX_ADVANCE}, AlwaysDice(10),
        ),
        (
            f"advance_clock a century, {MAX_CHARACTERS} dying with {MAX_PP} PP, 1 s rounds",
            dying, "advance_clock", {"seconds": MAX_ADVANCE}, SeededDice(1),
        ),
        (
            f"combat_start, {MAX_ORDER} characters resting",
            camp, "combat_start", {"order": order}, SeededDice(1),
        ),
        (
            f"end_turn closing a round of {MAX_ORDER} dying combatants",
            last, "end_turn", {"char": last_turn}, SeededDice(1),
        ),
        (
            f"remove_character, the healer of {MAX_CHARACTERS - 1} patients",
            inf, "remove_character", {"char": healer}, SeededDice(1),
        ),
    ]  # fmt: skip


def bench_command(t: Table, op: str, args: dict, dice: Dice) -> tuple[float, float, int, int]:
    """(apply seconds, apply + to_dict + diff seconds, events, patch bytes as
    JSON): the second is what the server's event loop does per command."""
    old = t.room.to_dict()
    t0 = time.perf_counter()
    out = apply(t.room, op, args, t.gm, dice)
    t1 = time.perf_counter()
    ops = diff(old, out.room.to_dict(since=(t.room, old)))
    t2 = time.perf_counter()
    size = len(json.dumps({"ops": ops, "events": out.events}))
    return t1 - t0, t2 - t0, len(out.events), size


def report_worst(repeat: int) -> None:
    med = statistics.median
    print(
        f"worst commands within the bounds (rules/validate.py: {MAX_CHARACTERS} characters,"
        f" {MAX_ORDER} combatants, PP <= {MAX_PP}, <= {MAX_EVENTS} events), median of {repeat}:"
    )
    rows = []
    for label, t, op, args, dice in worst_cases():
        runs = [bench_command(t, op, args, dice) for _ in range(repeat)]
        rows.append((med(r[1] for r in runs), label, med(r[0] for r in runs), runs[0]))
    for total, label, apply_s, (_, _, events, size) in rows:
        print(f"  {label}")
        print(
            f"    apply {apply_s * 1e3:7.2f} ms, + to_dict + diff {total * 1e3:7.2f} ms;"
            f" {events:5d} events, patch {size / 1024:6.0f} KiB as JSON"
        )
    worst = max(rows)
    print(f"  worst: {worst[0] * 1e3:.2f} ms ({worst[1]})")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--commands", type=int, default=20_000)
    ns = ap.parse_args()
    med = statistics.median
    apply_only = med(bench_commands(ns.commands, False) for _ in range(ns.repeat))
    with_diff = med(bench_commands(ns.commands, True) for _ in range(ns.repeat))
    h8 = med(bench_advance(8 * HOUR) for _ in range(ns.repeat))
    year = med(bench_advance(YEAR) for _ in range(ns.repeat))
    # 10-minute rounds: eight hours cost each 48 of its 100 PP, a year kills it.
    dying = dying_room(100, MAX_PP, 600)
    d8 = med(bench_dying_advance(8 * HOUR, dying) for _ in range(ns.repeat))
    dyear = med(bench_dying_advance(YEAR, dying) for _ in range(ns.repeat))
    views = [bench_views(ns.commands) for _ in range(ns.repeat)]
    print(f"rules engine, typical table (6 characters, mixed commands), median of {ns.repeat}:")
    for label, rate in (("apply only", apply_only), ("apply + to_dict + diff", with_diff)):
        print(f"  {label:24} {rate:10,.0f} commands/s  ({1e6 / rate:6.1f} us/command)")
    print("views, 6 characters (4 full, 1 status, 1 hidden), per patch:")
    v = {k: med(r[k] for r in views) for k in views[0]}
    print(f"  restricted():                  {v['restricted us']:6.2f} us  (every patch)")
    print(
        f"  view_patch(), public view:     {v['view_patch us']:6.2f} us"
        f"  (per view class, on the {v['restricted share']:.0%} of patches restricted)"
    )
    print(
        f"  view_patch(), not restricted:  {v['view_patch shared us']:6.2f} us"
        "  (returns the plain patch)"
    )
    print(
        f"  (for reference, diffing the two whole views: {v['whole views diff us']:.2f} us"
        " without the events)"
    )
    print("advance_clock with 100 stable characters:")
    print(f"  8 hours:  {h8 * 1e3:8.2f} ms")
    print(f"  1 year:   {year * 1e3:8.2f} ms")
    print(f"  ratio 1 year / 8 hours: {year / h8:.2f}x  (target <= 2x)")
    print(f"advance_clock with 100 dying characters ({MAX_PP} PP, 10-minute rounds):")
    print(f"  8 hours:  {d8 * 1e3:8.2f} ms  (48 losses each, one event each)")
    print(f"  1 year:   {dyear * 1e3:8.2f} ms  (100 losses and death each, two events each)")
    print(f"  ratio 1 year / 8 hours: {dyear / d8:.2f}x  (target <= 2x)")
    report_worst(ns.repeat)


if __name__ == "__main__":
    main()
