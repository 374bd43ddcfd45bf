"""A small in-process stand-in of the sync server, for client tests of protocol
corners the real server does not produce on demand (a lost patch that forces
a `sync`, a dropped connection at a chosen moment, a final close code).

It speaks the protocol's frames (docs/protocol.md) with the real rules engine (`rules.apply`) over
both subprotocols, keeps every patch for `since`/`sync`, and deduplicates
command ids. No storage, no rate limits, no undo. Binds 127.0.0.1, port 0.
"""

from __future__ import annotations

import contextlib
import copy
import json
import mimetypes
import secrets
from http import HTTPStatus
from pathlib import Path
from typing import Any

import msgpack
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

import rules
from tests.helpers.table import SHEET

WEB = Path(__file__).resolve().parents[2] / "client_stub" / "web"


class FakeServer:
    def __init__(self, room_id: str = "r1", name: str = "Table du jeudi") -> None:
        room, gm = rules.new_room(room_id, name, "Maya")
        self.room_id = room_id
        self.room = room
        self.state = room.to_dict()
        self.version = 0
        self.history: list[dict[str, Any]] = []
        self.tokens: dict[str, tuple[str, str]] = {}  # token -> (user, role)
        self.acks: dict[tuple[str, str], dict[str, Any]] = {}
        self.conns: set[ServerConnection] = set()
        self.dice = rules.ServerDice()
        self.gm_token = self._token(gm, "gm")
        self.drop_next_patch = 0  # how many upcoming broadcasts to skip (forces a gap)
        self.received: list[dict[str, Any]] = []
        self._server: Any = None
        self.port = 0

    # --- setup --------------------------------------------------------------

    def _token(self, user: str, role: str) -> str:
        token = secrets.token_urlsafe(12)
        self.tokens[token] = (user, role)
        return token

    def add_user(self, name: str, role: str) -> tuple[str, str]:
        out = self._apply("add_user", {"name": name, "role": role}, self._gm())
        user = out.result["user"]
        return user, self._token(user, role)

    def add_character(self, name: str, **sheet: Any) -> str:
        out = self._apply("add_character", {**SHEET, **sheet, "name": name}, self._gm())
        return out.result["char"]

    def _gm(self) -> rules.Actor:
        user = next(u for u, r in self.tokens.values() if r == "gm")
        return rules.Actor(user, "gm")

    def _apply(self, op: str, args: dict[str, Any], actor: rules.Actor) -> Any:
        out = rules.apply(self.room, op, args, actor, self.dice)
        new = out.room.to_dict()
        ops = rules.diff(self.state, new)
        self.room, self.state = out.room, new
        self.version += 1
        patch = {"t": "patch", "v": self.version, "ops": ops, "events": out.events}
        self.history.append(patch)
        return out

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    async def start(self) -> FakeServer:
        self._server = await serve(
            self._handler,
            "127.0.0.1",
            self.port,
            subprotocols=["vtt-sync.msgpack.v1", "vtt-sync.json.v1"],  # type: ignore[list-item]
            process_request=self._http,
        )
        self.port = next(iter(self._server.sockets)).getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            for ws in list(self.conns):
                await ws.close(1001, "shutting down")
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def kill_connections(self, code: int = 1011) -> None:
        for ws in list(self.conns):
            with contextlib.suppress(Exception):
                await ws.close(code, "test")

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return None
        name = request.path.split("?")[0].lstrip("/") or "index.html"
        path = WEB / name
        if "/" in name or not path.is_file():
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if name.endswith(".js"):
            ctype = "text/javascript"
        body = path.read_bytes()
        headers = Headers({"Content-Type": ctype, "Content-Length": str(len(body))})
        return Response(200, "OK", headers, body)

    # --- protocol -----------------------------------------------------------

    async def _send(self, ws: ServerConnection, frame: dict[str, Any]) -> None:
        if ws.subprotocol == "vtt-sync.json.v1":
            await ws.send(json.dumps(frame))
        else:
            await ws.send(msgpack.packb(frame, use_bin_type=True))

    @staticmethod
    def _decode(raw: bytes | str) -> dict[str, Any]:
        return json.loads(raw) if isinstance(raw, str) else msgpack.unpackb(raw, raw=False)

    async def _handler(self, ws: ServerConnection) -> None:
        hello = self._decode(await ws.recv())
        self.received.append(hello)
        who = self.tokens.get(hello.get("token", ""))
        if hello.get("t") != "hello" or who is None or hello.get("room") != self.room_id:
            await self._send(ws, {"t": "error", "code": "unauthenticated", "message": "no"})
            await ws.close(4401, "unauthenticated")
            return
        user, role = who
        welcome: dict[str, Any] = {"t": "welcome", "room": self.room_id, "user": user}
        welcome.update(role=role, v=self.version)
        since = hello.get("since")
        if isinstance(since, int) and since <= self.version:
            welcome["patches"] = self.history[since:]
        else:
            welcome["state"] = copy.deepcopy(self.state)
        await self._send(ws, welcome)
        self.conns.add(ws)
        try:
            async for raw in ws:
                frame = self._decode(raw)
                self.received.append(frame)
                if frame.get("t") == "sync":
                    since = int(frame["since"])
                    await self._send(ws, {"t": "patches", "patches": self.history[since:]})
                elif frame.get("t") == "cmd":
                    await self._command(ws, user, role, frame)
        except ConnectionClosed:
            pass
        finally:
            self.conns.discard(ws)

    async def _command(self, ws: ServerConnection, user: str, role: str, frame: dict) -> None:
        cid = frame["id"]
        if (user, cid) in self.acks:
            await self._send(ws, {**self.acks[(user, cid)], "dup": True})
            return
        if frame.get("expect") is not None and frame["expect"] != self.version:
            err = {"t": "error", "id": cid, "code": "conflict", "message": "stale"}
            await self._send(ws, err)
            return
        try:
            out = self._apply(frame["op"], frame.get("args") or {}, rules.Actor(user, role))
        except rules.Refused as exc:
            err = {"t": "error", "id": cid, "code": exc.code, "message": str(exc)}
            await self._send(ws, err)
            return
        patch = {**self.history[-1], "by": user, "id": cid}
        self.history[-1] = patch
        ack = {"t": "ack", "id": cid, "v": self.version, "result": out.result}
        self.acks[(user, cid)] = ack
        if self.drop_next_patch:
            self.drop_next_patch -= 1
        else:
            for conn in list(self.conns):
                with contextlib.suppress(Exception):
                    await self._send(conn, patch)
        await self._send(ws, ack)
