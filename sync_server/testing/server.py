"""Helpers for driving a real sync server: shipped with the product, so that
the tests, the benchmarks and module authors all use the same ones.

- `running_server(data_dir, **config)`: an in-process `Server` on 127.0.0.1,
  port 0 (async context manager); fixture `vtt_server` gives one on a tmp
  data dir.
- `connect(url, token, room, proto="msgpack"|"json", since=None, base=None)`:
  a minimal raw protocol client: hello/welcome, then a background reader
  that keeps a mirror of the room with `rules.apply_ops`, resolves acks and
  errors by command id and records every frame. `connect_admin` for admin
  sessions.
- `create_table(url, admin_token, room)`: a room with a GM, two players, an
  observer and three characters (all shown in full), over the wire (works for subprocess
  servers too).
- `start_subprocess_server(data_dir)`: `python -m sync_server serve --port 0`
  in a child process, its URL read from the "listening on" line.

Every wait is bounded (WAIT seconds); nothing sleeps to assert.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import msgpack
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

import rules
from rules.testing import SHEET
from sync_server import Config, Server
from sync_server.clock import Clock, SystemClock
from sync_server.core.afford import AFFORDANCES
from sync_server.core.limits import LIMIT_FIELDS, Limits
from sync_server.wire import frames
from sync_server.wire.codec import CODECS, JSON, MSGPACK

WAIT = 10.0  # seconds: the bound on any single wait in these helpers
# They wait on a real server: real time, read through the clock port.
CLOCK: Clock = SystemClock()
ADMIN_TOKEN = "test-admin-token-" + "x" * 24
# The checkout holding the packages, when run from one (child servers start there).
REPO = Path(__file__).resolve().parents[2]

PROTOS = {"msgpack": MSGPACK, "json": JSON}


_ids = itertools.count(1)


def next_id(prefix: str = "c") -> str:
    return f"{prefix}-{next(_ids)}"


# --- the server ----------------------------------------------------------


# The transport of the servers these helpers start ("websockets" or
# "picows"); the suite runs a representative set of tests on both
# (tests/helpers/server.py: `on_both_transports`).
TRANSPORT = "websockets"


def test_config(data_dir: Path, **overrides: Any) -> Config:
    """A config for tests: fixed admin token, invariants checked after
    every command, SQLite NORMAL (crash-safe in WAL, no fsync per commit).
    Overrides naming a field of `Limits` go into the config's limits."""
    limits = {k: overrides.pop(k) for k in list(overrides) if k in LIMIT_FIELDS}
    params: dict[str, Any] = {
        "data_dir": data_dir,
        "admin_token": ADMIN_TOKEN,
        "synchronous": "NORMAL",
        "check_invariants": True,
        "limits": Limits(**limits),
        "transport": TRANSPORT,
    }
    params.update(overrides)
    return Config(**params)


test_config.__test__ = False  # type: ignore[attr-defined]  # not a test, despite its name


@contextlib.asynccontextmanager
async def running_server(data_dir: Path, **overrides: Any) -> AsyncIterator[Server]:
    """An in-process server; `clock`, `storage` and `bus` go to the Server,
    every other override to its config (limits included)."""
    parts = {k: overrides.pop(k) for k in ("clock", "storage", "bus") if k in overrides}
    async with Server(test_config(data_dir, **overrides), **parts) as srv:
        yield srv


# --- the raw client ------------------------------------------------------


class Closed(Exception):
    pass


def seen_by(state: dict[str, Any], viewer: rules.Viewer) -> dict[str, Any]:
    """The GM's `state` as `viewer` may see it, affordances included if the
    GM's state has them (see `RawClient.seen`)."""
    room = {k: x for k, x in state.items() if k != AFFORDANCES}
    out = rules.view_state(room, viewer)
    if AFFORDANCES not in state:
        return out
    undo = state[AFFORDANCES].get("undo") or {}
    entry = None if "why" in undo else rules.UndoEntry(undo["v"], undo["op"], undo["by"])
    return {**out, AFFORDANCES: rules.affordances(rules.Room.from_dict(room), viewer, entry)}


def room_ops(patch: dict[str, Any]) -> dict[str, Any]:
    """A patch without its ops on what the viewer may do (`affordances`):
    the change to the room itself, the same for every viewer who sees it."""
    return {**patch, "ops": [op for op in patch["ops"] if op[1][:1] != [AFFORDANCES]]}


def without_affordances(state: dict[str, Any]) -> dict[str, Any]:
    """A viewer's state without what they may do: the room itself."""
    return {k: x for k, x in state.items() if k != AFFORDANCES}


class RawClient:
    """One raw protocol session, with a mirror of the room."""

    def __init__(self, ws: ClientConnection, proto: str) -> None:
        self.ws = ws
        self.proto = proto
        self.codec = CODECS[PROTOS[proto]]
        self.welcome: dict[str, Any] = {}
        self.user: str | None = None
        self.role: str | None = None
        self.v = 0
        self.state: dict[str, Any] = {}
        self.frames: list[dict[str, Any]] = []  # every frame after the welcome
        self.patches: list[dict[str, Any]] = []  # patches applied, in order
        self.gaps: list[tuple[int, int]] = []  # (own v, received v) out of order
        self.loose_errors: asyncio.Queue[dict[str, Any]] = asyncio.Queue()  # errors without id
        self.sync_replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._changed = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None

    def seen(self, state: dict[str, Any]) -> dict[str, Any]:
        """`state` (the room as the GM sees it) as this client may see it
        (per-role views): what its mirror must equal. When the GM's state
        carries affordances, this client's are worked out again by the rules
        from the room (and the undo the GM's say), not copied."""
        assert self.user is not None and self.role is not None
        return seen_by(state, rules.Viewer(self.user, self.role))

    # sending
    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send(self.codec.encode(frame))

    async def send_raw(self, data: bytes | str) -> None:
        await self.ws.send(data)

    def _future(self, cmd_id: str) -> asyncio.Future[dict[str, Any]]:
        fut = self._replies.get(cmd_id)
        if fut is None or fut.done():
            fut = self._replies[cmd_id] = asyncio.get_running_loop().create_future()
        return fut

    async def submit(
        self, op: str, args: dict[str, Any] | None = None, *, id: str | None = None, **extra: Any
    ) -> asyncio.Future[dict[str, Any]]:
        """Send a cmd without waiting for its reply; the future gets the ack
        or error frame."""
        cmd_id = id or next_id()
        fut = self._future(cmd_id)
        frame: dict[str, Any] = {"t": "cmd", "id": cmd_id, "op": op, "args": args or {}}
        frame.update(extra)
        await self.send(frame)
        return fut

    async def cmd(
        self, op: str, args: dict[str, Any] | None = None, *, id: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """Send a cmd and wait for its ack or error frame."""
        fut = await self.submit(op, args, id=id, **extra)
        async with CLOCK.timeout(WAIT):
            return await fut

    async def ok(self, op: str, args: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """`cmd` that must be acked; returns the ack."""
        reply = await self.cmd(op, args, **kw)
        assert isinstance(frames.parse_server(reply), frames.Ack), reply
        return reply

    async def sync(self, since: int) -> dict[str, Any]:
        await self.send({"t": "sync", "since": since})
        async with CLOCK.timeout(WAIT):
            return await self.sync_replies.get()

    async def wait_v(self, v: int) -> None:
        """Wait until the mirror reaches version v."""
        async with CLOCK.timeout(WAIT), self._changed:
            await self._changed.wait_for(lambda: self.v >= v or self.ws.close_code is not None)
        assert self.v >= v, f"connection closed at v{self.v}, waiting for v{v}"

    async def closed(self) -> tuple[int | None, str | None]:
        """Wait for the server to close; returns (code, reason)."""
        async with CLOCK.timeout(WAIT):
            await self.ws.wait_closed()
            if self._reader is not None:
                with contextlib.suppress(Exception):
                    await self._reader
        return self.ws.close_code, self.ws.close_reason

    async def close(self) -> None:
        await self.ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    # receiving
    def start(self) -> None:
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                frame = self.codec.decode(message)
                self.frames.append(frame)
                await self._handle(frame)
        except ConnectionClosed:
            pass
        finally:
            for fut in self._replies.values():
                if not fut.done():
                    fut.set_exception(Closed(f"closed {self.ws.close_code}"))
            async with self._changed:
                self._changed.notify_all()

    def _apply_patch(self, patch: dict[str, Any]) -> None:
        if patch["v"] <= self.v:
            return  # already held (a patch both queued and in a sync reply)
        if patch["v"] != self.v + 1:
            self.gaps.append((self.v, patch["v"]))
            return
        rules.apply_ops(self.state, patch["ops"])
        self.v = patch["v"]
        self.patches.append(patch)

    async def _handle(self, frame: dict[str, Any]) -> None:
        try:
            parsed: frames.ServerFrame | None = frames.parse_server(frame)
        except frames.BadFrame:
            parsed = None  # kept as it came (self.frames): nothing to mirror
        if isinstance(parsed, frames.Patch):
            before = len(self.gaps)
            self._apply_patch(frame)
            if len(self.gaps) > before:
                await self.send({"t": "sync", "since": self.v})
        elif isinstance(parsed, frames.Patches):
            for p in parsed.patches:
                self._apply_patch(p)
            await self.sync_replies.put(frame)
        elif isinstance(parsed, frames.Snapshot):
            if parsed.v >= self.v:
                self.state, self.v = copy.deepcopy(parsed.state), parsed.v
            await self.sync_replies.put(frame)
        elif isinstance(parsed, frames.Ack | frames.Error) and parsed.id is not None:
            fut = self._future(parsed.id)
            if not fut.done():
                fut.set_result(frame)
        elif isinstance(parsed, frames.Error):
            await self.loose_errors.put(frame)
        async with self._changed:
            self._changed.notify_all()


Client = RawClient  # the name the tests know it by


async def open_ws(url: str, proto: str = "msgpack", **kw: Any) -> ClientConnection:
    subprotocols = [Subprotocol(PROTOS[proto])] if proto else None
    return await ws_connect(url, subprotocols=subprotocols, open_timeout=WAIT, max_size=2**24, **kw)


async def connect(
    url: str,
    token: str,
    room: str | None,
    proto: str = "msgpack",
    *,
    since: int | None = None,
    base: dict[str, Any] | None = None,
    ssl: Any = None,
) -> Client:
    """Open a session: hello, welcome, mirror. With `since`, pass the state
    held at that version as `base` (a welcome with patches applies onto it).
    Raises `Closed` with the error frame if the server refuses."""
    ws = await open_ws(url, proto, **({"ssl": ssl} if ssl is not None else {}))
    client = Client(ws, proto)
    handshake = frames.Handshake(token, room, since)
    await client.send(handshake.hello())
    try:
        async with CLOCK.timeout(WAIT):
            welcome = client.codec.decode(await ws.recv())
    except ConnectionClosed as exc:
        raise Closed(f"closed before welcome: {exc}") from exc
    if not isinstance(handshake.receive(welcome), frames.Welcome):
        with contextlib.suppress(Exception):
            await ws.close()
        raise Closed(f"refused: {welcome}")
    client.welcome = welcome
    client.user, client.role = welcome["user"], welcome["role"]
    if "state" in welcome:
        client.state, client.v = welcome["state"], welcome["v"]
    elif "patches" in welcome:
        assert since is not None and base is not None, "a welcome with patches needs a base"
        client.state, client.v = copy.deepcopy(base), since
        for p in welcome["patches"]:
            client._apply_patch(p)
        assert client.v == welcome["v"], (client.v, welcome["v"])
    client.start()
    return client


async def connect_admin(
    url: str, token: str = ADMIN_TOKEN, proto: str = "msgpack", ssl: Any = None
) -> Client:
    return await connect(url, token, None, proto, ssl=ssl)


async def hello_refused(
    url: str, hello: dict[str, Any] | bytes | str, proto: str = "msgpack"
) -> tuple[dict[str, Any] | None, int | None]:
    """Send a (bad) first frame; return the error frame (if any) and the
    close code."""
    ws = await open_ws(url, proto)
    codec = CODECS[PROTOS[proto]]
    await ws.send(hello if isinstance(hello, bytes | str) else codec.encode(hello))
    frame = None
    try:
        async with CLOCK.timeout(WAIT):
            frame = codec.decode(await ws.recv())
            await ws.recv()
    except ConnectionClosed:
        pass
    async with CLOCK.timeout(WAIT):
        await ws.wait_closed()
    return frame, ws.close_code


# --- a table -------------------------------------------------------------


@attrs.define
class Table:
    """A room with a GM, two players, an observer and three characters:
    c_p1 owned by p1, c_p2 by p2, c_npc by nobody."""

    url: str
    room: str
    tokens: dict[str, str]  # role key -> token (gm, p1, p2, obs)
    users: dict[str, str]  # role key -> user id
    chars: dict[str, str]  # c_p1, c_p2, c_npc -> character id
    ssl: Any = None  # the TLS context of a wss:// server

    async def connect(self, who: str, proto: str = "msgpack", **kw: Any) -> Client:
        kw.setdefault("ssl", self.ssl)
        return await connect(self.url, self.tokens[who], self.room, proto, **kw)


async def create_table(
    url: str,
    admin_token: str = ADMIN_TOKEN,
    room: str = "r1",
    name: str = "Table du jeudi",
    ssl: Any = None,
) -> Table:
    """The table, over the wire (`ssl`: a context for a wss:// server)."""
    admin = await connect_admin(url, admin_token, ssl=ssl)
    try:
        res = (await admin.ok("create_room", {"room": room, "name": name, "gm_name": "Maya"}))[
            "result"
        ]
    finally:
        await admin.close()
    tokens = {"gm": res["gm_token"]}
    users = {"gm": res["user"]}
    gm = await connect(url, tokens["gm"], room, ssl=ssl)
    try:
        for key, name_, role in (
            ("p1", "Paul", "player"),
            ("p2", "Zoe", "player"),
            ("obs", "Olga", "observer"),
        ):
            r = (await gm.ok("add_user", {"name": name_, "role": role}))["result"]
            tokens[key], users[key] = r["token"], r["user"]
        chars = {}
        for key, name_, owner in (
            ("c_p1", "Aline", users["p1"]),
            ("c_p2", "Bruno", users["p2"]),
            ("c_npc", "Gob", None),
        ):
            # Every character `full`, so that every viewer's state is the
            # same: tests of views build their own secrets.
            args = {**SHEET, "name": name_, "shown": "full"}
            if owner is not None:
                args["owner"] = owner
            chars[key] = (await gm.ok("add_character", args))["result"]["char"]
    finally:
        await gm.close()
    return Table(url, room, tokens, users, chars, ssl)


# --- a server in a child process -----------------------------------------


@attrs.define
class ChildServer:
    proc: subprocess.Popen[str]
    url: str
    output: list[str]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=WAIT)

    def terminate(self) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=WAIT)


def start_subprocess_server(
    data_dir: Path, *extra: str, env: dict[str, str] | None = None
) -> ChildServer:
    """`python -m sync_server serve --port 0` with the test admin token in
    its environment (and `env`'s variables); returns once it prints its
    listening line."""
    env = dict(os.environ, VTT_SYNC_ADMIN_TOKEN=ADMIN_TOKEN, PYTHONUNBUFFERED="1", **(env or {}))
    argv = ["serve", "--port", "0", "--data-dir", str(data_dir), "--log-level", "WARNING"]
    if TRANSPORT != "websockets":
        argv += ["--transport", TRANSPORT]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sync_server", *argv, *extra],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # the listening line, in text or in a JSON log line (the URL ends at a quote)
    m, output = read_until(proc, re.compile(r"vtt-sync listening on (wss?://[^\s\"]+)"), 200)
    if m:
        return ChildServer(proc, m.group(1), output)
    proc.kill()
    raise RuntimeError("server did not start:\n" + "".join(output))


def read_until(
    proc: subprocess.Popen[str], pattern: re.Pattern[str], max_lines: int
) -> tuple[re.Match[str] | None, list[str]]:
    """Read `proc`'s output line by line until one matches `pattern`, at
    most `max_lines` lines (bounded: a server says it listens within a few
    lines): (the match or None when it ended first or never said it, the
    lines read)."""
    assert proc.stdout is not None
    output: list[str] = []
    for _ in range(max_lines):
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        m = pattern.search(line)
        if m:
            return m, output
    return None, output


def msgpack_frame(frame: Any) -> bytes:
    return msgpack.packb(frame, use_bin_type=True)
