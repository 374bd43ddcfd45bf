"""Helpers the newer benchmarks share (the older ones' are in server_bench):
a server of a tree started in it (trees: server_bench.parse_trees), commands
sent many at a time, connections that only read, and what /proc says of a
process's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import subprocess
import time
from collections.abc import Iterable, Sequence
from typing import Any

from bench.server_bench import ADMIN_TOKEN, Peer, hello, start

# Commands a setup keeps in flight on one session: under the server's
# MAX_INFLIGHT_PER_SESSION (64), which would refuse the ones past it.
SETUP_WINDOW = 48


def start_tree(
    data: str, tree: str | None = None, extra: Sequence[str] = (), env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """A server of this tree (or `tree`'s: its own code, started in it, with
    this interpreter's packages) on the data directory `data`, default
    settings plus `extra` arguments: its process and URL."""
    env = {**os.environ, "VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN, **(env or {})}
    if tree is not None:  # first on the path, before any probe given in `env`
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (tree, env.get("PYTHONPATH"))))
    log = os.path.join(data, "server.log")
    args = ["-m", "sync_server", "serve", "--port", "0", "--data-dir", data, *extra]
    return start(args, r"listening on (ws://[^\s\"]+)", env, log, cwd=tree)


async def pipelined(
    peer: Peer, calls: Iterable[tuple[str, str, dict[str, Any]]], window: int = SETUP_WINDOW
) -> list[dict[str, Any]]:
    """Send (id, op, args) commands with up to `window` in flight (a setup
    of hundreds of commands in a big room would otherwise wait for each
    ack in turn); their answers in order. A refusal raises."""
    sem = asyncio.Semaphore(window)

    async def one(cid: str, op: str, args: dict[str, Any]) -> dict[str, Any]:
        async with sem:
            reply = await peer.command(cid, op, args)
        if reply["t"] != "ack":
            raise RuntimeError(f"setup command refused: {op} {args}: {reply}")
        return reply

    return await asyncio.gather(*(one(*c) for c in calls))


async def open_peer(url: str, token: str, room: str | None) -> tuple[Peer, asyncio.Task[None]]:
    """A session (hello, welcome) and its reader task."""
    ws, welcome = await hello(url, token, room)
    peer = Peer(ws, welcome, mirror=False)
    return peer, asyncio.create_task(peer.read())


async def close_peer(peer: Peer, reader: asyncio.Task[None]) -> None:
    reader.cancel()
    with contextlib.suppress(Exception):
        await peer.ws.close()


class Reader:
    """A connection that only reads (a player or observer watching): the
    version and time of the last frame carrying one."""

    def __init__(self) -> None:
        self.v = -1
        self.at = 0.0
        self.frames = 0

    async def run(self, url: str, token: str, room: str, ready: asyncio.Event) -> None:
        import msgpack

        ws, welcome = await hello(url, token, room)
        self.v, self.at = welcome.get("v", -1), time.perf_counter()
        ready.set()
        try:
            async for data in ws:
                frame = msgpack.unpackb(data)
                if "v" in frame:
                    self.v, self.at = frame["v"], time.perf_counter()
                    self.frames += 1
        finally:
            with contextlib.suppress(Exception):
                await ws.close()


class Helper:
    """A child process (spawned: a fresh interpreter and event loop) and
    the pipe to it."""

    def __init__(self, target: Any, *args: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=target, args=(*args, child), daemon=True)
        self.proc.start()

    def wait_ready(self, timeout: float = 120.0) -> None:
        if not self.conn.poll(timeout) or self.conn.recv() != "ready":
            raise RuntimeError("a helper process did not get ready")

    def finish(self, timeout: float = 120.0) -> Any:
        self.conn.send("stop")
        if not self.conn.poll(timeout):
            raise RuntimeError("a helper process did not answer")
        out = self.conn.recv()
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
        return out


def rss_kb(pid: int | Sequence[int]) -> int:
    """Resident memory of a process (or the sum of several: workers), kB."""
    if not isinstance(pid, int):
        return sum(rss_kb(p) for p in pid)
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
