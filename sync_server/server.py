"""The server object: storage, rooms, admin, fan-out and the WebSocket
listener wired together, usable in-process:

    async with Server(Config(data_dir=tmp)) as srv:
        ...  # srv.port, srv.url, srv.admin_token

and by the CLI. Graceful close (SIGINT/SIGTERM in the CLI): stop accepting,
let every queued command finish and commit, flush what clients are owed,
close them with 1001, close the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection, serve

import rules
from sync_server import frames
from sync_server.admin import Admin
from sync_server.auth import RecentTokens, hash_token, load_admin_token
from sync_server.codec import SUBPROTOCOLS, select_subprotocol
from sync_server.config import Config
from sync_server.fanout import LocalFanOut
from sync_server.limits import (
    CLOSE_TIMEOUT_SECONDS,
    MAX_FRAME_BYTES,
    MAX_INCOMING_QUEUE,
    PING_INTERVAL_SECONDS,
    PING_TIMEOUT_SECONDS,
    SHUTDOWN_DRAIN_SECONDS,
    TOKEN_RETRY_SECONDS,
    WRITE_LIMIT_BYTES,
)
from sync_server.metrics import Metrics
from sync_server.rooms import Command, Rooms, RoomServices
from sync_server.sessions import Session
from sync_server.sqlite_store import SqliteStorage
from sync_server.storage import StorageError
from sync_server.web import Routes

log = logging.getLogger(__name__)

# websockets logs every frame at DEBUG, hello frames (tokens) included. Its
# logger for this server is pinned at INFO so that no logging setup, however
# verbose, can write a token to a log.
WS_LOG = logging.getLogger("sync_server.websockets")
WS_LOG.setLevel(logging.INFO)


class Server:
    """One vtt-sync server."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.metrics = Metrics()
        self.fanout = LocalFanOut()
        self.tokens = RecentTokens(TOKEN_RETRY_SECONDS)
        self.storage = SqliteStorage(
            config.data_dir, config.synchronous, on_group=self.metrics.commit_group.observe
        )
        self.dice: rules.Dice = config.dice if config.dice is not None else rules.ServerDice()
        self.rooms = Rooms(
            RoomServices(
                self.storage,
                self.fanout,
                self.metrics,
                self.dice,
                self.tokens,
                check_invariants=config.check_invariants,
                max_per_room=config.max_connections_per_room,
                max_per_user=config.max_connections_per_user,
            )
        )
        self.admin = Admin(self.storage, self.rooms, self.metrics, self.tokens)
        self.sessions: set[Session] = set()
        # Admin sessions holding one of the MAX_ADMIN_CONNECTIONS slots
        # (reserved at the check, before the welcome; see Session._open_admin).
        self.admin_slots: set[Session] = set()
        self.shutting_down = False
        self.admin_token = ""
        self.admin_token_generated = False
        self.admin_hash = b""
        self._ws: WsServer | None = None
        self._closed = False

    # --- lifecycle --------------------------------------------------------

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        data_dir = self.config.data_dir
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            token, generated = load_admin_token(data_dir, self.config.admin_token)
        except OSError as exc:
            raise StorageError(f"cannot use the data directory {data_dir}: {exc}") from exc
        self.admin_token, self.admin_token_generated = token, generated
        self.admin_hash = hash_token(token)
        await self.storage.open()
        await self.rooms.start()
        routes = Routes(
            self.config.web_dir, self.health, self.metrics.render, self.metrics.content_type
        )
        self._ws = await serve(
            self._handle,
            self.config.host,
            self.config.port,
            subprotocols=list(SUBPROTOCOLS),  # type: ignore[arg-type]
            select_subprotocol=select_subprotocol,
            process_request=routes.process_request,
            # Frames are small and encoded once for everyone; per-connection
            # deflate would cost memory and CPU per client and defeat that.
            compression=None,
            max_size=MAX_FRAME_BYTES,
            max_queue=MAX_INCOMING_QUEUE,
            write_limit=WRITE_LIMIT_BYTES,
            ping_interval=PING_INTERVAL_SECONDS,
            ping_timeout=PING_TIMEOUT_SECONDS,
            close_timeout=CLOSE_TIMEOUT_SECONDS,
            logger=WS_LOG,
        )
        log.info("listening on %s", self.url)

    @property
    def port(self) -> int:
        assert self._ws is not None
        return self._ws.sockets[0].getsockname()[1]

    @property
    def host(self) -> str:
        return self.config.host

    @property
    def url(self) -> str:
        host = self.config.host
        if ":" in host:
            host = f"[{host}]"
        return f"ws://{host}:{self.port}"

    @property
    def http_url(self) -> str:
        return "http" + self.url[2:]

    async def serve_until(self, stop: asyncio.Event) -> None:
        await stop.wait()
        await self.close()

    async def close(self) -> None:
        """Graceful shutdown (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.shutting_down = True
        if self._ws is not None:
            self._ws.server.close()  # stop accepting; open connections stay
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SHUTDOWN_DRAIN_SECONDS):
                await self.rooms.drain()
        for session in list(self.sessions):
            if session.outbox is not None:
                session.outbox.close_after(frames.CLOSE_SHUTDOWN, "server shutting down")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SHUTDOWN_DRAIN_SECONDS):
                await asyncio.gather(
                    *(s.outbox.flushed() for s in list(self.sessions) if s.outbox is not None),
                    return_exceptions=True,
                )
        if self._ws is not None:
            self._ws.close(code=frames.CLOSE_SHUTDOWN, reason="server shutting down")
            await self._ws.wait_closed()
        await self.rooms.stop()
        await self.storage.close()
        log.info("stopped")

    # --- connections ------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        await Session(self, ws).run()

    def connection_opened(self, session: Session) -> None:
        self.sessions.add(session)
        self.metrics.connections.set(len(self.sessions))

    def connection_closed(self, session: Session) -> None:
        self.sessions.discard(session)
        self.metrics.connections.set(len(self.sessions))

    @property
    def admin_sessions(self) -> int:
        return len(self.admin_slots)

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "rooms": len(self.rooms.known), "connections": len(self.sessions)}

    # --- in-process commands (CLI --demo, tests) -------------------------

    async def admin_command(
        self, op: str, args: dict[str, Any], cmd_id: str | None = None
    ) -> dict[str, Any]:
        """Run an admin command as the admin; returns the ack or error frame."""
        return await self.admin.execute(cmd_id or f"local-{secrets.token_hex(8)}", op, args)

    async def room_command(
        self,
        room: str,
        user: str,
        op: str,
        args: dict[str, Any],
        cmd_id: str | None = None,
    ) -> dict[str, Any]:
        """Run a room command as `user` (role from the room's state), through
        the room's queue like any client's; returns the ack or error frame."""
        host = await self.rooms.get(room)
        if host is None:
            return frames.error("not_found", f"no room {room!r}", cmd_id)
        role = host.state["users"].get(user, {}).get("role", "observer")
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def reply(frame: dict[str, Any]) -> None:
            if not fut.done():
                fut.set_result(frame)

        host.submit(
            Command(
                actor=rules.Actor(user=user, role=role),
                epoch=host.epochs.get(user, 0),
                cmd_id=cmd_id or f"local-{secrets.token_hex(8)}",
                op=op,
                args=args,
                reply=reply,
            )
        )
        return await fut
