"""Links to the tracker page, made in one place for every side.

A link is the page's address with the room and the token in its fragment
(`http://HOST:PORT/#room=R&token=T`: browsers never send a fragment to a
server). The server prints them (`serve --demo`, the page and admin page
lines), the CLIs print them (`client create-room`, `client cmd add_user`
and `rotate_token`, `admin gm-link`, `admin import`), and they must all name
the same address: `--public-url` when the server has one (the address
players reach, behind a proxy or a NAT), else the address the server is
reached at. The server publishes its public address at `GET links.json`
(`links_document`), so that a CLI talking to `ws://127.0.0.1:PORT` on the
server's own machine still prints the link players elsewhere can open
(`public_page`).

Pure functions, no I/O: `public_page` is given the function that fetches
`links.json` (the CLIs pass theirs, with their TLS settings), so the wire
package stays what both the server and the clients may import.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

LINKS_PATH = "links.json"  # the server's answer: {"page": public page address or null}
# Seconds a CLI waits for links.json before it prints the link on the
# address it was given: a link a moment late beats none.
LINKS_TIMEOUT_SECONDS = 5.0

SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}


def ws_url(url: str) -> str:
    """The WebSocket address of a server given as ws(s)://, as its page's
    http(s):// address, or as host:port; no fragment, "/" when no path."""
    if url.startswith("http://"):
        url = "ws://" + url[len("http://") :]
    elif url.startswith("https://"):
        url = "wss://" + url[len("https://") :]
    elif "://" not in url:
        url = "ws://" + url
    url = url.split("#", 1)[0]
    if url.count("/") == 2:
        url += "/"
    return url


def page_base(url: str) -> str:
    """The page's address (http(s)://host[:port]/path/, ending in "/") of
    a server given by its WebSocket or page address."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "ws", url
    base = f"{SCHEMES.get(scheme, scheme)}://{rest}"
    return base.split("#", 1)[0].split("?", 1)[0].rstrip("/") + "/"


def page_link(server: str, room: str, token: str, public: str | None = None) -> str:
    """The link that opens `room` with `token`: on `public` (the server's
    public page address, `public_page`) when there is one, else on the
    address `server` is reached at."""
    return f"{page_base(public or server)}#{urlencode({'room': room, 'token': token})}"


def links_document(public_url: str | None) -> dict[str, Any]:
    """`GET links.json`: where links should point; `page` is null when the
    server has no public URL (a page then uses its own address)."""
    return {"page": None if public_url is None else page_base(public_url)}


def public_page(server: str, fetch: Callable[[str], bytes]) -> str | None:
    """The page address the server at `server` says links should use (its
    `links.json`, fetched with `fetch(url) -> body`), or None when it has
    none or cannot tell (unreachable, an older server: the link then names
    `server`'s address)."""
    try:
        page = json.loads(fetch(page_base(server) + LINKS_PATH)).get("page")
    except (OSError, ValueError, AttributeError):
        return None
    return page if isinstance(page, str) and page.startswith(("http://", "https://")) else None
