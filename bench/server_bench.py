"""Load benchmark: vtt-sync side by side with a bare websockets relay.

    python -m bench.server_bench [--rooms 20] [--clients 8[,32...]] [--seconds 4] [--runs 3]
                                 [--views] [--affordances]

Starts each server in its own process (vtt-sync on a fresh data directory,
durable acks; then bench/relay.py), and drives it from this process: R rooms
x C clients (a GM, players, observers); each room's GM sends commands in a
closed loop (damage, heal, end_turn, advance_clock). Reports commands/s, the
latency from a command's send to its patch at every client of the room (p50,
p99), and the server's CPU time per command (from /proc), each with its
ratio to the relay. Medians of --runs runs. Loopback only, bounded in time.

--clients 8,32 runs each room size (every size and server once a round,
interleaved) and prints each size's table; with --affordances each size's
affordance share of a command's server CPU, (with - without) / with.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from rules.patch import apply_ops
from sync_server.wire import frames, protocol
from sync_server.wire.protocol import MSGPACK

ADMIN_TOKEN = "bench-admin-token-not-a-secret-0123456789"
SHEET = {
    "level": 3,
    "pv_max": 40,
    "pe_max": 15,
    "pp_max": 6,
    "medicine": 5,
    "abilities": {"str": 10, "dex": 14, "con": 14, "int": 10, "wis": 12, "cha": 8},
}
CLK_TCK = os.sysconf("SC_CLK_TCK")
HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_seconds(pid: int | Sequence[int]) -> float:
    """utime + stime of a process (or the sum of several: workers)."""
    if not isinstance(pid, int):
        return sum(cpu_seconds(p) for p in pid)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_split(pid: int | Sequence[int]) -> tuple[float, float]:
    """(system CPU seconds of the process, CPU seconds of its threads but
    the event loop's, i.e. SQLite's storage thread): where the server's CPU
    goes, the kernel's share (syscalls, fsync) and the storage thread's."""
    if not isinstance(pid, int):
        parts = [cpu_split(p) for p in pid]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    with open(f"/proc/{pid}/stat") as f:
        system = int(f.read().rsplit(")", 1)[1].split()[12]) / CLK_TCK
    storage = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        if tid == str(pid):  # the main thread: the event loop
            continue
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        storage += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return system, storage


def start(
    args: list[str], pattern: str, env: dict[str, str], log: str, cwd: str | None = None
) -> tuple[subprocess.Popen, str]:
    """Start a server process; its output goes to a file (a pipe nobody
    reads would fill up and block the server mid-run). `cwd`: the tree to
    run (`python -m` puts the working directory first on the path, before
    PYTHONPATH: without it, every tree would run the caller's code)."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=cwd,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        with open(log) as f:
            m = re.search(pattern, f.read())
        if m:
            return proc, m.group(1)
        time.sleep(0.05)
    proc.kill()
    with open(log) as f:
        raise RuntimeError(f"server did not start: {args}\n{f.read()[-2000:]}")


def stop_server(proc: subprocess.Popen) -> None:
    """Stop a server `start` started: asked first (SIGTERM: it closes its
    rooms and storage), killed if it has not exited within 30 s."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class Peer:
    """One client: a connection, when each version arrived, and (for the GM,
    who needs the combat to send end_turn) a mirror of the state."""

    def __init__(self, ws: ClientConnection, welcome: dict[str, Any], mirror: bool) -> None:
        self.ws = ws
        self.state = welcome.get("state") or {}
        self.v = welcome.get("v", 0)
        self.mirror = mirror
        self.arrived: dict[int, float] = {}
        self.acks: dict[str, asyncio.Future] = {}

    async def read(self) -> None:
        try:
            async for data in self.ws:
                frame = msgpack.unpackb(data)
                t = frame.get("t")
                if t == "patch":
                    self.arrived[frame["v"]] = time.perf_counter()
                    if self.mirror:
                        apply_ops(self.state, frame["ops"])
                    self.v = frame["v"]
                elif t in ("ack", "error"):
                    fut = self.acks.pop(frame.get("id"), None)
                    if fut is not None and not fut.done():
                        fut.set_result(frame)
        except Exception as exc:  # a reader that dies must not leave its GM waiting
            for fut in self.acks.values():
                if not fut.done():
                    fut.set_exception(RuntimeError(f"reader failed: {exc!r}"))
            raise
        finally:
            for fut in self.acks.values():
                if not fut.done():
                    fut.set_exception(RuntimeError("connection closed before the ack"))

    async def command(self, cid: str, op: str, args: dict[str, Any]) -> dict[str, Any]:
        fut = asyncio.get_running_loop().create_future()
        self.acks[cid] = fut
        await self.ws.send(msgpack.packb(protocol.cmd(cid, op, args)))
        async with asyncio.timeout(30):
            return await fut


async def hello(url: str, token: str, room: str | None) -> tuple[ClientConnection, dict]:
    """Hello and welcome, following redirects as the clients do (workers,
    cluster nodes: the room is served by another process)."""
    for _ in range(protocol.MAX_REDIRECTS + 1):
        ws = await connect(
            url, subprotocols=[Subprotocol(MSGPACK)], compression=None, max_size=2**20
        )
        handshake = frames.Handshake(token, room)
        await ws.send(msgpack.packb(handshake.hello()))
        welcome = msgpack.unpackb(await ws.recv())
        if welcome.get("t") != "redirect":
            break
        await ws.close()
        url = welcome["url"]
    if not isinstance(handshake.receive(welcome), frames.Welcome):
        raise RuntimeError(f"no welcome: {welcome}")
    return ws, welcome


NPC = "npc"  # one NPC per room, touched by one command of four


async def setup_vtt(
    url: str,
    rooms: int,
    clients: int,
    secrets: bool = False,
    prefix: str = "",
    characters: int = 5,
    absent: int = 0,
) -> list[list[tuple[str, str]]]:
    """Create the rooms, their characters, a combat, and the users' tokens.
    Every character is shown in full; with `secrets`, the NPC is `status`
    (per-role views: its patches are encoded per view class). Beyond the
    five characters the load touches (4 PCs, the NPC), `characters` adds
    bystanders nobody touches: the room-size scaling. `absent` adds players
    who own a character each and never connect (a campaign's players not
    at tonight's session)."""
    ws, _ = await hello(url, ADMIN_TOKEN, None)
    admin = Peer(ws, {}, mirror=False)
    reader = asyncio.create_task(admin.read())
    ids = itertools.count()
    out = []
    for r in range(rooms):
        room = f"{prefix}bench{r}"
        ack = await admin.command(
            f"{prefix}a{next(ids)}", "create_room", {"room": room, "name": room}
        )
        gm_token = ack["result"]["gm_token"]
        gws, welcome = await hello(url, gm_token, room)
        gm = Peer(gws, welcome, mirror=True)
        t = asyncio.create_task(gm.read())
        tokens = [(gm_token, room)]
        players = []
        for i in range(clients - 1):
            role = "observer" if i >= clients - 3 else "player"
            a = await gm.command(f"s{next(ids)}", "add_user", {"name": f"user{i}", "role": role})
            tokens.append((a["result"]["token"], room))
            if role == "player":
                players.append(a["result"]["user"])
        chars = []
        for i in range(4):  # the players' characters (what each may do is their own)
            owner = {"owner": players[i]} if i < len(players) else {}
            a = await gm.command(
                f"s{next(ids)}",
                "add_character",
                {**SHEET, "name": f"PC{i}", "shown": "full", **owner},
            )
            chars.append(a["result"]["char"])
        shown = "status" if secrets else "full"
        await gm.command(
            f"s{next(ids)}", "add_character", {**SHEET, "name": "NPC", "id": NPC, "shown": shown}
        )
        for i in range(max(0, characters - 5)):
            await gm.command(
                f"s{next(ids)}", "add_character", {**SHEET, "name": f"B{i}", "shown": "full"}
            )
        for i in range(absent):
            a = await gm.command(
                f"s{next(ids)}", "add_user", {"name": f"away{i}", "role": "player"}
            )
            sheet = {**SHEET, "name": f"A{i}", "shown": "full", "owner": a["result"]["user"]}
            await gm.command(f"s{next(ids)}", "add_character", sheet)
        await gm.command(f"s{next(ids)}", "combat_start", {"order": chars})
        t.cancel()
        await gws.close()
        out.append(tokens)
    reader.cancel()
    await ws.close()
    return out


async def drive(
    url: str,
    room_tokens: list[list[tuple[str, str]]],
    seconds: float,
    relay: bool,
    pid: int | Sequence[int],
    rate: float = 0.0,
) -> dict[str, Any]:
    """Connect every client, run every room's GM loop for `seconds`, and
    measure; the server's and this process's CPU are read around the loops
    only (not the connections)."""
    peers: list[list[Peer]] = []
    readers = []
    for tokens in room_tokens:
        group = []
        for i, (token, room) in enumerate(tokens):
            ws, welcome = await hello(url, token, room)
            p = Peer(ws, welcome, mirror=i == 0)
            readers.append(asyncio.create_task(p.read()))
            group.append(p)
        peers.append(group)
    sent: list[tuple[list[Peer], float, int]] = []
    errors = 0
    stop = time.perf_counter() + seconds

    async def gm_loop(group: list[Peer], r: int) -> None:
        nonlocal errors
        gm = group[0]
        n = 0
        gap = len(peers) / rate if rate else 0.0  # --rate: each GM sends on a schedule
        due = time.perf_counter() + gap * r / max(len(peers), 1)
        while time.perf_counter() < stop:
            if gap:
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                due += gap
            n += 1
            k = n % 4
            if relay:
                op, args = "damage", {"char": "c1", "amount": 1}
            elif k == 0:  # the NPC, hit and healed in turn: it never dies
                op = "damage" if n % 8 == 0 else "heal"
                args = {"char": NPC, "amount": 2}
            elif k == 1:
                op, args = "heal", {"char": "c1", "amount": 2}
            elif k == 2:
                combat = gm.state["combat"]
                op, args = "end_turn", {"char": combat["order"][combat["turn"]]}
            else:
                op, args = "advance_clock", {"seconds": 60}
            t0 = time.perf_counter()
            reply = await gm.command(f"r{r}-{n}", op, args)
            if reply["t"] == "ack":
                sent.append((group, t0, reply["v"]))
            else:
                errors += 1

    groups0 = (0.0, 0.0, 0.0) if relay else server_counts(url)
    jobs = groups = pauses = 0.0
    cpu0, own0, split0 = cpu_seconds(pid), time.process_time(), cpu_split(pid)
    t_start = time.perf_counter()
    async with asyncio.timeout(seconds + 60):
        await asyncio.gather(*(gm_loop(g, r) for r, g in enumerate(peers)))
    elapsed = time.perf_counter() - t_start
    await asyncio.sleep(0.3)  # let the last patches land
    cpu, own = cpu_seconds(pid) - cpu0, time.process_time() - own0
    system, storage = (a - b for a, b in zip(cpu_split(pid), split0, strict=True))
    latencies, missing = [], 0
    for group, t0, v in sent:
        arrivals = [a for a in (p.arrived.get(v) for p in group) if a is not None]
        if len(arrivals) == len(group):
            latencies.append(max(arrivals) - t0)
        else:
            missing += 1
    for task in readers:
        task.cancel()
    for group in peers:
        for p in group:
            await p.ws.close()
    n = len(sent)
    if not relay:
        jobs, groups, pauses = (a - b for a, b in zip(server_counts(url), groups0, strict=True))
    return {
        "cmds_per_s": n / elapsed,
        "p50_ms": pct(latencies, 0.5) * 1e3,
        "p99_ms": pct(latencies, 0.99) * 1e3,
        "p999_ms": pct(latencies, 0.999) * 1e3,
        "cpu_us_per_cmd": cpu / max(n, 1) * 1e6,
        "system_us_per_cmd": system / max(n, 1) * 1e6,
        "storage_us_per_cmd": storage / max(n, 1) * 1e6,
        "server_cpu_pct": cpu / elapsed * 100,
        "loadgen_cpu_pct": own / elapsed * 100,
        "errors": errors + missing,
        "commit_group": jobs / groups if groups else 0.0,
        "room_pauses": pauses,
    }


def server_counts(url: str) -> tuple[float, float, float]:
    """(write jobs committed, commit transactions, rooms paused for their
    CPU share) so far, from the server's /metrics."""
    http = url.replace("ws://", "http://").rstrip("/") + "/metrics"
    with urllib.request.urlopen(http, timeout=10) as resp:
        text = resp.read().decode()
    found = dict(re.findall(r"^vtt_commit_group_jobs_(sum|count) (\S+)$", text, re.M))
    pauses = re.search(r"^vtt_room_pauses_total (\S+)$", text, re.M)
    return (
        float(found.get("sum", 0)),
        float(found.get("count", 0)),
        float(pauses.group(1)) if pauses else 0.0,
    )


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


# A `gc.callbacks` probe the server imports at start-up (its sitecustomize):
# the collector's passes, which stall every room of the process.
GC_PROBE = os.path.join(HERE, "gc_probe")


def gc_passes(log: str, began: float, ended: float) -> list[tuple[int, float]]:
    """The collector's passes while the load ran, (generation, seconds),
    from the probe's log (passes at start-up and shutdown not counted)."""
    try:
        with open(log) as f:
            rows = [line.split() for line in f]
    except FileNotFoundError:
        return []
    return [(int(gen), float(took)) for at, gen, took in rows if began <= float(at) <= ended]


def longest_gc_pass(log: str, began: float, ended: float) -> float:
    """The longest pass of the collector (seconds) while the load ran (none,
    or the relay's: 0)."""
    return max((took for _, took in gc_passes(log, began, ended)), default=0.0)


def one_run(kind: str, ns: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN}
    tree = os.path.dirname(HERE)
    path = [os.environ.get("PYTHONPATH")]
    if kind != "relay":  # or another tree's code (--base), for A/B in one run
        tree = ns.trees.get(kind, tree)
        path = [tree, GC_PROBE, *path]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    if kind == "no-affordances":  # the same server, views without what each may do
        env["VTT_SYNC_AFFORDANCES"] = "false"
    with tempfile.TemporaryDirectory() as data:
        log = os.path.join(data, "server.log")
        env["VTT_BENCH_GC_LOG"] = gc_log = os.path.join(data, "gc.log")
        if kind == "relay":
            args = ["-m", "bench.relay", "--port", "0"]
        else:
            args = ["-m", "sync_server", "serve", "--port", "0", "--data-dir", data]
            args += ["--synchronous", ns.synchronous]
            if kind == "fast":  # this tree on the fast transport (the [fast] extra)
                args += ["--transport", "picows"]
        proc, url = start(args, r"listening on (ws://\S+)", env, log, cwd=tree)
        profiler = None
        try:
            if kind == "relay":
                tokens = [[("t", f"bench{r}")] * ns.clients for r in range(ns.rooms)]
            else:
                tokens = asyncio.run(
                    setup_vtt(
                        url,
                        ns.rooms,
                        ns.clients,
                        secrets=kind == "secrets",
                        characters=ns.characters,
                        absent=ns.absent,
                    )
                )
            if ns.profile and kind == ns.profile_kind:
                profiler = subprocess.Popen(
                    [
                        "py-spy",
                        "record",
                        "--pid",
                        str(proc.pid),
                        "--gil",
                        "--format",
                        "raw",
                        "--rate",
                        "200",
                        "--nonblocking",
                        "-o",
                        ns.profile,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            began = time.time()
            out = asyncio.run(drive(url, tokens, ns.seconds, kind == "relay", proc.pid, ns.rate))
            return {**out, "gc_max_ms": longest_gc_pass(gc_log, began, time.time()) * 1e3}
        finally:
            stop_server(proc)
            if profiler is not None:
                profiler.wait(10)


ROWS = {
    "cmds_per_s": ("commands/s", ">= 0.6x"),
    "p50_ms": ("p50 ms", ""),
    "p99_ms": ("p99 ms", "<= 2x"),
    # The collector's young passes (9-14 ms every ~10 s under this load,
    # docs/performance.md) land here first; a run shorter than their
    # interval may see none.
    "p999_ms": ("p99.9 ms", ""),
    "gc_max_ms": ("longest GC pass ms", ""),
    "cpu_us_per_cmd": ("server CPU us/cmd", "<= 3x"),
    "system_us_per_cmd": ("  of which kernel", ""),
    "storage_us_per_cmd": ("  other threads", ""),
    "server_cpu_pct": ("server CPU %", ""),
    "loadgen_cpu_pct": ("load gen CPU %", ""),
    "errors": ("errors", ""),
    "commit_group": ("commit group (jobs)", ""),
    "room_pauses": ("rooms paused (share)", ""),
}


def load_options(doc: str | None, sizes: bool = False) -> argparse.ArgumentParser:
    """The load's options, shared by the benchmarks that drive rooms
    (`sizes`: --clients takes a list, e.g. 8,32, each size run in turn)."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rooms", type=int, default=20)
    if sizes:
        ap.add_argument("--clients", default="8", help="clients per room, or a list: 8,32")
    else:
        ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    return ap


def parse_trees(spec: str | None) -> dict[str, str]:
    """`--base NAME=PATH,NAME=PATH` (or one bare PATH): the trees to run, in
    order, absolute; a nameless first is `today`, later ones `base1`, ..."""
    trees = {}
    for i, item in enumerate(filter(None, (spec or "").split(","))):
        name, _, path = item.rpartition("=")
        trees[name or ("today" if i == 0 else f"base{i}")] = os.path.abspath(path)
    return trees


# Clients per room: each is a connection to the server and one to this
# process (64 rooms' worth of a big table stays far below the fd limit).
MAX_CLIENTS = 64


def main() -> None:
    ap = load_options(__doc__, sizes=True)
    ap.add_argument("--synchronous", default="FULL", help="vtt-sync's SQLite synchronous pragma")
    ap.add_argument("--only", choices=("relay", "vtt-sync"), help="run one side only")
    ap.add_argument(
        "--views",
        action="store_true",
        help="also run vtt-sync with one `status` NPC per room (damaged in 1 command of 4, so "
        "1 patch of 4 is encoded per view class) and print its ratio to vtt-sync",
    )
    ap.add_argument(
        "--affordances",
        action="store_true",
        help="also run vtt-sync without affordances in the views (VTT_SYNC_AFFORDANCES=false)"
        " and print the cost of keeping them current: before/after in one run",
    )
    ap.add_argument("--profile", help="py-spy raw profile of the vtt-sync side (last run) here")
    ap.add_argument(
        "--profile-kind",
        default="vtt-sync",
        help="which server --profile samples: vtt-sync (default), fast, no-affordances, ...",
    )
    ap.add_argument(
        "--base",
        help="a tree of other code (e.g. `git worktree add --detach ../base main`): runs it as "
        "`today` interleaved with this tree's vtt-sync in every round, and prints new/today; "
        "or several, NAME=PATH,NAME=PATH (the first is `today` for the ratios)",
    )
    ap.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="commands/s offered in all (each GM on a schedule, a late one sends at once) "
        "instead of closed loops at full speed: CPU per command at the same load for all",
    )
    ap.add_argument(
        "--characters", type=int, default=5, help="characters per room (>= 5: bystanders added)"
    )
    ap.add_argument(
        "--absent",
        type=int,
        default=0,
        help="players per room who own a character and never connect",
    )
    ap.add_argument(
        "--fast",
        action="store_true",
        help="also run this tree with --transport picows (pip install 'vtt-sync[fast]'), "
        "as `fast`, and print its ratios",
    )
    ns = ap.parse_args()
    sizes = [max(2, min(int(c), MAX_CLIENTS)) for c in ns.clients.split(",")]
    ns.rooms = min(ns.rooms, 200)
    ns.seconds, ns.runs = min(ns.seconds, 60.0), min(ns.runs, 20)
    kinds = [ns.only] if ns.only else ["relay", "vtt-sync"]
    ns.trees = parse_trees(ns.base)
    if ns.base:
        kinds = [*ns.trees, "vtt-sync"] if ns.only else ["relay", *ns.trees, "vtt-sync"]
    if ns.fast:
        kinds.append("fast")
    if ns.views:
        kinds.append("secrets")
    if ns.affordances:
        kinds.append("no-affordances")
    results: dict[int, dict[str, list[dict[str, float]]]] = {
        c: {k: [] for k in kinds} for c in sizes
    }
    for _ in range(ns.runs):  # every size and kind once a round: interleaved
        for c in sizes:
            for kind in kinds:
                results[c][kind].append(
                    one_run(kind, argparse.Namespace(**{**vars(ns), "clients": c}))
                )
    for i, c in enumerate(sizes):
        if i:
            print()
        report(argparse.Namespace(**{**vars(ns), "clients": c}), kinds, results[c])
    if ns.affordances and len(sizes) > 1 and "vtt-sync" in kinds:
        print("\naffordance share of a command's server CPU, (with - without) / with:")
        for c in sizes:
            print(f"{c:4} clients a room: {affordance_share(results[c])}")


def affordance_share(results: dict[str, list[dict[str, float]]]) -> str:
    """The share of a command's CPU the affordances cost, from the medians,
    and round by round (each round's pair ran one after the other)."""
    with_, without = results["vtt-sync"], results["no-affordances"]

    def share(w: float, wo: float) -> float:
        return (w - wo) / w if w else float("nan")

    med = share(*(statistics.median(r["cpu_us_per_cmd"] for r in rs) for rs in (with_, without)))
    rounds = [
        share(w["cpu_us_per_cmd"], wo["cpu_us_per_cmd"])
        for w, wo in zip(with_, without, strict=True)
    ]
    per_round = " ".join(f"{x:.0%}" for x in rounds)
    return (
        f"{med:.1%} of the medians; per round {per_round} (median {statistics.median(rounds):.1%})"
    )


def report(
    ns: argparse.Namespace, kinds: list[str], results: dict[str, list[dict[str, float]]]
) -> None:
    """One size's table (and comparisons), as the bench always printed it."""
    med = {
        k: {f: statistics.median(r[f] for r in runs) for f in runs[0]}
        for k, runs in results.items()
    }
    print(
        f"{ns.rooms} rooms x {ns.clients} clients, {ns.seconds:g} s/run, median of {ns.runs} runs;"
        f" vtt-sync synchronous={ns.synchronous}"
    )
    w = max(12, *(len(k) + 2 for k in kinds))  # a column per server: its name fits
    if ns.base:
        today = next(iter(ns.trees))
        mine = [k for k in ("vtt-sync", "fast") if k in med]
        print(
            f"{'':20}"
            + "".join(f"{k:>{w}}" for k in kinds)
            + "".join(f"{k + '/' + today:>15}" for k in mine)
        )
        for field, (label, _) in ROWS.items():
            a = med[today][field]
            ratios = "".join(f"{med[k][field] / a:14.2f}x" if a else f"{'-':>15}" for k in mine)
            print(f"{label:20}" + "".join(f"{med[k][field]:{w}.2f}" for k in kinds) + ratios)
        if ns.runs > 1:  # the spread: the ratio round by round (interleaved pairs)
            for k in mine:
                pairs = [
                    f"{n['cpu_us_per_cmd'] / t['cpu_us_per_cmd']:.2f}"
                    for t, n in zip(results[today], results[k], strict=True)
                ]
                print(f"CPU/cmd {k}/{today} per round: {' '.join(pairs)}")
    elif "relay" in med and "vtt-sync" in med:
        print(f"{'':20}{'relay':>12}{'vtt-sync':>12}{'ratio':>10}   target")
        for field, (label, target) in ROWS.items():
            a, b = med["relay"][field], med["vtt-sync"][field]
            ratio = f"{b / a:9.2f}x" if a else f"{'-':>10}"
            print(f"{label:20}{a:12.2f}{b:12.2f}{ratio}   {target}")
    else:  # one side only (--only): its columns, no ratio to the relay
        print(f"{'':20}" + "".join(f"{k:>{w}}" for k in kinds))
        for field, (label, _) in ROWS.items():
            print(f"{label:20}" + "".join(f"{med[k][field]:{w}.2f}" for k in kinds))
    if ns.fast and "vtt-sync" in med and not ns.base:
        title = "the fast transport (picows, uvloop), to the same load on websockets:"
        compare(med, title, ("websockets", "vtt-sync"), ("picows", "fast"))
    if ns.affordances and "vtt-sync" in med:
        title = "what each viewer may do (affordances) kept current, to the same load without:"
        compare(med, title, ("without", "no-affordances"), ("with", "vtt-sync"))
        print(f"affordance share of a command's CPU: {affordance_share(results)}")
    if ns.views and "vtt-sync" in med:  # (--only relay has no vtt-sync to compare with)
        title = "with one `status` NPC per room (views), to the same load without secrets:"
        compare(med, title, ("no secrets", "vtt-sync"), ("secrets", "secrets"))


def compare(
    med: dict[str, dict[str, float]], title: str, a: tuple[str, str], b: tuple[str, str]
) -> None:
    """Print two kinds' medians side by side, with the second's ratio to the first."""
    print(f"\n{title}")
    print(f"{'':20}{a[0]:>12}{b[0]:>12}{'ratio':>10}")
    for field, (label, _) in ROWS.items():
        x, y = med[a[1]][field], med[b[1]][field]
        ratio = f"{y / x:9.2f}x" if x else f"{'-':>10}"
        print(f"{label:20}{x:12.2f}{y:12.2f}{ratio}")


if __name__ == "__main__":
    main()
