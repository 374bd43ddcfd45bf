"""Big rooms (issue 36): a century of clock and its undo where many view
classes or many patients are concerned.

    python -m bench.big_room_bench [--cycles 10] [--long-cycles 44] [--runs 1]
                                   [--scenario both|classes|ward]
                                   [--base NAME=PATH,NAME=PATH]

One server per tree (a child process, durable acks, default settings), on
loopback, three rooms built by ordinary commands:

- `classes` (a): 98 connected players, each owning two tended patients
  (196 stable characters at 0 PV, `status` to the others, tended by one
  healer of the GM's: 98 views and view classes of their own). The GM
  advances the clock by a century (100 years, the largest `advance_clock`
  takes: every patient's eight hourly checks, then it wakes) and undoes
  it, --cycles times; printed: each command's answer time at the GM (send
  to ack), median and max. Meanwhile a quiet room's GM sends 1-second
  advances in a closed loop: its p99. Before the cycles, 40 ordinary
  commands of the GM (its healer damaged and healed by 1: no player's
  answer changes), alone on the server: their answer time and the
  server's CPU per command (what "work grows with the classes whose
  answers change" is about).
- `ward` (b): 199 stable patients of the GM's (`status`), one healer, 96
  observers connected; --long-cycles century advances and undos in a row:
  the wall time to the last ack, and to the last observer having the last
  version, per cycle and for the issue's 44 cycles (extrapolated when
  fewer ran).

The players and observers read in a process of their own, the quiet room's
client in another (their decoding is not the GM's wait). With --base, every
tree's server runs in each round, one after the other, and the ratios are
to the first tree. Bounded: at most --max-seconds of cycles per scenario
(the cycles done are printed).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from typing import Any

from bench.harness import (
    Helper,
    Reader,
    close_peer,
    open_peer,
    pipelined,
    start_tree,
)
from bench.isolation_bench import CENTURY
from bench.server_bench import ADMIN_TOKEN, SHEET, cpu_seconds, parse_trees, pct, stop_server

PLAYERS = 98  # (a): each with a view class of their own
PATIENTS_PER_PLAYER = 2  # (a): 196 tended patients
WARD_PATIENTS = 199  # (b): with the healer, the rules' 200 characters
OBSERVERS = 96  # (b)
ORDINARY = 40  # (a): the GM's ordinary commands, before the cycles
ISSUE_CYCLES = 44  # (b): the issue's figure (74 s on main before issue 36)
MAX_CYCLES = 200


def patient_calls(
    prefix: str, index: int, healer: str, owner: str | None
) -> list[tuple[str, str, dict[str, Any]]]:
    """A stable character at 0 PV tended by `healer`, shown as `status`
    (players see its condition, not its numbers: every player's view of
    the room is their own, as in isolation_bench's classes): three
    commands."""
    cid = f"{prefix}{index}"
    sheet: dict[str, Any] = {**SHEET, "name": f"Patient {cid}", "id": cid, "shown": "status"}
    if owner is not None:
        sheet["owner"] = owner
    return [
        (f"mk-{cid}", "add_character", sheet),
        (f"st-{cid}", "update_character", {"char": cid, "set": {"pv": 0, "condition": "stable"}}),
        (f"td-{cid}", "tend", {"char": healer, "patient": cid}),
    ]


async def create_room(url: str, room: str) -> str:
    admin, reader = await open_peer(url, ADMIN_TOKEN, None)
    ack = await admin.command(f"mk-{room}", "create_room", {"room": room, "name": room})
    await close_peer(admin, reader)
    return str(ack["result"]["gm_token"])


async def setup(url: str, scenarios: tuple[str, ...]) -> dict[str, Any]:
    """The rooms, their users' tokens, and how many commands built them."""
    out: dict[str, Any] = {"quiet": await create_room(url, "quiet"), "commands": 0}
    for room in scenarios:
        gm_token = await create_room(url, room)
        gm, reader = await open_peer(url, gm_token, room)
        healer = {**SHEET, "name": "Healer", "id": "healer", "medicine": 5}
        await gm.command("mk-healer", "add_character", healer)
        if room == "classes":
            users = await pipelined(
                gm,
                (
                    (f"u{i}", "add_user", {"name": f"Player {i}", "role": "player"})
                    for i in range(PLAYERS)
                ),
            )
            calls = [
                call
                for i, u in enumerate(users)
                for k in range(PATIENTS_PER_PLAYER)
                for call in patient_calls(
                    "p", i * PATIENTS_PER_PLAYER + k, "healer", u["result"]["user"]
                )
            ]
        else:
            users = await pipelined(
                gm,
                (
                    (f"u{i}", "add_user", {"name": f"Observer {i}", "role": "observer"})
                    for i in range(OBSERVERS)
                ),
            )
            calls = [c for i in range(WARD_PATIENTS) for c in patient_calls("w", i, "healer", None)]
        await pipelined(gm, calls)
        out["commands"] += 1 + len(users) + len(calls)
        await close_peer(gm, reader)
        out[room] = {"gm": gm_token, "readers": [u["result"]["token"] for u in users]}
    return out


def readers_process(url: str, room: str, tokens: list[str], conn: Any) -> None:
    """The room's players or observers, connected and reading, in a process
    of their own: says "ready" when all are in, and on "stop" answers with
    each one's (last version, when it arrived)."""

    async def run() -> None:
        readers = [Reader() for _ in tokens]
        events = [asyncio.Event() for _ in tokens]
        tasks = []
        for r, token, ev in zip(readers, tokens, events, strict=True):
            tasks.append(asyncio.create_task(r.run(url, token, room, ev)))
            await ev.wait()  # one at a time: no burst of hellos
        conn.send("ready")
        await asyncio.to_thread(conn.recv)
        conn.send([(r.v, r.at, r.frames) for r in readers])
        for t in tasks:
            t.cancel()

    asyncio.run(run())


def quiet_process(url: str, token: str, conn: Any) -> None:
    """The quiet room's GM: 1-second advances in a closed loop until told to
    stop; answers with their latencies (send to ack)."""

    async def run() -> None:
        gm, reader = await open_peer(url, token, "quiet")
        conn.send("ready")
        stop = asyncio.create_task(asyncio.to_thread(conn.recv))
        latencies = []
        n = 0
        while not stop.done():
            n += 1
            t0 = time.perf_counter()
            await gm.command(f"q{n}", "advance_clock", {"seconds": 1})
            latencies.append(time.perf_counter() - t0)
        conn.send(latencies)
        await close_peer(gm, reader)

    asyncio.run(run())


async def cycles(
    url: str, room: str, token: str, n: int, budget: float
) -> list[tuple[float, float]]:
    """The GM's century advances and undos: (advance, undo) answer times, s."""
    gm, reader = await open_peer(url, token, room)
    out = []
    deadline = time.perf_counter() + budget
    for i in range(n):
        t0 = time.perf_counter()
        a = await gm.command(f"cent-{i}", "advance_clock", {"seconds": CENTURY})
        t1 = time.perf_counter()
        u = await gm.command(f"undo-{i}", "undo", {})
        t2 = time.perf_counter()
        if a["t"] != "ack" or u["t"] != "ack":
            raise RuntimeError(f"a century or its undo refused: {a} {u}")
        out.append((t1 - t0, t2 - t1))
        if time.perf_counter() > deadline:
            break
    await close_peer(gm, reader)
    return out


async def ordinary(url: str, token: str, pid: int, n: int) -> tuple[list[float], float]:
    """The GM's ordinary commands in the big room (the GM's healer damaged
    and healed by 1 in turn: no player's answer changes): their answer
    times, s, and the server's CPU per command, s."""
    gm, reader = await open_peer(url, token, "classes")
    times = []
    cpu0 = cpu_seconds(pid)
    for i in range(n):
        op = "damage" if i % 2 == 0 else "heal"
        t0 = time.perf_counter()
        reply = await gm.command(f"ord-{i}", op, {"char": "healer", "amount": 1})
        times.append(time.perf_counter() - t0)
        if reply["t"] != "ack":
            raise RuntimeError(f"an ordinary command refused: {reply}")
    await asyncio.sleep(0.2)  # its patches sent
    cpu = (cpu_seconds(pid) - cpu0) / n
    await close_peer(gm, reader)
    return times, cpu


def run_classes(
    url: str, pid: int, tokens: dict[str, Any], ns: argparse.Namespace
) -> dict[str, float]:
    readers = Helper(readers_process, url, "classes", tokens["classes"]["readers"])
    readers.wait_ready()
    plain, cpu = asyncio.run(ordinary(url, tokens["classes"]["gm"], pid, ORDINARY))
    quiet = Helper(quiet_process, url, tokens["quiet"])
    quiet.wait_ready()
    times = asyncio.run(cycles(url, "classes", tokens["classes"]["gm"], ns.cycles, ns.max_seconds))
    q = quiet.finish()
    readers.finish()
    adv, undo = [a for a, _ in times], [u for _, u in times]
    return {
        "ordinary_med_ms": statistics.median(plain) * 1e3,
        "ordinary_cpu_ms": cpu * 1e3,
        "cycles": len(times),
        "advance_med_ms": statistics.median(adv) * 1e3,
        "advance_max_ms": max(adv) * 1e3,
        "undo_med_ms": statistics.median(undo) * 1e3,
        "undo_max_ms": max(undo) * 1e3,
        "quiet_p50_ms": pct(q, 0.5) * 1e3,
        "quiet_p99_ms": pct(q, 0.99) * 1e3,
    }


def run_ward(url: str, tokens: dict[str, Any], ns: argparse.Namespace) -> dict[str, float]:
    readers = Helper(readers_process, url, "ward", tokens["ward"]["readers"])
    readers.wait_ready()
    t0 = time.perf_counter()
    times = asyncio.run(cycles(url, "ward", tokens["ward"]["gm"], ns.long_cycles, ns.max_seconds))
    acked = time.perf_counter() - t0
    seen = readers.finish()
    # The last version every observer has, and when the last of them got it.
    caught_up = max(at for _, at, _ in seen) - t0
    n = len(times)
    return {
        "cycles": n,
        "wall_s": acked,
        "observers_s": caught_up,
        "per_cycle_ms": acked / n * 1e3,
        "issue_44_s": acked / n * ISSUE_CYCLES,
        "observers_44_s": caught_up / n * ISSUE_CYCLES,
    }


def one_run(tree: str | None, ns: argparse.Namespace) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as data:
        proc, url = start_tree(data, tree, ["--log-level", "WARNING"])
        try:
            t0 = time.perf_counter()
            tokens = asyncio.run(setup(url, ns.scenarios))
            took = time.perf_counter() - t0
            out = {"setup": {"s": took, "per_cmd_ms": took / tokens["commands"] * 1e3}}
            if "classes" in ns.scenarios:
                out["classes"] = run_classes(url, proc.pid, tokens, ns)
            if "ward" in ns.scenarios:
                out["ward"] = run_ward(url, tokens, ns)
            return out
        finally:
            stop_server(proc)


ROWS = {
    "classes": (
        ("ordinary_med_ms", "ordinary command: ack ms, median"),
        ("ordinary_cpu_ms", "ordinary command: server CPU ms"),
        ("cycles", "cycles run"),
        ("advance_med_ms", "century: GM's ack ms, median"),
        ("advance_max_ms", "century: max"),
        ("undo_med_ms", "undo: GM's ack ms, median"),
        ("undo_max_ms", "undo: max"),
        ("quiet_p50_ms", "quiet room p50 ms"),
        ("quiet_p99_ms", "quiet room p99 ms"),
    ),
    "ward": (
        ("cycles", "cycles run"),
        ("per_cycle_ms", "ms per cycle (to the ack)"),
        ("wall_s", "wall s, to the last ack"),
        ("observers_s", "wall s, to the observers"),
        ("issue_44_s", "44 cycles s (to the ack)"),
        ("observers_44_s", "44 cycles s (observers)"),
    ),
    "setup": (
        ("s", "setup of the rooms s"),
        ("per_cmd_ms", "ms per setup command"),
    ),
}
TITLES = {
    "classes": f"(a) {PLAYERS} players' classes, {PLAYERS * PATIENTS_PER_PLAYER} tended patients:"
    " a century and its undo",
    "ward": f"(b) {WARD_PATIENTS} patients, {OBSERVERS} observers: century cycles",
    "setup": "setup",
}


def report(runs: dict[str, list[dict[str, dict[str, float]]]]) -> None:
    names = list(runs)
    first = names[0]
    med = {
        name: {
            part: {k: statistics.median(r[part][k] for r in rs) for k in rs[0][part]}
            for part in rs[0]
        }
        for name, rs in runs.items()
    }
    ratio_cols = names[1:]
    for part in ("classes", "ward", "setup"):
        if part not in med[first]:
            continue
        print(f"\n{TITLES[part]}")
        print(
            f"{'':36}"
            + "".join(f"{n:>12}" for n in names)
            + "".join(f"{n + '/' + first:>16}" for n in ratio_cols)
        )
        for key, label in ROWS[part]:
            cells = "".join(f"{med[n][part][key]:12.1f}" for n in names)
            a = med[first][part][key]
            ratios = "".join(
                f"{med[n][part][key] / a:15.2f}x" if a and key != "cycles" else f"{'':16}"
                for n in ratio_cols
            )
            print(f"{label:36}{cells}{ratios}")
            if key.endswith("_max_ms") and len(runs[first]) > 1:
                worst = "".join(f"{max(r[part][key] for r in runs[n]):12.1f}" for n in names)
                print(f"{'  max of every round':36}{worst}")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cycles", type=int, default=10, help="(a): century+undo cycles")
    ap.add_argument(
        "--long-cycles", type=int, default=ISSUE_CYCLES, help="(b): century+undo cycles"
    )
    ap.add_argument("--runs", type=int, default=1, help="rounds (every tree once a round)")
    ap.add_argument("--scenario", choices=("both", "classes", "ward"), default="both")
    ap.add_argument(
        "--max-seconds",
        type=float,
        default=40.0,
        help="stop a scenario's cycles after this long (the cycles done are printed)",
    )
    ap.add_argument(
        "--base",
        help="other trees to run, before this one: NAME=PATH,NAME=PATH (each its own code, "
        "started in it); ratios to the first",
    )
    ap.add_argument(
        "--no-this-tree", action="store_true", help="with --base: run only the trees given"
    )
    ns = ap.parse_args()
    ns.cycles = max(1, min(ns.cycles, MAX_CYCLES))
    ns.long_cycles = max(1, min(ns.long_cycles, MAX_CYCLES))
    ns.runs = max(1, min(ns.runs, 10))
    ns.max_seconds = min(ns.max_seconds, 600.0)
    ns.scenarios = ("classes", "ward") if ns.scenario == "both" else (ns.scenario,)
    trees: dict[str, str | None] = {"this tree": None}
    if ns.base:
        trees = {**parse_trees(ns.base), **({} if ns.no_this_tree else trees)}
    runs: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in trees}
    for _ in range(ns.runs):
        for name, tree in trees.items():
            runs[name].append(one_run(tree, ns))
    print(f"big rooms, median of {ns.runs} round(s); one server per tree, durable acks")
    report(runs)


if __name__ == "__main__":
    main()
    sys.exit(0)
