"""Plain HTTP on the WebSocket port: /healthz, /metrics, the browser page,
the admin export.

websockets calls `process_request` for every incoming request, whatever
its method (websockets 17 parses any method and refuses only requests with
a body); a GET that asks for a WebSocket upgrade goes on to the handshake
(return None), any other request is answered here:

- GET /links.json: where the links the page shows should point (the
  public URL, `--public-url`, or null: the page's own address);
- GET and HEAD (HEAD: the same status and headers, no body), so that uptime
  checks that send HEAD see the server up;
- OPTIONS: 204 with `Allow` (and the CORS answer for a configured origin);
- any other method: 405 with `Allow`. (A request that carries a body, a POST
  with data say, is closed by websockets before it reaches us: it reads no
  request bodies. The HTTP API under /api/ never comes here: the door in
  http1.py hands those requests to h11, which reads them.)

Static files are whitelisted: only regular files found directly in the
web directory, by exact name, so no path can climb out of it. They carry
`Access-Control-Allow-Origin` for the configured origins (`--allow-origin`,
the same list the WebSocket Origin check uses), so that a page elsewhere (a
Foundry world) can import the JS module.

Behind a reverse proxy under a sub-path (https://host/vtt/), the proxy
strips the prefix: the server sees /, /app.js..., and the page builds its
WebSocket URL from its own location, path included.
"""

from __future__ import annotations

import email.utils
import http
import importlib.resources
import ipaddress
import json
import logging
import mimetypes
import re
from collections.abc import Awaitable, Callable
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

log = logging.getLogger("sync_server.http")

# Methods answered here; everything else gets 405 with this list.
ALLOWED_METHODS = "GET, HEAD, OPTIONS"

# How long a browser may cache a CORS preflight answer.
CORS_MAX_AGE_SECONDS = 600

PLACEHOLDER_PAGE = b"""<!doctype html>
<html lang="en"><meta charset="utf-8"><title>vtt-sync</title>
<body><h1>vtt-sync</h1>
<p>The server is running. The tracker page (client_stub/web/index.html) is not installed.</p>
</body></html>
"""

# The pages' Content-Security-Policy: their scripts, styles and data come
# from this server only, none inline (the pages have no inline script or
# style, and build the DOM without innerHTML), so a string that slipped into
# the DOM as markup could still run nothing. WebSockets may go to another
# host: the page follows a cluster's redirect and a link's `ws=`. The icon
# is a `data:` URL. No plugin, no <base>, forms post nowhere else.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; form-action 'self'"
)
# The admin page takes the admin token: no other site may frame it (a
# clickjacking page overlaid on its form). X-Frame-Options for browsers
# that predate frame-ancestors.
ADMIN_PAGE = "admin.html"
ADMIN_CSP = PAGE_CSP + "; frame-ancestors 'none'"


def page_headers(name: str) -> list[tuple[str, str]]:
    """The headers a page (an HTML file) gets beyond every response's."""
    if name == ADMIN_PAGE:
        return [("Content-Security-Policy", ADMIN_CSP), ("X-Frame-Options", "DENY")]
    if name.endswith(".html"):
        return [("Content-Security-Policy", PAGE_CSP)]
    return []


# A file name the page may ask for: no slashes, no leading dot.
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")

# Files of the web package that are not the page's (its Python marker).
_NOT_SERVED = (".py", ".pyc")


def web_files(web: str | Path) -> Traversable:
    """The page's files: a package's data (the installed default) or a folder."""
    if isinstance(web, Path):
        return web
    return importlib.resources.files(web)


_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
}


def response(
    status: int, body: bytes, content_type: str, extra: list[tuple[str, str]] | None = None
) -> Response:
    st = http.HTTPStatus(status)
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            *(extra or []),
        ]
    )
    return Response(st.value, st.phrase, headers, body)


def _text(status: int, text: str, extra: list[tuple[str, str]] | None = None) -> Response:
    return response(status, text.encode(), "text/plain; charset=utf-8", extra)


def _empty(status: int, extra: list[tuple[str, str]]) -> Response:
    st = http.HTTPStatus(status)
    headers = Headers(
        [("Date", email.utils.formatdate(usegmt=True)), ("Connection", "close"), *extra]
    )
    return Response(st.value, st.phrase, headers, b"")


def without_body(r: Response) -> Response:
    """HEAD: the GET's status and headers (Content-Length included), no body."""
    return Response(r.status_code, r.reason_phrase, r.headers, b"")


def client_address(remote: str, forwarded_for: str | None, trusted: frozenset[str]) -> str:
    """The client's address: the peer's, unless the peer is a trusted reverse
    proxy; then the nearest address in X-Forwarded-For that is not one (the
    proxy appends the address it saw; earlier entries are the client's word
    and could be forged)."""
    if not trusted or remote not in trusted or not forwarded_for:
        return remote
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return remote  # garbage: believe the socket, not the header
        if hop not in trusted:
            return hop
    return remote


def peer_of(connection: Any, request: Request | None, trusted: frozenset[str]) -> str:
    address = getattr(connection, "remote_address", None)
    remote = str(address[0]) if address else "?"
    forwarded = request.headers.get("X-Forwarded-For") if request is not None else None
    return client_address(remote, forwarded, trusted)


def _is_upgrade(request: Request) -> bool:
    upgrade = request.headers.get("Upgrade", "")
    return "websocket" in upgrade.lower()


def origin_allowed(origin: str | None, host: str | None, allowed: frozenset[str]) -> bool:
    """May a WebSocket upgrade from a page at `origin` go on? Browsers send
    the page's origin; a hostile page in the operator's browser must not
    drive a server it can reach (cross-site WebSocket hijacking). Allowed:
    no Origin (scripts, the Python client, VTT servers), the server's own
    origin (same host and port as the request's Host), and the configured
    list (e.g. a Foundry world's origin)."""
    if origin is None:
        return True
    origin = origin.strip().rstrip("/")
    if origin in allowed or "*" in allowed:
        return True
    scheme, sep, rest = origin.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or host is None:
        return False
    return rest.lower() == host.strip().lower()


class Routes:
    """The HTTP side of one server."""

    def __init__(
        self,
        web: str | Path,
        health: Callable[[], dict[str, Any]],
        metrics: Callable[[], bytes],
        metrics_type: str,
        allowed_origins: frozenset[str] = frozenset(),
        trusted_proxies: frozenset[str] = frozenset(),
        admin: Callable[[str, str, Request, str], Awaitable[Response]] | None = None,
        links: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.web_dir = web_files(web)
        self.allowed_origins = frozenset(o.rstrip("/") for o in allowed_origins)
        self.trusted_proxies = trusted_proxies
        self.health = health
        self.metrics = metrics
        self.metrics_type = metrics_type
        self.admin = admin
        self.links = links

    def process_request(
        self, connection: Any, request: Request
    ) -> Response | Awaitable[Response] | None:
        """websockets' process_request hook (connection, request)."""
        method = request.method
        if _is_upgrade(request) and method == "GET":
            if origin_allowed(
                request.headers.get("Origin"), request.headers.get("Host"), self.allowed_origins
            ):
                return None
            return self._done(connection, request, _text(403, ORIGIN_REFUSED))
        path, _, query = request.path.partition("?")
        path = path.split("#", 1)[0]
        if method == "OPTIONS":
            return self._done(connection, request, self._options(request))
        if method not in ("GET", "HEAD"):
            answer = _text(405, f"{method} is not allowed here\n", [("Allow", ALLOWED_METHODS)])
            return self._done(connection, request, answer)
        if path.startswith("/admin/") and self.admin is not None:
            return self._admin(connection, request, path, query)
        return self._done(connection, request, self._get(path, request))

    async def _admin(self, connection: Any, request: Request, path: str, query: str) -> Response:
        assert self.admin is not None
        peer = peer_of(connection, request, self.trusted_proxies)
        answer = await self.admin(path, query, request, peer)
        return self._done(connection, request, answer)

    def _done(self, connection: Any, request: Request, answer: Response) -> Response:
        if log.isEnabledFor(logging.DEBUG):
            peer = peer_of(connection, request, self.trusted_proxies)
            path = request.path.split("?", 1)[0]
            log.debug(
                "%s %s %d from %s",
                request.method,
                path,
                answer.status_code,
                peer,
                extra={"event": "http", "method": request.method, "path": path,
                       "status": answer.status_code, "peer": peer},
            )  # fmt: skip
        return without_body(answer) if request.method == "HEAD" else answer

    def _cors(self, request: Request) -> list[tuple[str, str]]:
        """CORS headers for a request from another origin, if it is allowed."""
        origin = request.headers.get("Origin")
        if origin is None:
            return []
        origin = origin.strip().rstrip("/")
        if "*" in self.allowed_origins:
            return [("Access-Control-Allow-Origin", "*")]
        if origin in self.allowed_origins:
            return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")]
        return []

    def _options(self, request: Request) -> Response:
        extra = [("Allow", ALLOWED_METHODS)]
        cors = self._cors(request)
        if cors:
            extra += [
                *cors,
                ("Access-Control-Allow-Methods", ALLOWED_METHODS),
                ("Access-Control-Max-Age", str(CORS_MAX_AGE_SECONDS)),
            ]
        return _empty(204, extra)

    def _get(self, path: str, request: Request) -> Response:
        if path == "/healthz":
            health = self.health()
            status = 200 if health.get("status") == "ok" else 503
            return response(status, json.dumps(health).encode(), "application/json")
        if path == "/metrics":
            return response(200, self.metrics(), self.metrics_type)
        if path == "/links.json":  # where the links the page shows point (no secret)
            links = self.links() if self.links is not None else {"page": None}
            return response(
                200, json.dumps(links).encode(), "application/json", self._cors(request)
            )
        if path in ("/", "/index.html"):
            page = self._file("index.html", self._cors(request))
            if page is None:
                return response(200, PLACEHOLDER_PAGE, _TYPES[".html"], page_headers("index.html"))
            return page
        name = path[1:]
        if _SAFE_NAME.fullmatch(name):
            found = self._file(name, self._cors(request))
            if found is not None:
                return found
        return _text(404, "not found\n")

    def _file(self, name: str, extra: list[tuple[str, str]] | None = None) -> Response | None:
        try:
            entries = {
                p.name: p
                for p in self.web_dir.iterdir()
                if p.is_file() and not p.name.endswith(_NOT_SERVED)
            }
        except (OSError, ModuleNotFoundError):
            return None
        path = entries.get(name)
        if path is None:
            return None
        suffix = Path(path.name).suffix.lower()
        ctype = (
            _TYPES.get(suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        )
        try:
            body = path.read_bytes()
        except OSError:
            return None
        return response(200, body, ctype, [*(extra or []), *page_headers(path.name)])


ORIGIN_REFUSED = "this page's origin may not open a WebSocket here\n"
