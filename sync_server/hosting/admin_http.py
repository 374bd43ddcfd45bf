"""Admin over plain HTTP: `GET /admin/export?room=ROOM` (the room file).

Why HTTP for the export when the other admin commands are WebSocket ops: a
room file can be tens of megabytes, a frame from the server should stay
under a megabyte (docs/protocol.md), and a GET answer has no size bound and
passes every reverse proxy. (The import goes the other way, as
`import_room` parts: websockets reads no request bodies, so a POST cannot
carry a file here.)

The admin token travels in a header, `Authorization: Bearer TOKEN`, never
in the URL (URLs end up in proxies' access logs). A wrong or missing token
is 401 and counts against the address like a refused hello (the same
per-address limit: 429 past it).
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Awaitable, Callable

from websockets.http11 import Request, Response

from rules.catalog import valid_room_id
from sync_server.core.auth import hash_token, plausible_token, same_hash
from sync_server.core.ratelimit import Buckets
from sync_server.hosting.clock import Clock
from sync_server.hosting.web import response
from sync_server.storage import RoomDump, transfer

log = logging.getLogger(__name__)

EXPORT_PATH = "/admin/export"
_TRUE = ("1", "true", "yes")


def _json_error(status: int, message: str, extra: list[tuple[str, str]] | None = None) -> Response:
    body = (json.dumps({"error": message}) + "\n").encode()
    return response(status, body, "application/json", extra)


class AdminHttp:
    """The admin's HTTP endpoints of one server."""

    def __init__(
        self,
        admin_hash: bytes,
        export_room: Callable[[str], Awaitable[RoomDump | None]],
        failures: Buckets | None,
        clock: Clock,
    ) -> None:
        self.admin_hash = admin_hash
        self.export_room = export_room
        self.failures = failures
        self.clock = clock

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
        if path != EXPORT_PATH:
            return _json_error(404, f"no admin endpoint {path}")
        refused = self._authorized(request, peer)
        if refused is not None:
            return refused
        params = urllib.parse.parse_qs(query)
        room = (params.get("room") or [""])[0]
        if not valid_room_id(room):
            return _json_error(400, "give ?room=ROOM (a room id)")
        with_hashes = (params.get("token_hashes") or [""])[0].lower() in _TRUE
        dump = await self.export_room(room)
        if dump is None:
            return _json_error(404, f"no room {room!r}")
        body = transfer.dumps(transfer.to_document(dump, with_hashes)).encode()
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
