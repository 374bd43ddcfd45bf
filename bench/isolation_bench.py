"""Neighbour isolation: does what one room's players do, within their
limits, slow another room down?

    python -m bench.isolation_bench [--seconds 4] [--runs 3] [--load sync|classes|both]

One server (a child process, durable acks). Room A: its GM sends commands in
a closed loop; we measure their latency (send to ack). Room B, two loads:

- `sync`: a long log (1,200 versions), and one player with 16 connections,
  each asking for the last 999 patches (`sync`) 20 times a second and
  reconnecting with `since` in a loop: the load that stalled a neighbour
  before per-user, cost-weighted limits.
- `classes` (issue 19): 98 players, each owning a `status` patient (stable:
  hourly checks), so 98 views of their own, all 99 connected; the GM
  advances the clock by a century (every patient's eight checks) and undoes
  it, in a loop: each patch concerns every view, the load that took another
  room's p90 to 357 ms before the cap of views per patch.

Printed: room A's p50 and p99 with room B quiet and under each load, and
their ratios (1.0x: no effect). The load's clients run in a process of
their own, not in the measuring client's event loop. `--base TREE` runs
another tree's server too, one run each in turn. Loopback only, bounded in
time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

import msgpack
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from bench.harness import start_tree
from bench.server_bench import ADMIN_TOKEN, SHEET, Peer, hello, pct, stop_server
from sync_server.wire import protocol

B_VERSIONS = 1200
CLASS_PLAYERS = 98  # each owns a status patient: a view of their own
CENTURY = 100 * 365 * 24 * 3600
ATTACK_SOCKETS = 16
ATTACK_RATE = 20.0  # syncs per second per socket


async def setup(url: str) -> dict[str, str]:
    ws, _ = await hello(url, ADMIN_TOKEN, None)
    admin = Peer(ws, {}, mirror=False)
    reader = asyncio.create_task(admin.read())
    tokens = {}
    for room in ("a", "b"):
        ack = await admin.command(f"mk-{room}", "create_room", {"room": room, "name": room})
        gws, welcome = await hello(url, ack["result"]["gm_token"], room)
        gm = Peer(gws, welcome, mirror=False)
        t = asyncio.create_task(gm.read())
        await gm.command(f"{room}-c", "add_character", {**SHEET, "name": "PC", "shown": "full"})
        if room == "b":
            sends = [
                gm.command(f"b-{i}", "advance_clock", {"seconds": 1}) for i in range(B_VERSIONS)
            ]
            await asyncio.gather(*sends)
            p = await gm.command("b-p", "add_user", {"name": "P", "role": "player"})
            tokens["b_player"] = p["result"]["token"]
        tokens[f"{room}_gm"] = ack["result"]["gm_token"]
        t.cancel()
        await gws.close()
    reader.cancel()
    await ws.close()
    return tokens


async def drain(ws: object) -> None:
    async for _ in ws:  # type: ignore[attr-defined]
        pass


async def attacker(url: str, token: str, stop: float) -> None:
    """One socket: syncs 999 patches back at ATTACK_RATE, reconnecting with
    `since` whenever it is closed or refused."""
    while time.perf_counter() < stop:
        try:
            ws = await connect(url, subprotocols=[Subprotocol(protocol.MSGPACK)], max_size=None)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        try:
            await ws.send(msgpack.packb(protocol.hello(token, "b", B_VERSIONS - 999)))
            welcome = msgpack.unpackb(await ws.recv())
            if welcome.get("t") != "welcome":
                continue
            v = welcome["v"]

            reader = asyncio.create_task(drain(ws))
            while time.perf_counter() < stop and not reader.done():
                await ws.send(msgpack.packb(protocol.sync(max(0, v - 999))))
                await asyncio.sleep(1 / ATTACK_RATE)
            reader.cancel()
        except Exception:
            await asyncio.sleep(0.05)
        finally:
            with contextlib.suppress(Exception):
                await ws.close()


async def setup_classes(url: str) -> dict[str, str]:
    """Room C: CLASS_PLAYERS players, each owning a stable `status` patient."""
    ws, _ = await hello(url, ADMIN_TOKEN, None)
    admin = Peer(ws, {}, mirror=False)
    reader = asyncio.create_task(admin.read())
    ack = await admin.command("mk-c", "create_room", {"room": "c", "name": "c"})
    reader.cancel()
    await ws.close()
    gws = await connect(url, subprotocols=[Subprotocol(protocol.MSGPACK)], max_size=None)
    await gws.send(msgpack.packb(protocol.hello(ack["result"]["gm_token"], "c")))
    gm = Peer(gws, msgpack.unpackb(await gws.recv()), mirror=False)
    t = asyncio.create_task(gm.read())
    tokens = {"c_gm": ack["result"]["gm_token"]}
    for i in range(CLASS_PLAYERS):
        p = await gm.command(f"c-u{i}", "add_user", {"name": f"P{i}", "role": "player"})
        tokens[f"c_p{i}"] = p["result"]["token"]
        sheet = {**SHEET, "name": f"Pat{i}", "owner": p["result"]["user"], "shown": "status"}
        c = (await gm.command(f"c-c{i}", "add_character", sheet))["result"]["char"]
        await gm.command(f"c-d{i}", "damage", {"char": c, "amount": 1000})
        await gm.command(f"c-s{i}", "heal", {"char": c, "amount": 0, "stabilize": True})
    t.cancel()
    await gws.close()
    return tokens


async def classes_load(url: str, tokens: dict[str, str], stop: float) -> None:
    """Room C's players read; its GM advances a century and undoes it."""
    readers = []
    for i in range(CLASS_PLAYERS):
        ws = await connect(url, subprotocols=[Subprotocol(protocol.MSGPACK)], max_size=None)
        await ws.send(msgpack.packb(protocol.hello(tokens[f"c_p{i}"], "c")))
        await ws.recv()
        readers.append((ws, asyncio.create_task(drain(ws))))
    gws = await connect(url, subprotocols=[Subprotocol(protocol.MSGPACK)], max_size=None)
    await gws.send(msgpack.packb(protocol.hello(tokens["c_gm"], "c")))
    gm = Peer(gws, msgpack.unpackb(await gws.recv()), mirror=False)
    t = asyncio.create_task(gm.read())
    try:
        await century_and_undo(gm, stop)
    finally:
        t.cancel()
        await gws.close()
        for ws, task in readers:
            task.cancel()
            with contextlib.suppress(Exception):
                await ws.close()


async def century_and_undo(gm: Peer, stop: float, prefix: str = "") -> None:
    """The GM advances the clock by a century and undoes it, until `stop`
    (`prefix`: ids of their own, for a room that already had such a loop)."""
    n = 0
    while time.perf_counter() < stop:
        n += 1
        await gm.command(f"{prefix}cent-{n}", "advance_clock", {"seconds": CENTURY})
        await gm.command(f"{prefix}undo-{n}", "undo", {})


async def load(url: str, tokens: dict[str, str], seconds: float, attack: str) -> None:
    stop = time.perf_counter() + seconds
    if attack == "classes":
        await classes_load(url, tokens, stop)
    else:
        await asyncio.gather(
            *(attacker(url, tokens["b_player"], stop) for _ in range(ATTACK_SOCKETS))
        )


def load_process(url: str, tokens: dict[str, str], seconds: float, attack: str) -> None:
    """The load's clients, in a process of their own: room A's measuring
    client must not share an event loop with 99 others reading snapshots
    (their decoding would be counted as the server's latency; a real
    neighbour's clients are on other machines)."""
    asyncio.run(load(url, tokens, seconds, attack))


async def measure(
    url: str, tokens: dict[str, str], seconds: float, attack: bool | str
) -> list[float]:
    ws, welcome = await hello(url, tokens["a_gm"], "a")
    gm = Peer(ws, welcome, mirror=False)
    reader = asyncio.create_task(gm.read())
    loader = None
    if attack:
        ctx = multiprocessing.get_context("spawn")
        loader = ctx.Process(target=load_process, args=(url, tokens, seconds + 3.0, attack))
        loader.start()
    await asyncio.sleep({"classes": 3.0, False: 0}.get(attack, 1.0))  # the load is on
    stop = time.perf_counter() + seconds
    latencies = []
    n = 0
    while time.perf_counter() < stop:
        n += 1
        t0 = time.perf_counter()
        await gm.command(f"a-{attack}-{n}", "advance_clock", {"seconds": 1})
        latencies.append(time.perf_counter() - t0)
    if loader is not None:
        await asyncio.to_thread(loader.join, 30)
        if loader.is_alive():
            loader.kill()
    reader.cancel()
    await ws.close()
    return latencies


def one_run(seconds: float, loads: tuple[str, ...], tree: str | None = None) -> dict[str, float]:
    """One server (this tree's, or `tree`'s: its own code, started in it),
    room A measured quiet and under each load."""
    with tempfile.TemporaryDirectory() as data:
        proc, url = start_tree(data, tree)
        try:

            async def run() -> dict[str, float]:
                tokens = await setup(url)
                if "classes" in loads:
                    tokens |= await setup_classes(url)
                quiet = await measure(url, tokens, seconds, attack=False)
                out = {"quiet_p50": pct(quiet, 0.5) * 1e3, "quiet_p99": pct(quiet, 0.99) * 1e3}
                for load in loads:
                    loud = await measure(url, tokens, seconds, attack=load)
                    out[f"{load}_p50"] = pct(loud, 0.5) * 1e3
                    out[f"{load}_p99"] = pct(loud, 0.99) * 1e3
                return out

            return asyncio.run(run())
        finally:
            stop_server(proc)


def report(name: str, runs: list[dict[str, float]], loads: tuple[str, ...]) -> None:
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"{name}: room A's command latency, quiet vs under load, median of {len(runs)}:")
    print(f"{'':12}{'quiet':>10}" + "".join(f"{load:>10}{'ratio':>8}" for load in loads))
    for q in ("p50", "p99"):
        a = med[f"quiet_{q}"]
        cells = "".join(
            f"{med[f'{load}_{q}']:10.2f}{med[f'{load}_{q}'] / a:7.2f}x" for load in loads
        )
        print(f"{q + ' ms':12}{a:10.2f}" + cells)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--load", choices=("sync", "classes", "both"), default="both")
    ap.add_argument(
        "--base",
        help="another tree (git worktree add --detach ../base main): its server and this "
        "tree's, one run each in turn",
    )
    ns = ap.parse_args()
    loads = ("sync", "classes") if ns.load == "both" else (ns.load,)
    trees: dict[str, str | None] = {"this tree": None}
    if ns.base:
        trees = {"base": os.path.abspath(ns.base), **trees}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(min(ns.runs, 10)):
        for name, tree in trees.items():
            runs[name].append(one_run(min(ns.seconds, 30.0), loads, tree))
    print("  sync: a player's sync flood; classes: 98 views, a century advance and its undo")
    for name in trees:
        report(name, runs[name], loads)


if __name__ == "__main__":
    main()
    sys.exit(0)
