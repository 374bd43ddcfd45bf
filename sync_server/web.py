"""Plain HTTP on the WebSocket port: /healthz, /metrics, the browser page.

websockets calls `process_request` for every incoming request; a request
that asks for a WebSocket upgrade goes on to the handshake (return None),
any other one is answered here. Static files are whitelisted: only regular
files found directly in the web directory, by exact name, so no path can
climb out of it.
"""

from __future__ import annotations

import email.utils
import http
import importlib.resources
import json
import mimetypes
import re
from collections.abc import Callable
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

PLACEHOLDER_PAGE = b"""<!doctype html>
<html lang="en"><meta charset="utf-8"><title>vtt-sync</title>
<body><h1>vtt-sync</h1>
<p>The server is running. The tracker page (client_stub/web/index.html) is not installed.</p>
</body></html>
"""

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


def response(status: int, body: bytes, content_type: str) -> Response:
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
        ]
    )
    return Response(st.value, st.phrase, headers, body)


def _text(status: int, text: str) -> Response:
    return response(status, text.encode(), "text/plain; charset=utf-8")


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
    ) -> None:
        self.web_dir = web_files(web)
        self.allowed_origins = allowed_origins
        self.health = health
        self.metrics = metrics
        self.metrics_type = metrics_type

    def process_request(self, _connection: Any, request: Request) -> Response | None:
        """websockets' process_request hook (connection, request)."""
        if _is_upgrade(request):
            if origin_allowed(
                request.headers.get("Origin"), request.headers.get("Host"), self.allowed_origins
            ):
                return None
            return _text(403, "this page's origin may not open a WebSocket here\n")
        path = request.path.split("?", 1)[0].split("#", 1)[0]
        if path == "/healthz":
            body = json.dumps(self.health()).encode()
            return response(200, body, "application/json")
        if path == "/metrics":
            return response(200, self.metrics(), self.metrics_type)
        if path in ("/", "/index.html"):
            page = self._file("index.html")
            if page is None:
                return response(200, PLACEHOLDER_PAGE, _TYPES[".html"])
            return page
        name = path[1:]
        if _SAFE_NAME.fullmatch(name):
            found = self._file(name)
            if found is not None:
                return found
        return _text(404, "not found\n")

    def _file(self, name: str) -> Response | None:
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
        return response(200, body, ctype)
