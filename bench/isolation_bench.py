"""Neighbour isolation: does what one room's players do, within their
limits, slow another room down?

    python -m bench.isolation_bench [--seconds 4] [--runs 3]

One server (a child process, durable acks). Room A: its GM sends commands in
a closed loop; we measure their latency (send to ack). Room B: a long log
(1,200 versions), and one player with 16 connections, each asking for the
last 999 patches (`sync`) 20 times a second and reconnecting with `since` in
a loop: the load that stalled a neighbour before per-user, cost-weighted
limits. Printed: room A's p50 and p99 with room B quiet and under that load,
and their ratios (1.0x: no effect). Loopback only, bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time

import msgpack
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from bench.server_bench import ADMIN_TOKEN, SHEET, Peer, hello, pct, start
from sync_server.wire import protocol

B_VERSIONS = 1200
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


async def measure(url: str, tokens: dict[str, str], seconds: float, attack: bool) -> list[float]:
    ws, welcome = await hello(url, tokens["a_gm"], "a")
    gm = Peer(ws, welcome, mirror=False)
    reader = asyncio.create_task(gm.read())
    stop = time.perf_counter() + seconds
    attackers = (
        [
            asyncio.create_task(attacker(url, tokens["b_player"], stop))
            for _ in range(ATTACK_SOCKETS)
        ]
        if attack
        else []
    )
    await asyncio.sleep(0.5 if attack else 0)  # the load is on
    latencies = []
    n = 0
    while time.perf_counter() < stop:
        n += 1
        t0 = time.perf_counter()
        await gm.command(f"a-{attack}-{n}", "advance_clock", {"seconds": 1})
        latencies.append(time.perf_counter() - t0)
    for task in attackers:
        task.cancel()
    await asyncio.gather(*attackers, return_exceptions=True)
    reader.cancel()
    await ws.close()
    return latencies


def one_run(seconds: float) -> dict[str, float]:
    env = {**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN}
    with tempfile.TemporaryDirectory() as data:
        log = os.path.join(data, "server.log")
        args = ["-m", "sync_server", "serve", "--port", "0", "--data-dir", data]
        proc, url = start(args, r"listening on (ws://\S+)", env, log)
        try:

            async def run() -> dict[str, float]:
                tokens = await setup(url)
                quiet = await measure(url, tokens, seconds, attack=False)
                loud = await measure(url, tokens, seconds, attack=True)
                return {
                    "quiet_p50": pct(quiet, 0.5) * 1e3,
                    "quiet_p99": pct(quiet, 0.99) * 1e3,
                    "loud_p50": pct(loud, 0.5) * 1e3,
                    "loud_p99": pct(loud, 0.99) * 1e3,
                }

            return asyncio.run(run())
        finally:
            proc.terminate()
            proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args()
    runs = [one_run(min(ns.seconds, 30.0)) for _ in range(min(ns.runs, 10))]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(
        "room A's command latency, room B quiet vs under a player's sync flood,"
        f" median of {len(runs)}:"
    )
    print(f"{'':12}{'quiet':>10}{'loud':>10}{'ratio':>10}")
    for q in ("p50", "p99"):
        a, b = med[f"quiet_{q}"], med[f"loud_{q}"]
        print(f"{q + ' ms':12}{a:10.2f}{b:10.2f}{b / a:9.2f}x")


if __name__ == "__main__":
    main()
    sys.exit(0)
