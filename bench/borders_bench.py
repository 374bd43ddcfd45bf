"""The HTTP door's borders (issue 33): what one attacker of the HTTP door
costs another room, and the server's memory.

    python -m bench.borders_bench [--seconds 4] [--only chunked1,streams,...] [--base TREE]

One server (a child process, SQLite, default settings). Room A: its GM
sends commands in a closed loop; we measure their latency (send to ack),
alone and while each attack runs, and the server's resident memory (RSS)
before, at its peak during the attack, and once the attack's sockets are
closed. The attacks, each from a process of its own (loopback only,
bounded in time), are the shapes issue 33 measured:

- `chunked1`, `chunked4`: 1 (4) anonymous connections, each sending
  `GET /api/x` with a 64 KiB body in 65,536 one-byte chunks, again and
  again;
- `streams`: 128 event streams of room B that never read (8 observers x
  16), while room B's GM advances a century over 64 stable patients and
  undoes it, in a loop (big patches: the streams fill up; measured after
  10 s of it);
- `streams_gm`: room B's GM alone, the same loop, no stream (what
  `streams` costs without the streams);
- `history`: 30 `GET .../history?limit=500` of room B, never read (500
  versions of century advances and undos: ~26 MB of JSON each);
- `export`: `GET /admin/export` of a room of 40,000 versions, read whole;
- `import`: the same file imported as a new room (`import_room` parts).

Printed per tree: room A's p50, p99 and max (ms) and their ratios to
quiet, and RSS (MiB). `--base TREE` runs another tree's server (a git
worktree of main) too, one run each in turn, to quote ratios between them
on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import socket
import sys
import tempfile
import time
import urllib.request
from typing import Any

from bench.isolation_bench import CENTURY, century_and_undo, start_tree
from bench.memory_bench import rss_mib
from bench.server_bench import ADMIN_TOKEN, SHEET, Peer, hello, pct, stop_server

PATIENTS = 64  # room B: stable patients, so a century advance makes ~50 KB of events
B_VERSIONS = 500  # room B's century advances and undos: the history's 500
STREAM_USERS = 8  # x 16 streams each (the per-user bound): 128
STREAMS_PER_USER = 16
HISTORY_READERS = 30
STREAMS_FILL = 10.0  # seconds of room B's patches before the streams are measured
BIG_VERSIONS = 40_000  # the exported and imported room
CHUNKED_BODY = 64 * 1024
ATTACKS = ("chunked1", "chunked4", "streams", "streams_gm", "history", "export", "import")


# --- set-up ---------------------------------------------------------------


async def admin_peer(url: str) -> tuple[Peer, asyncio.Task[None]]:
    ws, welcome = await hello(url, ADMIN_TOKEN, None)
    peer = Peer(ws, welcome, mirror=False)
    return peer, asyncio.create_task(peer.read())


async def room_gm(url: str, admin: Peer, room: str) -> tuple[Peer, asyncio.Task[None], str]:
    ack = await admin.command(f"mk-{room}", "create_room", {"room": room, "name": room})
    token = ack["result"]["gm_token"]
    ws, welcome = await hello(url, token, room)
    gm = Peer(ws, welcome, mirror=False)
    return gm, asyncio.create_task(gm.read()), token


async def setup(url: str, attacks: tuple[str, ...]) -> dict[str, Any]:
    """Rooms A (quiet), B (big patches, streams, history) and `big`."""
    admin, reader = await admin_peer(url)
    out: dict[str, Any] = {}
    gm, t, out["a_gm"] = await room_gm(url, admin, "a")
    await gm.command("a-c", "add_character", {**SHEET, "name": "PC", "shown": "full"})
    t.cancel()
    await gm.ws.close()
    if {"streams", "streams_gm", "history"} & set(attacks):
        gm, t, out["b_gm"] = await room_gm(url, admin, "b")
        for i in range(PATIENTS):
            sheet = {**SHEET, "name": f"Patient {i}", "shown": "full"}
            c = (await gm.command(f"b-c{i}", "add_character", sheet))["result"]["char"]
            await gm.command(f"b-d{i}", "damage", {"char": c, "amount": 1000})
            await gm.command(f"b-s{i}", "heal", {"char": c, "amount": 0, "stabilize": True})
        out["b_obs"] = []
        for i in range(STREAM_USERS):
            ack = await gm.command(f"b-u{i}", "add_user", {"name": f"O{i}", "role": "observer"})
            out["b_obs"].append(ack["result"]["token"])
        for n in range(B_VERSIONS // 2):
            await gm.command(f"b-cent-{n}", "advance_clock", {"seconds": CENTURY})
            await gm.command(f"b-undo-{n}", "undo", {})
        t.cancel()
        await gm.ws.close()
    if {"export", "import"} & set(attacks):
        gm, t, _ = await room_gm(url, admin, "big")
        await gm.command("big-c", "add_character", {**SHEET, "name": "PC", "shown": "full"})
        for start_at in range(0, BIG_VERSIONS - 2, 1000):
            sends = [
                gm.command(f"big-{i}", "advance_clock", {"seconds": 6})
                for i in range(start_at, min(start_at + 1000, BIG_VERSIONS - 2))
            ]
            await asyncio.gather(*sends)
        t.cancel()
        await gm.ws.close()
    reader.cancel()
    await admin.ws.close()
    return out


# --- the attacks (each in a process of its own) ---------------------------------


def http_base(url: str) -> str:
    return "http" + url[2:]


def host_port(url: str) -> tuple[str, int]:
    host, _, port = url.split("://", 1)[1].split("/", 1)[0].rpartition(":")
    return host, int(port)


async def chunked_attacker(url: str, stop: float) -> int:
    """`GET /api/x` with a 64 KiB body in one-byte chunks, again and again."""
    host, port = host_port(url)
    body = b"1\r\nx\r\n" * CHUNKED_BODY + b"0\r\n\r\n"
    request = b"GET /api/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    sent = 0
    while time.perf_counter() < stop:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        try:
            writer.write(request)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(max(0.1, stop - time.perf_counter())):
                    await writer.drain()
                    await reader.read()
            sent += 1
        finally:
            writer.close()
    return sent


def stalled_socket(url: str, request: bytes) -> socket.socket:
    """A socket that sends `request`, then reads nothing (a small receive buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(host_port(url))
    sock.sendall(request)
    return sock


def get(path: str, token: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n").encode()


async def century_loop(url: str, token: str, stop: float) -> None:
    ws, welcome = await hello(url, token, "b")
    gm = Peer(ws, welcome, mirror=False)
    t = asyncio.create_task(gm.read())
    try:
        await century_and_undo(gm, stop, f"load-{time.time()}-")
    finally:
        t.cancel()
        await ws.close()


async def attack(url: str, tokens: dict[str, Any], seconds: float, name: str) -> None:
    stop = time.perf_counter() + seconds
    socks: list[socket.socket] = []
    try:
        if name in ("chunked1", "chunked4"):
            n = 1 if name == "chunked1" else 4
            await asyncio.gather(*(chunked_attacker(url, stop) for _ in range(n)))
        elif name in ("streams", "streams_gm"):
            if name == "streams":
                for token in tokens["b_obs"]:
                    for _ in range(STREAMS_PER_USER):
                        socks.append(stalled_socket(url, get("/api/v1/rooms/b/events", token)))
            await century_loop(url, tokens["b_gm"], stop)
        elif name == "history":
            path = "/api/v1/rooms/b/history?limit=500"
            for _ in range(HISTORY_READERS):
                socks.append(stalled_socket(url, get(path, tokens["b_gm"])))
            await asyncio.sleep(max(0.0, stop - time.perf_counter()))
        elif name == "export":
            await asyncio.to_thread(export_room, url, tokens["file"])
        elif name == "import":
            await import_room(url, tokens["file"])
    finally:
        for sock in socks:
            sock.close()


def export_room(url: str, path: str) -> int:
    req = urllib.request.Request(
        http_base(url) + "/admin/export?room=big",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        data = r.read()
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


async def import_room(url: str, path: str) -> None:
    """The exported file, imported as a new room (`big2`): a room moving in."""
    with open(path) as f:
        doc = json.load(f)
    doc["room"] = "big2"
    for state in (doc["state"], doc["snapshot"]["state"]):
        state["room"] = "big2"
    text = json.dumps(doc, ensure_ascii=True, separators=(",", ":"))
    admin, reader = await admin_peer(url)
    try:
        chunk = 30_000
        parts = [text[i : i + chunk] for i in range(0, len(text), chunk)]
        upload = f"bench-{time.time()}"
        for i, part in enumerate(parts):
            args = {"room": "big2", "upload": upload, "part": i, "parts": len(parts),
                    "data": part}  # fmt: skip
            reply = await admin.command(f"imp-{upload}-{i}", "import_room", args)
            if reply["t"] != "ack":
                raise RuntimeError(f"import refused: {reply}")
    finally:
        reader.cancel()
        await admin.ws.close()


def attack_process(url: str, tokens: dict[str, Any], seconds: float, name: str) -> None:
    asyncio.run(attack(url, tokens, seconds, name))


# --- measuring ----------------------------------------------------------------


async def measure(
    url: str, tokens: dict[str, Any], seconds: float, name: str | None, pid: int
) -> dict[str, float]:
    """Room A's latencies while `name` runs (None: quiet), and RSS."""
    ws, welcome = await hello(url, tokens["a_gm"], "a")
    gm = Peer(ws, welcome, mirror=False)
    reader = asyncio.create_task(gm.read())
    before = rss_mib(pid)
    peak = before
    loader = None
    if name is not None:
        # The streams fill up first (the kernel takes ~2.8 MB of each socket
        # before the server's buffers grow); export and import are measured
        # from their start; the others once they are on.
        warm = {"streams": STREAMS_FILL, "streams_gm": STREAMS_FILL, "export": 0.0, "import": 0.0}
        ahead = warm.get(name, 1.0)
        ctx = multiprocessing.get_context("spawn")
        loader = ctx.Process(target=attack_process, args=(url, tokens, seconds + ahead, name))
        loader.start()
        await asyncio.sleep(ahead)
    stop = time.perf_counter() + seconds
    latencies = []
    n = 0
    while time.perf_counter() < stop or (
        name in ("export", "import") and loader is not None and loader.is_alive()
    ):
        n += 1
        t0 = time.perf_counter()
        await gm.command(f"a-{name}-{n}-{t0}", "advance_clock", {"seconds": 1})
        latencies.append(time.perf_counter() - t0)
        if n % 20 == 0:
            peak = max(peak, rss_mib(pid))
    peak = max(peak, rss_mib(pid))
    if loader is not None:
        await asyncio.to_thread(loader.join, 300)
        if loader.is_alive():
            loader.kill()
    await asyncio.sleep(1.0)  # the attack's sockets closed: what stays
    after = rss_mib(pid)
    reader.cancel()
    await ws.close()
    return {
        "p50": pct(latencies, 0.5) * 1e3,
        "p99": pct(latencies, 0.99) * 1e3,
        "max": max(latencies) * 1e3,
        "n": float(len(latencies)),
        "rss_before": before,
        "rss_peak": peak,
        "rss_after": after,
    }


def one_run(seconds: float, attacks: tuple[str, ...], tree: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data:
        proc, url = start_tree(data, tree)
        try:

            async def run() -> dict[str, Any]:
                tokens = await setup(url, attacks)
                tokens["file"] = os.path.join(data, "export.json")  # export writes, import reads
                out = {"quiet": await measure(url, tokens, seconds, None, proc.pid)}
                for name in attacks:
                    out[name] = await measure(url, tokens, seconds, name, proc.pid)
                return out

            return asyncio.run(run())
        finally:
            stop_server(proc)


def report(name: str, run: dict[str, Any]) -> None:
    quiet = run["quiet"]
    print(f"{name}: room A's command latency (ms) and the server's RSS (MiB)")
    print(f"{'':12}{'p50':>9}{'x':>7}{'p99':>9}{'x':>7}{'max':>9}{'n':>7}"
          f"{'rss':>8}{'peak':>8}{'after':>8}")  # fmt: skip
    for load, m in run.items():
        print(
            f"{load:12}{m['p50']:9.1f}{m['p50'] / quiet['p50']:6.1f}x{m['p99']:9.1f}"
            f"{m['p99'] / quiet['p99']:6.1f}x{m['max']:9.1f}{m['n']:7.0f}"
            f"{m['rss_before']:8.0f}{m['rss_peak']:8.0f}{m['rss_after']:8.0f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--only", help=f"a comma-separated subset of {','.join(ATTACKS)}")
    ap.add_argument(
        "--base",
        help="another tree (git worktree add --detach ../base main): its server and this "
        "tree's, one run each in turn",
    )
    ap.add_argument("--json", help="also write the figures to this file")
    ns = ap.parse_args()
    attacks = tuple(ns.only.split(",")) if ns.only else ATTACKS
    unknown = set(attacks) - set(ATTACKS)
    if unknown:
        ap.error(f"unknown attacks: {', '.join(sorted(unknown))}")
    trees: dict[str, str | None] = {"this tree": None}
    if ns.base:
        trees = {"base": os.path.abspath(ns.base), **trees}
    runs = {name: one_run(min(ns.seconds, 30.0), attacks, tree) for name, tree in trees.items()}
    for name, run in runs.items():
        report(name, run)
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
    sys.exit(0)
