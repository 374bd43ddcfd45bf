"""Capacity (issue 36): how many tables one server process holds at a
table's real pace.

    python -m bench.capacity_bench [--start-tables 100] [--max-tables 2400]
                                   [--step-seconds 20] [--warmup 8] [--bisect 2]
                                   [--drivers 2] [--workers 2] [--storage sqlite|postgres]
                                   [--tree PATH] [--budget 300]

A table is a room of 6 clients: its GM and 5 players, each owning a
character; 3 players idle (connected, reading, sending nothing: their
characters are in the running combat with the GM's NPC), 2 active. Each
table sends one command per 5 s (TABLE_PACE), from its GM or an active
player, in turn: the GM damages or heals the NPC, an active player starts
or stops a short rest of their own character; every 6th command (30 s) is
the GM's end_turn, every 12th (a minute) an advance of the clock by a
minute. Tables start at random phases.

The number of tables ramps: doubling from --start-tables while a step
holds, up to --max-tables, then bisecting between the last that held and
the first that did not (--bisect steps). A step adds the tables it needs
(set up by ordinary commands, their clients connected), lets them run for
--warmup s, then measures for --step-seconds; it holds when the p99 of
both the command's answer (send to ack, at the sender) and its patch at
every client of the table (send to the last arrival) is under 100 ms
(P99_LIMIT_MS), no command was refused, failed or unanswered ("failed"),
and no client missed a patch ("lost"). Going
down, the tables past the step's count stop (their clients leave). No
step is begun that would end more than --budget seconds (300) after the
first began: the bench at its defaults takes about 5 minutes.

Printed per step and for the most tables held: commands/s, p50/p99,
the server's CPU per command and its CPU % (from /proc: every worker with
--workers), the collector's longest pass and its full passes in the
window (a probe: server_bench.GC_PROBE), RSS per table and per connection
(RSS with N tables minus the server's RSS before the first, over N;
measured on the way up, before any table stops; split into what the rooms
added as they were set up and what their clients added as they joined),
and the load generator's CPU (its driver processes, each driving whole
tables: a table's sender and readers share a process and a clock) with
how late its commands went out (a driver behind its schedule would be the
bottleneck, not the server).

--workers N: the server's own `serve --workers N` (docs/cluster.md,
"Every core"); a hello landing on a worker not serving its room follows
the redirect.
--storage postgres: a throwaway database on the local PostgreSQL
(VTT_SYNC_TEST_PG_ADMIN, default postgres@127.0.0.1:5432), dropped after;
the PostgreSQL server's CPU per command is printed too (every PostgreSQL
process's: keep the machine quiet). --tree: another tree's server (e.g.
main, to compare). Loopback only, bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import os
import random
import re
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from bench.cluster_bench import postgres_cpu
from bench.harness import (
    Helper,
    close_peer,
    open_peer,
    pipelined,
    rss_kb,
    start_tree,
)
from bench.server_bench import (
    ADMIN_TOKEN,
    GC_PROBE,
    SHEET,
    Peer,
    cpu_seconds,
    gc_passes,
    hello,
    pct,
    stop_server,
)
from sync_server.testing.postgres import admin_dsn, create_database, drop_database

TABLE_PACE = 5.0  # seconds between a table's commands
TURN_EVERY = 6  # every 6th command is an end_turn: one per 30 s
CLOCK_EVERY = 12  # every 12th an advance of the clock: one per minute
CLOCK_STEP = 60  # world seconds
PLAYERS = 5
ACTIVE = 2  # players who send commands; the other 3 only read
P99_LIMIT_MS = 100.0
NPC = "npc"
# Tables set up (or connected) at once: enough to overlap the round trips,
# few enough not to make the server's loop the setup's queue.
SETUP_CONCURRENCY = 16
# A command unanswered this long counts as failed (the step does not hold).
COMMAND_TIMEOUT = 10.0
MAX_TABLES = 5000  # 30,000 connections: far past what 2 cores hold


@dataclass
class TableSpec:
    """What a driver needs to play a table: its room, tokens, characters."""

    room: str
    gm: str
    players: list[str]  # tokens, the active ones first
    chars: list[str]  # the players' characters, in the same order


@dataclass
class Sent:
    t0: float
    ack: float  # seconds to the ack (or -1: refused, failed)
    v: int
    late: float  # seconds behind the schedule when sent


@dataclass
class Table:
    spec: TableSpec
    peers: list[Peer]  # the GM, then the players
    readers: list[asyncio.Task[None]]
    sent: list[Sent] = field(default_factory=list)


async def set_up_table(url: str, room: str, gm_token: str) -> TableSpec:
    """Its users, characters and combat: three pipelined rounds."""
    gm, reader = await open_peer(url, gm_token, room)
    users = await pipelined(
        gm,
        ((f"u{i}", "add_user", {"name": f"Player {i}", "role": "player"}) for i in range(PLAYERS)),
    )
    sheets = [
        {**SHEET, "name": f"PC{i}", "id": f"pc{i}", "owner": u["result"]["user"]}
        for i, u in enumerate(users)
    ]
    sheets.append({**SHEET, "name": "NPC", "id": NPC, "shown": "status"})
    await pipelined(gm, ((f"c{i}", "add_character", s) for i, s in enumerate(sheets)))
    # The idle players' characters fight the NPC; the active ones' may rest.
    order = [NPC, *(f"pc{i}" for i in range(ACTIVE, PLAYERS))]
    await pipelined(gm, [("combat", "combat_start", {"order": order})])
    await close_peer(gm, reader)
    return TableSpec(
        room,
        gm_token,
        [u["result"]["token"] for u in users],
        [f"pc{i}" for i in range(PLAYERS)],
    )


async def set_up_tables(url: str, first: int, count: int, prefix: str) -> list[TableSpec]:
    admin, reader = await open_peer(url, ADMIN_TOKEN, None)
    rooms = [f"{prefix}t{i}" for i in range(first, first + count)]
    acks = await pipelined(
        admin, ((f"mk-{r}", "create_room", {"room": r, "name": r}) for r in rooms)
    )
    await close_peer(admin, reader)
    sem = asyncio.Semaphore(SETUP_CONCURRENCY)

    async def one(room: str, ack: dict[str, Any]) -> TableSpec:
        async with sem:
            return await set_up_table(url, room, ack["result"]["gm_token"])

    return await asyncio.gather(*(one(r, a) for r, a in zip(rooms, acks, strict=True)))


def next_command(table: Table, n: int) -> tuple[Peer, str, dict[str, Any]]:
    """The table's n-th command: who sends it, and what."""
    gm = table.peers[0]
    if n % TURN_EVERY == TURN_EVERY - 1:
        combat = gm.state["combat"]
        return gm, "end_turn", {"char": combat["order"][combat["turn"]]}
    if n % CLOCK_EVERY == 2:
        return gm, "advance_clock", {"seconds": CLOCK_STEP}
    k = n % 4
    if k in (0, 2):  # the NPC, hit and healed in turn: it never dies
        return gm, "damage" if k == 0 else "heal", {"char": NPC, "amount": 2}
    i = (n // 4) % ACTIVE
    player, char = table.peers[1 + i], table.spec.chars[i]
    if player.state["characters"][char].get("activity") is None:
        return player, "rest", {"char": char, "kind": "short"}
    return player, "stop_rest", {"char": char}


async def play(table: Table, serial: int, flags: dict[str, bool]) -> None:
    """One command every TABLE_PACE seconds, from a random phase. Command
    ids are this process's and this play's own: a table played again
    after it stopped (the ramp going down, then up) sends new ids, not
    ones the server would answer as retries."""
    await asyncio.sleep(random.uniform(0, TABLE_PACE))
    due = time.perf_counter()
    for n in itertools.count():
        sender, op, args = next_command(table, n)
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT):
                reply = await sender.command(f"{os.getpid()}-{serial}-{n}", op, args)
            ok = reply["t"] == "ack"
            if not ok and flags.get("verbose"):
                print(f"refused: {op} {args}: {reply}", file=sys.stderr)
        except (TimeoutError, RuntimeError):
            reply, ok = {}, False
        record = Sent(t0, time.perf_counter() - t0 if ok else -1.0, reply.get("v", -1), t0 - due)
        table.sent.append(record)
        due += TABLE_PACE
        await asyncio.sleep(max(0.0, due - time.perf_counter()))


async def connect_table(url: str, spec: TableSpec) -> Table:
    peers = []
    readers = []
    for i, token in enumerate([spec.gm, *spec.players]):
        ws, welcome = await hello(url, token, spec.room)
        # The GM follows the combat's turn, the active players their rests.
        peer = Peer(ws, welcome, mirror=i <= ACTIVE)
        readers.append(asyncio.create_task(peer.read()))
        peers.append(peer)
    return Table(spec, peers, readers)


async def connect_tables(url: str, specs: list[TableSpec]) -> list[Table]:
    sem = asyncio.Semaphore(SETUP_CONCURRENCY)

    async def one(spec: TableSpec) -> Table:
        async with sem:
            return await connect_table(url, spec)

    return await asyncio.gather(*(one(s) for s in specs))


# Seconds the clients of the tables that stop wait for their closing
# handshakes, all at once, before their connections are dropped.
LEAVE_SECONDS = 5.0


async def leave(tables: list[Table]) -> None:
    """Every client of `tables` leaves: closed at once, not one by one (a
    loaded server's closing handshakes, thousands in a row, took minutes);
    those not closed in LEAVE_SECONDS are cut."""
    pairs = [pr for t in tables for pr in zip(t.peers, t.readers, strict=True)]
    try:
        async with asyncio.timeout(LEAVE_SECONDS):
            await asyncio.gather(*(close_peer(p, r) for p, r in pairs))
    except TimeoutError:
        for p, _ in pairs:
            p.ws.transport.abort()


def raise_fd_limit() -> int:
    """The soft limit of open files up to the hard one (thousands of
    connections); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def driver_process(url: str, conn: Any) -> None:
    """A load generator: the tables it is given, each with its 6 clients
    and its schedule; measures between "start" and "stop"."""
    raise_fd_limit()

    async def run() -> None:
        tables: list[Table] = []
        tasks: list[asyncio.Task[None]] = []
        flags: dict[str, bool] = {"verbose": bool(os.environ.get("VTT_BENCH_VERBOSE"))}
        serials = itertools.count()
        cpu0 = window0 = 0.0
        conn.send("ready")
        while True:
            msg = await asyncio.to_thread(conn.recv)
            if msg[0] == "add":
                t0 = time.perf_counter()
                for t in await connect_tables(url, msg[1]):
                    tasks.append(asyncio.create_task(play(t, next(serials), flags)))
                    tables.append(t)
                # The clients' objects live as long as the run: out of the
                # collector's sight, so its passes over thousands of
                # connections do not stall this loop (and delay the
                # commands it times).
                gc.collect()
                gc.freeze()
                conn.send(time.perf_counter() - t0)
            elif msg[0] == "drop":  # keep the first msg[1] tables
                for task in tasks[msg[1] :]:
                    task.cancel()
                await leave(tables[msg[1] :])
                del tables[msg[1] :], tasks[msg[1] :]
                conn.send(len(tables))
            elif msg[0] == "start":
                for t in tables:
                    t.sent.clear()
                cpu0, window0 = time.process_time(), time.perf_counter()
                conn.send("started")
            elif msg[0] == "stop":
                await asyncio.sleep(0.5)  # the last patches land
                conn.send(window_stats(tables, cpu0, window0))
            else:
                for task in tasks:
                    task.cancel()
                await leave(tables)
                conn.send("bye")
                return

    asyncio.run(run())


def window_stats(tables: list[Table], cpu0: float, window0: float) -> dict[str, Any]:
    """The commands sent since "start": answer and patch latencies, s."""
    acks, patches, lates = [], [], []
    failed = missing = 0
    end = time.perf_counter() - 0.5  # commands sent in the last half second are not judged
    for t in tables:
        for s in t.sent:
            if s.t0 > end:
                continue
            lates.append(s.late)
            if s.ack < 0:
                failed += 1
                continue
            acks.append(s.ack)
            arrivals = [p.arrived.get(s.v) for p in t.peers]
            if any(a is None for a in arrivals):
                missing += 1
            else:
                patches.append(max(a for a in arrivals if a is not None) - s.t0)
        for p in t.peers:  # what was judged is not kept
            p.arrived.clear()
    return {
        "acks": acks,
        "patches": patches,
        "lates": lates,
        "failed": failed,
        "missing": missing,
        "cpu": time.process_time() - cpu0,
        "wall": time.perf_counter() - window0,
    }


class Bench:
    """One server, its driver processes, and the tables so far."""

    def __init__(self, ns: argparse.Namespace, data: str, dsn: str | None) -> None:
        extra = ["--log-level", "WARNING"]
        if ns.workers > 1:
            extra += ["--workers", str(ns.workers)]
        if dsn is not None:
            extra += ["--database", dsn, "--node-id", "capacity"]
        # The collector's passes, logged by the probe (server_bench.GC_PROBE).
        self.gc_log = os.path.join(data, "gc.log")
        env = {"PYTHONPATH": GC_PROBE, "VTT_BENCH_GC_LOG": self.gc_log}
        self.proc, self.url = start_tree(data, ns.tree, extra, env)
        self.pids: list[int] = [self.proc.pid]
        if ns.workers > 1:
            with open(os.path.join(data, "server.log")) as f:
                found = re.findall(r"worker \d+: node \S+, pid (\d+)", f.read())
            self.pids = [int(p) for p in found] + [self.proc.pid]
        self.postgres = dsn is not None
        time.sleep(1.0)  # start-up's own allocations settle
        self.rss0 = rss_kb(self.pids)
        self.drivers = [Helper(driver_process, self.url) for _ in range(ns.drivers)]
        for d in self.drivers:
            d.wait_ready()
        self.specs: list[TableSpec] = []
        # Which tables (indexes in specs) each driver plays, in order: the
        # tables playing are always specs[:connected].
        self.owned: list[list[int]] = [[] for _ in range(ns.drivers)]
        self.connected = 0
        self.peak_rss: tuple[int, int] | None = None  # (tables, kB) on the way up
        self.most = 0  # the most tables ever playing
        # RSS the rooms added as they were set up (no client yet), and the
        # connections added when their clients joined rooms already loaded.
        self.rooms_kb = self.clients_kb = 0

    def ask(self, i: int, msg: tuple[Any, ...], timeout: float = 600.0) -> Any:
        d = self.drivers[i]
        d.conn.send(msg)
        if not d.conn.poll(timeout):
            raise RuntimeError(f"driver {i} did not answer {msg[0]}")
        return d.conn.recv()

    def resize(self, tables: int) -> float:
        """Tables `0..tables-1` playing: set up and connect the new ones
        (round robin over the drivers), or stop those past it; seconds."""
        t0 = time.perf_counter()
        if tables > len(self.specs):  # new rooms: what they add, before any client
            first, before = len(self.specs), rss_kb(self.pids)
            self.specs += asyncio.run(set_up_tables(self.url, first, tables - first, "cap"))
            self.rooms_kb += rss_kb(self.pids) - before
        if tables > self.connected:
            before = rss_kb(self.pids)
            n = len(self.drivers)
            shares = [list(range(self.connected + i, tables, n)) for i in range(n)]
            for i, share in enumerate(shares):
                if share:
                    self.drivers[i].conn.send(("add", [self.specs[k] for k in share]))
            for i, share in enumerate(shares):
                if share:
                    if not self.drivers[i].conn.poll(600):
                        raise RuntimeError(f"driver {i} did not connect its tables")
                    self.drivers[i].conn.recv()
                    self.owned[i] += share
            if tables > self.most:  # connections to rooms loaded: what they add
                self.clients_kb += rss_kb(self.pids) - before
        elif tables < self.connected:
            for i, owned in enumerate(self.owned):
                keep = sum(k < tables for k in owned)
                self.ask(i, ("drop", keep))
                del owned[keep:]
        self.connected = tables
        return time.perf_counter() - t0

    def step(self, tables: int, ns: argparse.Namespace) -> dict[str, Any]:
        # Memory per table only from a step past every earlier one: a
        # table that stopped leaves its room loaded (until it idles out).
        growing = tables > max(self.most, self.connected)
        took = self.resize(tables)
        self.most = max(self.most, tables)
        time.sleep(ns.warmup)
        for i in range(len(self.drivers)):
            self.ask(i, ("start",))
        pg0 = postgres_cpu() if self.postgres else 0.0
        cpu0, t0, began = cpu_seconds(self.pids), time.perf_counter(), time.time()
        time.sleep(ns.step_seconds)
        cpu, wall = cpu_seconds(self.pids) - cpu0, time.perf_counter() - t0
        pg = postgres_cpu() - pg0 if self.postgres else 0.0
        rss = rss_kb(self.pids)
        passes = gc_passes(self.gc_log, began, time.time())
        if growing:
            self.peak_rss = (tables, rss)
        parts = [self.ask(i, ("stop",)) for i in range(len(self.drivers))]
        acks = [x for p in parts for x in p["acks"]]
        patches = [x for p in parts for x in p["patches"]]
        lates = [x for p in parts for x in p["lates"]]
        failed = sum(p["failed"] for p in parts)
        missing = sum(p["missing"] for p in parts)
        n = len(acks) + failed
        out = {
            "tables": tables,
            "setup_s": took,
            "cmds_per_s": n / wall,
            "ack_p50_ms": pct(acks, 0.5) * 1e3,
            "ack_p99_ms": pct(acks, 0.99) * 1e3,
            "patch_p50_ms": pct(patches, 0.5) * 1e3,
            "patch_p99_ms": pct(patches, 0.99) * 1e3,
            "failed": failed,
            "missing": missing,
            "cpu_us_per_cmd": cpu / max(n, 1) * 1e6,
            "server_cpu_pct": cpu / wall * 100,
            "pg_us_per_cmd": pg / max(n, 1) * 1e6,
            "rss_mb": rss / 1024,
            "gc_max_ms": max((took for _, took in passes), default=0.0) * 1e3,
            "gc_full": sum(gen == 2 for gen, _ in passes),
            "driver_cpu_pct": sum(p["cpu"] for p in parts) / wall * 100,
            "late_p99_ms": pct(lates, 0.99) * 1e3,
        }
        out["holds"] = (
            n > 0
            and failed == 0
            and missing == 0
            and out["ack_p99_ms"] < P99_LIMIT_MS
            and out["patch_p99_ms"] < P99_LIMIT_MS
        )
        return out

    def close(self) -> None:
        for i in range(len(self.drivers)):
            with contextlib.suppress(Exception):
                self.ask(i, ("quit",), 60)
            self.drivers[i].proc.join(10)
            if self.drivers[i].proc.is_alive():
                self.drivers[i].proc.kill()
        stop_server(self.proc)


COLUMNS = (
    ("tables", "tables", "{:>7.0f}"),
    ("cmds_per_s", "cmd/s", "{:>7.1f}"),
    ("ack_p50_ms", "ack p50", "{:>8.1f}"),
    ("ack_p99_ms", "ack p99", "{:>8.1f}"),
    ("patch_p50_ms", "patch p50", "{:>10.1f}"),
    ("patch_p99_ms", "patch p99", "{:>10.1f}"),
    ("failed", "failed", "{:>7.0f}"),
    ("missing", "lost", "{:>5.0f}"),
    ("cpu_us_per_cmd", "us/cmd", "{:>8.0f}"),
    ("server_cpu_pct", "srv CPU%", "{:>9.1f}"),
    ("rss_mb", "RSS MB", "{:>8.1f}"),
    ("gc_max_ms", "GC max", "{:>7.0f}"),
    ("gc_full", "full", "{:>5.0f}"),
    ("driver_cpu_pct", "drv CPU%", "{:>9.1f}"),
    ("late_p99_ms", "late p99", "{:>9.1f}"),
    ("setup_s", "setup s", "{:>8.1f}"),
)


def print_step(r: dict[str, Any], header: bool = False) -> None:
    if header:
        print("".join(f"{title:>{len(fmt.format(0))}}" for _, title, fmt in COLUMNS) + "  holds")
    print("".join(fmt.format(r[k]) for k, _, fmt in COLUMNS) + ("  yes" if r["holds"] else "  NO"))


def ramp(bench: Bench, ns: argparse.Namespace) -> list[dict[str, Any]]:
    """Double while a step holds, then bisect --bisect times; no step is
    begun that would end past --budget seconds from the start (its
    setup's time guessed from the previous step's, per table added)."""
    steps: list[dict[str, Any]] = []
    good, bad = 0, None
    deadline = time.perf_counter() + ns.budget

    def affordable(n: int) -> bool:
        if not steps:
            return True
        last = steps[-1]
        added = max(0, n - max(s["tables"] for s in steps))
        setup = last["setup_s"] / max(last["tables"], 1) * added
        ok = time.perf_counter() + setup + ns.warmup + ns.step_seconds + 5 < deadline
        if not ok:
            print(f"(--budget {ns.budget:g} s reached: {n} tables not tried)")
        return ok

    def run(n: int) -> dict[str, Any]:
        r = bench.step(n, ns)
        steps.append(r)
        print_step(r, header=len(steps) == 1)
        return r

    n = ns.start_tables
    while affordable(n):
        if run(n)["holds"]:
            good = n
            if n >= ns.max_tables:
                break
            n = min(n * 2, ns.max_tables)
        else:
            bad = n
            break
    for _ in range(ns.bisect):
        if bad is None or bad - good <= max(2, good // 20):
            break
        n = (good + bad) // 2
        if not affordable(n):
            break
        if run(n)["holds"]:
            good = n
        else:
            bad = n
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--start-tables", type=int, default=100)
    ap.add_argument("--max-tables", type=int, default=2400)
    ap.add_argument("--step-seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=8.0, help="seconds before a step's window")
    ap.add_argument("--bisect", type=int, default=2, help="bisection steps after the doubling")
    ap.add_argument("--drivers", type=int, default=2, help="load generator processes")
    ap.add_argument("--workers", type=int, default=1, help="the server's --workers (1: plain)")
    ap.add_argument("--storage", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--tree", help="another tree's server (its own code, started in it)")
    ap.add_argument(
        "--budget", type=float, default=300.0, help="seconds: no step begun that would end later"
    )
    ns = ap.parse_args()
    ns.tree = os.path.abspath(ns.tree) if ns.tree else None
    ns.max_tables = max(1, min(ns.max_tables, MAX_TABLES))
    ns.start_tables = max(1, min(ns.start_tables, ns.max_tables))
    ns.step_seconds = max(5.0, min(ns.step_seconds, 120.0))
    ns.warmup = max(0.0, min(ns.warmup, 60.0))
    ns.bisect = max(0, min(ns.bisect, 6))
    ns.drivers = max(1, min(ns.drivers, 8))
    ns.budget = max(30.0, min(ns.budget, 3600.0))
    ns.workers = max(1, min(ns.workers, 16))
    fds = raise_fd_limit()
    print(
        f"capacity: tables of 1 GM + {PLAYERS} players ({PLAYERS - ACTIVE} idle), one command "
        f"per {TABLE_PACE:g} s a table, end_turn every {TABLE_PACE * TURN_EVERY:g} s; "
        f"{ns.storage}, {'plain serve' if ns.workers == 1 else f'--workers {ns.workers}'}, "
        f"{ns.drivers} driver processes, {os.cpu_count()} cores, fd limit {fds}; "
        f"holds: p99 < {P99_LIMIT_MS:g} ms, nothing refused"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as data:
        dsn = name = None
        if ns.storage == "postgres":
            dsn, name = asyncio.run(create_database(admin_dsn()))
        bench = None
        try:
            bench = Bench(ns, data, dsn)
            steps = ramp(bench, ns)
            summary(bench, steps)
        finally:
            if bench is not None:
                bench.close()
            if name is not None:
                asyncio.run(drop_database(name, admin_dsn()))
    print(f"(the bench took {time.perf_counter() - started:.0f} s)")


def summary(bench: Bench, steps: list[dict[str, Any]]) -> None:
    held = [s for s in steps if s["holds"]]
    if not held:
        print("no step held: start lower (--start-tables)")
        return
    best = max(held, key=lambda s: s["tables"])
    print(
        f"\nmost tables held: {best['tables']} ({best['tables'] * (1 + PLAYERS)} connections), "
        f"{best['cmds_per_s']:.1f} commands/s; ack p50/p99 {best['ack_p50_ms']:.1f}/"
        f"{best['ack_p99_ms']:.1f} ms, patch p50/p99 {best['patch_p50_ms']:.1f}/"
        f"{best['patch_p99_ms']:.1f} ms; server CPU {best['cpu_us_per_cmd']:.0f} us a command "
        f"({best['server_cpu_pct']:.1f}% of a core)"
        + (f", PostgreSQL {best['pg_us_per_cmd']:.0f} us" if bench.postgres else "")
    )
    if bench.peak_rss is not None:
        tables, rss = bench.peak_rss
        per_table = (rss - bench.rss0) / tables
        print(
            f"memory: RSS {bench.rss0 / 1024:.1f} MB at start, {rss / 1024:.1f} MB with "
            f"{tables} tables: {per_table:.0f} KiB a table with its clients; "
            f"set up, before any client joined: {bench.rooms_kb / bench.most:.0f} KiB a room; "
            f"joining: {bench.clients_kb / bench.most / (1 + PLAYERS):.0f} KiB a connection"
        )
    print(
        f"load generator: {best['driver_cpu_pct']:.1f}% of a core over {len(bench.drivers)} "
        f"processes, commands late by {best['late_p99_ms']:.1f} ms at p99"
    )
    cpu_per_table = best["cpu_us_per_cmd"] * 1e-6 / TABLE_PACE
    print(
        f"CPU a table: {cpu_per_table * 1e3:.2f} ms/s, so a core's worth of CPU alone would "
        f"serve ~{1 / cpu_per_table:.0f} tables at this pace"
    )


if __name__ == "__main__":
    main()
    sys.exit(0)
