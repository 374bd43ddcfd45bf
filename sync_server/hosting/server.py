"""The composition root: one place builds a server out of its parts.

    async with Server(Config(data_dir=tmp)) as srv:
        ...  # srv.port, srv.url, srv.admin_token

`Server(config, storage=..., bus=..., clock=...)` takes any `Storage`
(SQLite in the data directory by default), any `RoomBus` (in-process by
default) and any `Clock`; everything else is wired here and handed down as
narrow dependencies (`RoomServices` to rooms, `SessionDeps` to sessions),
so no part reaches back into the server.

Graceful close (SIGINT/SIGTERM in the CLI): stop accepting, let every queued
command finish and commit, close clients with 1001, close the storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import socket
import sys
from typing import Any, cast

from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection, serve

import rules
from rules.state import UserDict, role_of, user_of
from sync_server.clock import Clock, SystemClock
from sync_server.cluster.leases import LEASE_SECONDS, LeaseKeeper, Leases, SingleNodeLeases
from sync_server.cluster.sqlite_leases import SqliteLeases
from sync_server.core.auth import RecentTokens, hash_token, load_admin_token
from sync_server.core.inputs import CommandIn
from sync_server.core.limits import MAX_FRAME_BYTES
from sync_server.core.ratelimit import Buckets
from sync_server.hosting.admin import Admin
from sync_server.hosting.admin_http import AdminHttp
from sync_server.hosting.api import Api
from sync_server.hosting.bus import LocalBus, RoomBus
from sync_server.hosting.config import Config
from sync_server.hosting.http1 import door_factory
from sync_server.hosting.outbox import OutboxBudget
from sync_server.hosting.registry import Registry
from sync_server.hosting.room_host import RoomHost, RoomServices
from sync_server.hosting.rooms import Rooms
from sync_server.hosting.sessions import Session, SessionDeps
from sync_server.hosting.share import LoopShare
from sync_server.hosting.tls import ServerTls, TlsError
from sync_server.hosting.web import Routes
from sync_server.hosting.work import Command
from sync_server.observe.activity import Activity
from sync_server.observe.logs import websockets_logger
from sync_server.observe.metrics import Metrics
from sync_server.storage import Storage, StorageError
from sync_server.storage.datadir import DataDirLock
from sync_server.storage.sqlite import SqliteStorage
from sync_server.version import __version__
from sync_server.wire import protocol
from sync_server.wire.codec import select_subprotocol
from sync_server.wire.links import links_document, page_base, ws_url

log = logging.getLogger(__name__)


def leases_for(
    storage: Any,
    *,
    node_id: str = "local",
    public_url: str = "",
    lease_seconds: float = LEASE_SECONDS,
    clock: Clock | None = None,
) -> Leases:
    """The leases that fence `storage`'s commits: the storage itself if it
    implements them, those attached to it already (`storage.leases`), new
    ones on a cluster backend's database (PostgreSQL), else single-node
    ones: the server calls the same methods either way. Here, where the
    server is assembled, and not in cluster/: the interface knows no backend
    (leases.py), and each backend's leases know only their own storage."""
    if isinstance(storage, Leases):
        return storage
    attached = getattr(storage, "leases", None)
    if isinstance(attached, Leases):
        return attached
    # A PgStorage exists only if its module (and asyncpg) was imported.
    postgres = sys.modules.get("sync_server.storage.postgres")
    if postgres is not None and isinstance(storage, postgres.PgStorage):
        from sync_server.cluster.pg_leases import PgLeases

        return PgLeases(
            storage,
            node_id=node_id,
            public_url=public_url,
            lease_seconds=lease_seconds,
            clock=clock,
        )
    return SingleNodeLeases()


# websockets logs every frame at DEBUG, hello frames (tokens) included: the
# logger it gets (logs.websockets_logger) never produces DEBUG, whatever the
# logging setup, and turns its per-request INFO lines into DEBUG ones.

SERVER_HEADER = "vtt-sync"  # picows_transport.py says the same


# Addresses that friends on other machines cannot use in a link.
LOOPBACK_OR_ANY = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""})


def api_document(name: str) -> bytes | None:
    """/api/v1/openapi.json and /api/v1/asyncapi.json, made once."""
    from sync_server.hosting import apidoc  # built on first request only

    return apidoc.document_bytes(name)


def _user(host: RoomHost | None, uid: str) -> UserDict | None:
    """A loaded room's entry for a user (None: room not loaded, or no such user)."""
    return None if host is None else user_of(host.state, uid)


class Server:
    """One vtt-sync server."""

    def __init__(
        self,
        config: Config,
        *,
        storage: Storage | None = None,
        bus: RoomBus | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.limits = config.limits
        self.clock = clock or SystemClock()
        self.metrics = Metrics()
        self.bus = bus or LocalBus()
        self.registry = Registry()
        self.tokens = RecentTokens(
            self.limits.token_retry_seconds, self.clock.monotonic, self.limits.max_recent_tokens
        )
        # What all clients may hold unsent together (outbox.py).
        self.outbox_budget = OutboxBudget(
            self.limits.outbox_total_max_bytes, self.limits.outbox_room_max_bytes
        )
        # Stable across restarts on this host and port (a restarted node
        # gets its rooms back at once); a free port (0) gets the pid.
        self.node_id = config.node_id or f"{socket.gethostname()}:{config.port or os.getpid()}"
        self.storage: Storage = storage or self._default_storage()
        # Who serves which room: the database's leases in cluster mode, or
        # "every room is mine" alone on SQLite (cluster/leases.py). The URL
        # needs the port bound: set at start when not configured.
        self.leases: Leases = leases_for(
            self.storage,
            node_id=self.node_id,
            public_url=self._node_url(),
            lease_seconds=config.lease_seconds,
            clock=self.clock,
        )
        if config.worker_leases and isinstance(self.storage, SqliteStorage):
            # A worker on a shared SQLite file: leases in that file.
            self.leases = SqliteLeases(
                self.storage,
                node_id=self.node_id,
                public_url=self._node_url(),
                lease_seconds=config.lease_seconds,
                clock=self.clock,
            )
        self.keeper = LeaseKeeper(self.leases, self._lost_rooms, self.clock)
        self.dice: rules.Dice = config.dice if config.dice is not None else rules.ServerDice()
        self.activity = Activity(config.log_summary_seconds)
        self.rooms = Rooms(
            RoomServices(
                self.storage,
                self.bus,
                self.registry,
                self.metrics,
                self.dice,
                self.tokens,
                limits=self.limits,
                clock=self.clock,
                check_invariants=config.check_invariants,
                affordances=config.affordances,
                leases=self.leases,
                activity=self.activity,
                share=LoopShare(self.limits.room_share_window),
            )
        )
        self.admin = Admin(
            self.storage,
            self.rooms,
            self.metrics,
            self.tokens,
            self.clock,
            limits=self.limits,
            room_command=self.room_command,
        )
        self.sessions: set[Session] = set()
        # Admin sessions holding one of the admin slots (reserved at the
        # check, before the welcome; see Session._open_admin).
        self.admin_slots: set[Any] = set()
        self.shutting_down = False
        # Draining (SIGTERM with drain_seconds): still serving, but /healthz
        # answers 503 so that a load balancer sends new clients elsewhere.
        self.draining = False
        self.tls: ServerTls | None = None
        if config.tls_cert is not None and config.tls_key is not None:
            self.tls = ServerTls(config.tls_cert, config.tls_key)
        self.admin_token = ""
        self.admin_token_generated = False
        self.admin_hash = b""
        self._deps: SessionDeps | None = None
        self._lock = DataDirLock(config.data_dir)
        self._ws: WsServer | None = None
        self.api: Api | None = None
        # Workers mode: the socket every worker accepts on (config.listen_fd).
        self._shared_ws: WsServer | None = None
        self._closed = False

    def _default_storage(self) -> Storage:
        """SQLite in the data directory, or PostgreSQL in cluster mode."""
        config = self.config
        if config.database is None:
            return SqliteStorage(
                config.data_dir,
                config.synchronous,
                on_group=self.metrics.commit_group.observe,
                snapshots_kept=self.limits.snapshots_kept,
                clock=self.clock,
            )
        from sync_server.storage.postgres import PgStorage  # asyncpg only in cluster mode

        return PgStorage(
            config.database,
            application_name=f"vtt-sync {self.node_id}",
            snapshots_kept=self.limits.snapshots_kept,
            on_group=self.metrics.commit_group.observe,
            clock=self.clock,
        )

    @property
    def cluster(self) -> bool:
        return self.rooms.cluster

    def _lost_rooms(self, rooms: set[str]) -> None:
        self.rooms.lost(rooms)

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
            if self.config.lock_fd is not None:
                self._lock.inherit(self.config.lock_fd)
            else:
                self._lock.acquire()
        except OSError as exc:
            raise StorageError(f"cannot use the data directory {data_dir}: {exc}") from exc
        try:
            token, generated = load_admin_token(data_dir, self.config.admin_token)
        except OSError as exc:
            self._lock.release()
            raise StorageError(f"cannot use the data directory {data_dir}: {exc}") from exc
        except BaseException:
            self._lock.release()
            raise
        self.admin_token, self.admin_token_generated = token, generated
        self.admin_hash = hash_token(token)
        try:
            await self.storage.open()
        except BaseException:
            self._lock.release()
            raise
        try:
            if self.leases is not self.storage:  # a storage may be its own leases
                await self.leases.open()
        except BaseException:
            await self.storage.close()
            self._lock.release()
            raise
        await self.rooms.start()
        self._deps = SessionDeps(
            limits=self.limits,
            buckets=None if self.config.rate is None else Buckets(self.config.rate),
            gm_buckets=None if self.config.gm_rate is None else Buckets(self.config.gm_rate),
            hello_failures=(
                None
                if self.config.hello_failure_rate is None
                else Buckets(self.config.hello_failure_rate)
            ),
            admin_hash=self.admin_hash,
            find_token=self.storage.find_token,
            rooms=self.rooms,
            admin=self.admin.execute,
            registry=self.registry,
            bus=self.bus,
            metrics=self.metrics,
            clock=self.clock,
            shutting_down=lambda: self.shutting_down,
            opened=self._opened,
            closed=self._closed_session,
            admin_slots=self.admin_slots,
            fast_fanout=self.config.fast_fanout,
            activity=self.activity,
            trusted_proxies=self.config.trusted_proxies,
            outbox_budget=self.outbox_budget,
        )
        routes = Routes(
            self.config.web,
            self.health,
            self.metrics.render,
            self.metrics.content_type,
            allowed_origins=self.config.allowed_origins,
            links=self.links,
            trusted_proxies=self.config.trusted_proxies,
            admin=AdminHttp(
                self.admin_hash,
                self.storage.export_room,
                self._deps.hello_failures,
                self.clock,
                room_list=self.room_list,
                metrics=self.metrics.render_admin,
                metrics_type=self.metrics.content_type,
            ).handle,
        )
        # The HTTP API (/api/...): the second door to the same rooms, on the
        # same socket (http1.py: a Door hands every other request to websockets).
        self.api = Api(
            self._deps, allowed_origins=self.config.allowed_origins, documents=api_document
        )
        options: dict[str, Any] = dict(
            subprotocols=list(protocol.SUBPROTOCOLS),
            select_subprotocol=cast(Any, select_subprotocol),  # codec stays websockets-free
            process_request=routes.process_request,
            # Frames are small and encoded once for everyone; per-connection
            # deflate would cost memory and CPU per client and defeat that.
            compression=None,
            max_size=MAX_FRAME_BYTES,
            max_queue=self.limits.max_incoming_queue,
            write_limit=self.limits.write_limit_bytes,
            ping_interval=self.limits.ping_interval,
            ping_timeout=self.limits.ping_timeout,
            open_timeout=self.limits.handshake_timeout,
            close_timeout=self.limits.close_timeout,
            logger=websockets_logger(),
            # Our name only: no library or Python versions for a scanner.
            server_header=SERVER_HEADER,
            ssl=None if self.tls is None else self.tls.context,
            create_connection=door_factory(self.api.connection, clock=self.clock),
        )
        if self.config.transport == "picows":
            await self._start_picows(routes)
        else:
            self._ws = await serve(self._handle, self.config.host, self.config.port, **options)
            if self.config.listen_fd is not None:
                shared = socket.socket(fileno=self.config.listen_fd)
                self._shared_ws = await serve(self._handle, sock=shared, **options)
        if self.cluster:
            if not self.leases.public_url:
                host = self.config.host
                if host in ("0.0.0.0", "::", ""):
                    await self.close()
                    raise StorageError(
                        "cluster mode needs --public-url: the address clients reach this node at "
                        f"(it listens on every interface, {host})"
                    )
                self.leases.public_url = self.url + "/"
            self.keeper.start()
            log.info(
                "cluster node %s, public URL %s, leases of %g s",
                self.leases.node_id,
                self.leases.public_url,
                self.leases.lease_seconds,
            )
        log.info("listening on %s", self.url)

    async def _start_picows(self, routes: Routes) -> None:
        """The fast transport (picows_transport.py): the same sessions, the
        GET routes, no HTTP API."""
        from sync_server.hosting.picows_transport import PicowsServer

        start = functools.partial(
            PicowsServer.start,
            self._handle,
            process_request=routes.process_request,
            limits=self.limits,
            ssl=None if self.tls is None else self.tls.context,
            clock=self.clock,
        )
        self._ws = cast(Any, await start(self.config.host, self.config.port))
        if self.config.listen_fd is not None:
            shared = socket.socket(fileno=self.config.listen_fd)
            self._shared_ws = cast(Any, await start(None, None, sock=shared))

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
        return f"{'wss' if self.tls else 'ws'}://{host}:{self.port}"

    @property
    def page_url(self) -> str:
        """The tracker page's address for links (ends with '/'): the public
        URL's when set, else the address bound (https with TLS; a wildcard
        address as 127.0.0.1, which only this machine reaches)."""
        return page_base(self.config.public_url or self._bound_url())

    @property
    def links_local(self) -> bool:
        """Whether the links name an address only this machine reaches: no
        public URL, and a loopback or wildcard address bound."""
        return self.config.public_url is None and self.config.host in LOOPBACK_OR_ANY

    def _node_url(self) -> str:
        """This node's address in cluster redirects: its public URL as a
        WebSocket address ("" until start fills in the address bound)."""
        public = self.config.public_url
        return "" if public is None else ws_url(public)

    def _bound_url(self) -> str:
        host = self.config.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{'wss' if self.tls else 'ws'}://{host}:{self.port}/"

    def links(self) -> dict[str, Any]:
        """`GET /links.json`: where links should point. `page` is null when
        no public URL is set (the page then uses its own address)."""
        return links_document(self.config.public_url)

    @property
    def http_url(self) -> str:
        return "http" + self.url[2:]

    def reload_tls(self) -> bool:
        """Load the TLS certificate and key files again (SIGHUP): new
        connections get the new certificate, open ones keep theirs. A pair
        that cannot be used is logged and changes nothing."""
        if self.tls is None:
            log.warning("TLS reload asked, but the server has no TLS certificate")
            return False
        try:
            self.tls.reload()
        except TlsError as exc:
            log.error("TLS certificate not reloaded, still serving the previous one: %s", exc)
            return False
        log.info("TLS certificate reloaded from %s", self.tls.cert, extra={"event": "tls_reload"})
        return True

    async def serve_until(self, stop: asyncio.Event) -> None:
        await stop.wait()
        await self.close()

    async def close(self) -> None:
        """Graceful shutdown (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.shutting_down = True
        drain = self.limits.shutdown_drain_seconds
        if self._ws is not None:
            self._ws.server.close()  # stop accepting; open connections stay
        if self._shared_ws is not None:
            self._shared_ws.server.close()  # the other workers go on accepting
        with contextlib.suppress(TimeoutError):
            async with self.clock.timeout(drain):
                await self.rooms.drain()
        await self.keeper.stop()
        code, reason = protocol.CLOSE_SHUTDOWN, "server shutting down"
        if self.cluster:
            # Another node serves the rooms from now on: give them up first,
            # then tell the clients to reconnect (they are redirected there).
            await self.rooms.release_all()
            code, reason = protocol.CLOSE_SERVICE_RESTART, "node draining; reconnect"
        for session in list(self.sessions):
            if session.outbox is not None:
                session.outbox.close_after(code, reason)
        if self.api is not None:
            await self.api.close(code, reason)
        with contextlib.suppress(TimeoutError):
            async with self.clock.timeout(drain):
                await asyncio.gather(
                    *(s.outbox.flushed() for s in list(self.sessions) if s.outbox is not None),
                    return_exceptions=True,
                )
        for ws in (self._ws, self._shared_ws):
            if ws is not None:
                ws.close(code=code, reason=reason)
                await ws.wait_closed()
        await self.rooms.stop()
        if self.leases is not self.storage:
            await self.leases.close()
        await self.storage.close()
        self._lock.release()
        self.activity.close()
        log.info("stopped")

    # --- connections ------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        assert self._deps is not None
        await Session(self._deps, ws).run()

    def _opened(self, session: Session) -> None:
        self.sessions.add(session)
        self.metrics.connections.set(len(self.sessions))

    def _closed_session(self, session: Session) -> None:
        self.sessions.discard(session)
        self.metrics.connections.set(len(self.sessions))

    @property
    def admin_sessions(self) -> int:
        return len(self.admin_slots)

    def health(self) -> dict[str, Any]:
        """/healthz: "ok" (200) while serving; "draining" (503) from a
        SIGTERM on, so that a load balancer stops sending clients here."""
        status = "draining" if self.draining or self.shutting_down else "ok"
        return {
            "status": status,
            "version": __version__,
            "rooms": len(self.rooms.known),
            "connections": len(self.sessions),
        }

    # --- in-process commands (CLI --demo, tests) -------------------------

    async def room_list(self) -> list[dict[str, Any]]:
        """The admin's list of rooms (`GET /admin/rooms`, `vtt-sync admin
        rooms`): each room's id, name, version, last activity (the wall
        time its head was written; null at version 0), creation time, and
        who is connected to this server (user, name, role, sessions). A
        room loaded here shows its live name; the others are not loaded."""
        out = []
        for summary in await self.storage.room_summaries():
            host = self.rooms.hosts.get(summary.room)
            name = host.state["name"] if host is not None else summary.name
            connected = [
                {
                    "user": uid,
                    "name": None if (u := _user(host, uid)) is None else u["name"],
                    "role": None if u is None else u["role"],
                    "sessions": n,
                }
                for uid, n in sorted(self.registry.users(summary.room).items())
            ]
            out.append(
                {
                    "room": summary.room,
                    "name": name,
                    "v": summary.v if host is None else max(summary.v, host.v),
                    "last_activity": summary.last_activity,
                    "created": summary.created,
                    "connected": connected,
                }
            )
        return out

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
            return protocol.error("not_found", f"no room {room!r}", cmd_id)
        role = role_of(host.state, user) or "observer"
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def reply(frame: dict[str, Any]) -> None:
            if not fut.done():
                fut.set_result(frame)

        command = CommandIn(
            actor=rules.Actor(user=user, role=role),
            epoch=host.epochs.get(user, 0),
            cmd_id=cmd_id or f"local-{secrets.token_hex(8)}",
            op=op,
            args=args,
        )
        host.submit(Command(command, reply, None, self.clock.monotonic()))
        return await fut
