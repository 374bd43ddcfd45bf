"""Admin over plain HTTP: `GET /admin/export?room=ROOM` (the room file),
`GET /admin/rooms` (every room: name, version, last activity, who is
connected) and `GET /admin/metrics` (Prometheus text with the counts by op,
which the public `/metrics` leaves out: they would tell what each version
was), all read-only; what changes rooms is WebSocket admin ops.

Why HTTP for the export when the other admin commands are WebSocket ops: a
room file can be tens of megabytes, a frame from the server should stay
under a megabyte (docs/protocol.md), and a GET answer has no size bound and
passes every reverse proxy. (The import goes the other way, as
`import_room` parts: websockets reads no request bodies, so a POST cannot
carry a file here.)

An export is encoded on a worker thread, in slices (`export_text`), so that
the event loop keeps serving every room meanwhile.

The admin token travels in a header, `Authorization: Bearer TOKEN`, never
in the URL (URLs end up in proxies' access logs). A wrong or missing token
is 401 and counts against the address like a refused hello (the same
per-address limit: 429 past it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.http11 import Request, Response

from rules.catalog import valid_room_id
from sync_server.clock import Clock
from sync_server.core.auth import hash_token, plausible_token, same_hash
from sync_server.core.limits import EXPORT_CHUNK_VERSIONS
from sync_server.core.ratelimit import Buckets
from sync_server.hosting.share import OFF_LOOP_SWITCH
from sync_server.hosting.web import response
from sync_server.storage import RoomDump, transfer

log = logging.getLogger(__name__)

EXPORT_PATH = "/admin/export"
ROOMS_PATH = "/admin/rooms"
METRICS_PATH = "/admin/metrics"
_TRUE = ("1", "true", "yes")


def _json_error(status: int, message: str, extra: list[tuple[str, str]] | None = None) -> Response:
    body = (json.dumps({"error": message}) + "\n").encode()
    return response(status, body, "application/json", extra)


def export_text(dump: RoomDump, with_hashes: bool, chunk: int = EXPORT_CHUNK_VERSIONS) -> bytes:
    """The room file of `dump`, exactly `transfer.dumps(transfer.to_document(...))`,
    for a worker thread: the versions (the bulk) are encoded `chunk` at a
    time, so that no single call of the C encoder holds the interpreter
    (and the event loop with it) for the whole file."""
    doc = transfer.to_document(dump, with_hashes)
    versions = doc["versions"]
    marker = f"versions-{secrets.token_hex(16)}"  # no state can hold it
    doc["versions"] = marker
    slices = (transfer.dumps(versions[i : i + chunk])[1:-1] for i in range(0, len(versions), chunk))
    listed = "[" + ",".join(slices) + "]"
    return transfer.dumps(doc).replace(json.dumps(marker), listed, 1).encode()


class AdminHttp:
    """The admin's HTTP endpoints of one server."""

    def __init__(
        self,
        admin_hash: bytes,
        export_room: Callable[[str], Awaitable[RoomDump | None]],
        failures: Buckets | None,
        clock: Clock,
        room_list: Callable[[], Awaitable[list[dict[str, Any]]]] | None = None,
        metrics: Callable[[], bytes] | None = None,
        metrics_type: str = "text/plain",
    ) -> None:
        self.admin_hash = admin_hash
        self.export_room = export_room
        self.failures = failures
        self.clock = clock
        self.room_list = room_list
        self.metrics = metrics
        self.metrics_type = metrics_type

    def _authorized(self, request: Request, peer: str) -> Response | None:
        """None if the request carries the admin token, else the refusal."""
        now = self.clock.monotonic()
        if self.failures is not None and not self.failures.get(peer, now).allow(now, 0.0):
            log.info("admin HTTP request from %s refused: too many failed attempts", peer)
            return _json_error(429, "too many failed attempts; wait and retry")
        scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
        token = token.strip()
        if (
            scheme.lower() == "bearer"
            and plausible_token(token)
            and same_hash(hash_token(token), self.admin_hash)
        ):
            return None
        log.info("admin HTTP request from %s refused: bad or missing admin token", peer)
        if self.failures is not None:
            self.failures.get(peer, now).charge(now, 1.0)
        return _json_error(
            401,
            "the admin token is needed, as 'Authorization: Bearer TOKEN'",
            [("WWW-Authenticate", 'Bearer realm="vtt-sync admin"')],
        )

    async def handle(self, path: str, query: str, request: Request, peer: str) -> Response:
        if (
            path not in (EXPORT_PATH, ROOMS_PATH, METRICS_PATH)
            or (path == ROOMS_PATH and not self.room_list)
            or (path == METRICS_PATH and self.metrics is None)
        ):
            return _json_error(404, f"no admin endpoint {path}")
        refused = self._authorized(request, peer)
        if refused is not None:
            return refused
        if path == ROOMS_PATH:
            assert self.room_list is not None
            body = (json.dumps({"rooms": await self.room_list()}) + "\n").encode()
            return response(200, body, "application/json")
        if path == METRICS_PATH:
            assert self.metrics is not None
            return response(200, self.metrics(), self.metrics_type)
        params = urllib.parse.parse_qs(query)
        room = (params.get("room") or [""])[0]
        if not valid_room_id(room):
            return _json_error(400, "give ?room=ROOM (a room id)")
        with_hashes = (params.get("token_hashes") or [""])[0].lower() in _TRUE
        # Read and encoded in threads (storage's read apart from its writer,
        # then export_text's slices), the switch interval shortened
        # meanwhile: the loop gets the interpreter back within a millisecond.
        with OFF_LOOP_SWITCH:
            dump = await self.export_room(room)
            if dump is None:
                return _json_error(404, f"no room {room!r}")
            body = await asyncio.to_thread(export_text, dump, with_hashes)
        log.info(
            "room %s exported to %s at v%d (%d bytes%s)",
            room,
            peer,
            dump.head,
            len(body),
            ", with token hashes" if with_hashes else "",
            extra={"event": "room_exported", "room": room, "v": dump.head, "peer": peer},
        )
        disposition = f'attachment; filename="{room}.json"'
        return response(200, body, "application/json", [("Content-Disposition", disposition)])
