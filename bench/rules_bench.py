"""Benchmark of the pure rules engine (no I/O): prints figures and ratios.

    python -m bench.rules_bench [--repeat 5]

- commands per second on a typical table (6 characters, mixed commands),
  for `apply` alone and with the server's per-command work (to_dict + diff);
- the cost of advance_clock over 8 hours vs 1 year with 100 stable
  characters (T2: the cost follows the rule firings, not the seconds).
Medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from rules import Actor, Refused, Room, SeededDice, apply, diff, new_room
from rules.testing import SHEET, stable_room


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


def bench_advance(seconds: int, n: int = 100) -> float:
    room = stable_room(n, con=14)
    actor = Actor("u1", "gm")
    t0 = time.perf_counter()
    apply(room, "advance_clock", {"seconds": seconds}, actor, SeededDice(3))
    return time.perf_counter() - t0


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
    h8 = med(bench_advance(8 * 3600) for _ in range(ns.repeat))
    year = med(bench_advance(365 * 24 * 3600) for _ in range(ns.repeat))
    print(f"rules engine, typical table (6 characters, mixed commands), median of {ns.repeat}:")
    for label, rate in (("apply only", apply_only), ("apply + to_dict + diff", with_diff)):
        print(f"  {label:24} {rate:10,.0f} commands/s  ({1e6 / rate:6.1f} us/command)")
    print("advance_clock with 100 stable characters:")
    print(f"  8 hours:  {h8 * 1e3:8.2f} ms")
    print(f"  1 year:   {year * 1e3:8.2f} ms")
    print(f"  ratio 1 year / 8 hours: {year / h8:.2f}x  (target <= 2x)")


if __name__ == "__main__":
    main()
