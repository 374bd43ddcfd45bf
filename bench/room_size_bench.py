"""Room size: a command's cost in the room core, 5 characters vs many.

    python -m bench.room_size_bench [--sizes 5,50,200] [--commands 4000] [--repeat 5]
    python -m bench.room_size_bench --base ../base     # today's code too, interleaved
    python -m bench.room_size_bench --affordances      # with and without, interleaved

Drives `RoomCore` (evaluate + commit: rules.apply, the dict form, diff,
invert, views check, the version record) with server_bench's GM loop
(damage/heal an NPC, heal a PC, end_turn in a 4-character combat, a
minute of world time), in a room of 4 PCs and the NPC plus bystanders
nobody touches, every character shown in full (as there: no per-role
views to build). The room has server_bench's users: the GM, a player
owning each PC, and three observers, all connected (what each may do is
kept current for them: rules/affordances.py). No socket, no storage: the part of a command that may
grow with the room. Prints us/command (thread CPU time, medians of
--repeat) per size and each size's ratio to the smallest. With --base,
each tree's own copy of this script (it imports that tree's room core)
runs in a child process, round by round, and the ratios new/today are
printed too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

from bench.server_bench import SHEET


def measure(size: int, commands: int, affordances: bool = True) -> float:
    """us of thread CPU per command in a room of `size` characters."""
    import rules
    from sync_server.core.auth import RecentTokens
    from sync_server.core.inputs import NO_EXPECT, CommandIn
    from sync_server.core.room import RoomCore
    from sync_server.storage import LoadedRoom

    room, gm_id = rules.new_room("r", "bench", "GM")
    core = RoomCore(
        LoadedRoom("r", 0, room.to_dict(), [], []),
        dice=rules.SeededDice(1),
        wall_clock=time.time,
        new_token=lambda: "token",
        recent_tokens=RecentTokens(600.0, time.monotonic),
        affordances=affordances,
    )
    gm = rules.Actor(gm_id, "gm")
    ids = itertools.count()

    def run(op: str, **args: object) -> dict:
        d = core.evaluate(CommandIn(gm, 0, f"c{next(ids)}", op, args, NO_EXPECT))
        core.commit()
        return d.reply

    players = [run("add_user", name=f"P{i}", role="player")["result"]["user"] for i in range(4)]
    observers = [run("add_user", name=f"O{i}", role="observer")["result"]["user"] for i in range(3)]
    pcs = [
        run("add_character", **SHEET, name=f"PC{i}", shown="full", owner=players[i])["result"][
            "char"
        ]
        for i in range(4)
    ]
    npc = run("add_character", **SHEET, name="NPC", shown="full")["result"]["char"]
    for i in range(max(0, size - 5)):
        run("add_character", **SHEET, name=f"B{i}", shown="full")
    run("combat_start", order=pcs)
    for uid in [gm_id, *players, *observers]:  # each shown the room, as by a welcome:
        core.view(core.viewer(uid))  # what each may do is kept current from now on

    def one(n: int) -> None:
        k = n % 4
        if k == 0:
            run("damage" if n % 8 == 0 else "heal", char=npc, amount=2)
        elif k == 1:
            run("heal", char=pcs[1], amount=2)
        elif k == 2:
            combat = core.view(None)["combat"]
            run("end_turn", char=combat["order"][combat["turn"]])
        else:
            run("advance_clock", seconds=60)

    for n in range(200):  # warm-up
        one(n)
    t0 = time.thread_time()
    for n in range(commands):
        one(n)
    return (time.thread_time() - t0) / commands * 1e6


def child(sizes: list[int], commands: int, affordances: bool) -> dict[int, float]:
    return {size: measure(size, commands, affordances) for size in sizes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="5,50,200")
    ap.add_argument("--commands", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--base", help="another tree: its code measured too, interleaved")
    ap.add_argument(
        "--affordances",
        action="store_true",
        help="also run each round without affordances (RoomCore(affordances=False)), interleaved",
    )
    ap.add_argument("--without", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    sizes = [int(s) for s in ns.sizes.split(",")]
    if ns.child:
        print(json.dumps(child(sizes, ns.commands, not ns.without)))
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"new": (here, False)} | (
        {"today": (os.path.abspath(ns.base), False)} if ns.base else {}
    )
    if ns.affordances:
        trees |= {"without": (here, True)}
    runs: dict[str, list[dict[int, float]]] = {k: [] for k in trees}
    for _ in range(ns.repeat):
        for name, (tree, without) in trees.items():
            out = subprocess.run(
                [sys.executable, os.path.join(tree, "bench", "room_size_bench.py"), "--child",
                 "--sizes", ns.sizes,
                 "--commands", str(ns.commands), *(["--without"] if without else [])],
                env={**os.environ, "PYTHONPATH": tree}, capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs[name].append({int(k): v for k, v in json.loads(out.stdout).items()})
    med = {
        name: {s: statistics.median(r[s] for r in rs) for s in sizes} for name, rs in runs.items()
    }
    print(f"room core, us/command (thread CPU), server_bench's mix, median of {ns.repeat}:")
    print(f"{'characters':>12}" + "".join(f"{n:>12}{'vs ' + str(sizes[0]):>10}" for n in trees))
    for s in sizes:
        cells = "".join(f"{med[n][s]:12.1f}{med[n][s] / med[n][sizes[0]]:9.2f}x" for n in trees)
        print(f"{s:>12}" + cells)
    if ns.affordances:
        print(
            "with/without affordances: "
            + "  ".join(f"{s}: {med['new'][s] / med['without'][s]:.2f}x" for s in sizes)
        )
    if ns.base:
        print(
            "new/today: " + "  ".join(f"{s}: {med['new'][s] / med['today'][s]:.2f}x" for s in sizes)
        )


if __name__ == "__main__":
    main()
