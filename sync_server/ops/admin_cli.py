"""`vtt-sync admin`: list rooms, reissue a GM's link, back up the database,
export a room, import a room.

    vtt-sync admin rooms                          # name, version, activity, who is on
    vtt-sync admin gm-link ROOM                   # a new link for the room's GM
    vtt-sync admin export ROOM > room.json        # from the running server
    vtt-sync admin import room.json [--replace]   # into the running server
    vtt-sync admin backup FILE [--data-dir DIR]   # the whole database, online

Where each runs, and why:

- `rooms`, `gm-link`, `export` and `import` talk to the running server (--url, the admin token
  from --token, VTT_SYNC_ADMIN_TOKEN or the data directory's admin_token
  file), from this host or another one, through a reverse proxy or TLS
  (--ca-file). Only the running server can take a room in or out
  consistently: it knows which rooms exist, serves the imported room at
  once, and replaces a room in use without losing a command. The export
  and the list are HTTP GETs (`/admin/export`, `/admin/rooms`, the token in
  a header); the import is `import_room` commands on an admin session, the
  file in parts (a client frame is at most 64 KiB), and `gm-link` the
  `reissue_gm_link` command.
- `backup` reads the database file itself (SQLite's online backup API on a
  connection of its own): consistent as of one instant while the server
  keeps serving (WAL: readers and the writer do not wait for each other),
  or while it is stopped. It runs on the server's host, as a user that can
  read the data directory; the copy never goes through the server's memory.
  (A PostgreSQL deployment backs up with pg_dump instead: docs/deploy.md.)

Exit status: 0 done, 1 refused by the server, 2 usage, 3 no connection.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import secrets
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sync_server.clock import Clock, SystemClock
from sync_server.core.limits import IMPORT_CHUNK_CHARS
from sync_server.storage import transfer
from sync_server.wire import frames, links, protocol, reach
from sync_server.wire.codec import CODECS

# The bounds on the admin CLI's waits and its backup file's stamp.
CLOCK: Clock = SystemClock()
DEFAULT_URL = "ws://127.0.0.1:8765/"
DEFAULT_DATA_DIR = "./vtt-data"
EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_CONNECTION = 0, 1, 2, 3

# Parts sent ahead of their acks: keeps the link busy without flooding the
# server's incoming queue (it reads 16 frames ahead, then back-pressure).
IMPORT_WINDOW = 8


class AdminError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def add_parser(sub: Any) -> None:
    admin = sub.add_parser(
        "admin",
        help="list rooms, a GM's new link, back up the database, export or import a room",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tasks = admin.add_subparsers(
        dest="task", required=True, metavar="{rooms,gm-link,export,import,backup}"
    )

    def server_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--url",
            default=None,
            help=f"the server (env VTT_SYNC_URL; default {DEFAULT_URL}); its page's address "
            "works too, sub-path included",
        )
        p.add_argument(
            "--token",
            default=None,
            help="the admin token (default: env VTT_SYNC_ADMIN_TOKEN, else DIR/admin_token)",
        )
        p.add_argument(
            "--data-dir",
            default=None,
            metavar="DIR",
            help=f"the server's data directory, for its admin_token file (env "
            f"VTT_SYNC_DATA_DIR; default {DEFAULT_DATA_DIR})",
        )
        p.add_argument(
            "--ca-file",
            default=None,
            metavar="FILE",
            help="for https/wss: trust this CA or self-signed certificate (env "
            "VTT_SYNC_CA_FILE; default: the system's authorities)",
        )
        p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")

    rooms = tasks.add_parser(
        "rooms", help="every room: name, version, last activity, who is connected"
    )
    rooms.add_argument("--json", action="store_true", help="the list as JSON")
    server_options(rooms)
    gm_link = tasks.add_parser(
        "gm-link",
        help="a new link for a room's GM who lost theirs (the old one stops working)",
    )
    gm_link.add_argument("room", help="the room's id")
    gm_link.add_argument("--user", default=None, help="which GM (default: the room's first)")
    server_options(gm_link)
    export = tasks.add_parser(
        "export", help="write a room's file (state, log, users) to stdout or --out"
    )
    export.add_argument("room", help="the room's id")
    export.add_argument("--out", default=None, metavar="FILE", help="write here (default stdout)")
    export.add_argument(
        "--with-token-hashes",
        action="store_true",
        help="include the users' token hashes, so that their links keep working where the "
        "file is imported (default: off; the importing server issues new tokens)",
    )
    server_options(export)
    imp = tasks.add_parser("import", help="create a room from its file on the running server")
    imp.add_argument("file", help="a room file from `vtt-sync admin export`")
    imp.add_argument(
        "--replace",
        action="store_true",
        help="replace the room if it exists (default: refuse); its sessions close and, "
        "unless the file holds token hashes, everyone needs the new link printed",
    )
    server_options(imp)
    backup = tasks.add_parser("backup", help="copy the whole database (online, consistent) to FILE")
    backup.add_argument(
        "file",
        help="where the copy goes (written whole, then renamed); a directory: a file "
        "vtt-sync-TIME.sqlite3 in it",
    )
    backup.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help=f"the server's data directory (env VTT_SYNC_DATA_DIR; default {DEFAULT_DATA_DIR})",
    )


def _data_dir(ns: argparse.Namespace) -> Path:
    return Path(ns.data_dir or os.environ.get("VTT_SYNC_DATA_DIR") or DEFAULT_DATA_DIR)


def _admin_token(ns: argparse.Namespace) -> str:
    token = ns.token or os.environ.get("VTT_SYNC_ADMIN_TOKEN")
    if token:
        return token
    path = _data_dir(ns) / "admin_token"
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        raise AdminError(
            f"no admin token: pass --token, set VTT_SYNC_ADMIN_TOKEN, or --data-dir to the "
            f"server's data directory (no {path})",
            EXIT_USAGE,
        )


def _urls(ns: argparse.Namespace) -> tuple[str, str]:
    """(the WebSocket URL, the HTTP base URL ending in /)."""
    ws = links.ws_url(ns.url or os.environ.get("VTT_SYNC_URL") or DEFAULT_URL)
    if not ws.endswith("/"):
        ws += "/"
    return ws, links.page_base(ws)


def _ssl(ns: argparse.Namespace) -> ssl.SSLContext | None:
    ca = ns.ca_file or os.environ.get("VTT_SYNC_CA_FILE")
    if not ca:
        return None
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise AdminError(f"cannot use the CA file {ca}: {exc}", EXIT_USAGE)


# --- export -------------------------------------------------------------------


def _admin_get(ns: argparse.Namespace, path: str, query: dict[str, str], what: str) -> bytes:
    """One admin HTTP GET (the admin token in a header); its body."""
    _, base = _urls(ns)
    url = base + path + ("?" + urllib.parse.urlencode(query) if query else "")
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {_admin_token(ns)}"})
    try:
        with urllib.request.urlopen(request, timeout=ns.timeout, context=_ssl(ns)) as r:
            return r.read()
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        code = EXIT_CONNECTION if exc.code in (401, 429) else EXIT_REFUSED
        raise AdminError(f"{what} refused ({exc.code}): {message}", code)
    except (urllib.error.URLError, OSError) as exc:
        raise AdminError(reach.cannot_connect(exc, base), EXIT_CONNECTION)


def export(ns: argparse.Namespace) -> int:
    query = {"room": ns.room}
    if ns.with_token_hashes:
        query["token_hashes"] = "1"
    body = _admin_get(ns, "admin/export", query, "export")
    if ns.out:
        tmp = Path(ns.out + ".part")
        tmp.write_bytes(body)
        tmp.replace(ns.out)
    else:
        sys.stdout.buffer.write(body + b"\n")
        sys.stdout.flush()
    doc = json.loads(body)
    print(
        f"room {doc['room']!r} exported at v{doc['head']} ({len(body)} bytes"
        f"{', with token hashes' if doc.get('token_hashes') else ''})",
        file=sys.stderr,
    )
    return EXIT_OK


# --- import -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _admin_session(ns: argparse.Namespace) -> AsyncIterator[tuple[Any, Any, str]]:
    """An admin session on the running server: (socket, codec, its URL),
    past the welcome; its failures are AdminErrors that say what to do."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake

    ws_url, _ = _urls(ns)
    codec = CODECS[protocol.MSGPACK]
    kw: dict[str, Any] = {}
    context = _ssl(ns)
    if context is not None:
        kw["ssl"] = context
    try:
        async with CLOCK.timeout(ns.timeout):
            ws = await connect(
                ws_url,
                subprotocols=[protocol.MSGPACK],  # type: ignore[list-item]
                max_size=64 * 1024 * 1024,
                open_timeout=ns.timeout,
                **kw,
            )
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        raise AdminError(reach.cannot_connect(exc, ws_url), EXIT_CONNECTION)
    try:
        async with CLOCK.timeout(ns.timeout):
            handshake = frames.Handshake(_admin_token(ns))
            await ws.send(codec.encode(handshake.hello()))
            outcome = handshake.receive(codec.decode(await ws.recv()))
            if not isinstance(outcome, frames.Welcome):
                said = outcome.error.message if isinstance(outcome, frames.Refused) else outcome
                raise AdminError(f"the server refused the admin token: {said}", EXIT_CONNECTION)
            yield ws, codec, ws_url
    except ConnectionClosed as exc:
        raise AdminError(f"the server closed the session: {exc}", EXIT_CONNECTION)
    except TimeoutError:
        raise AdminError(f"no answer from {ws_url} within {ns.timeout:g} s", EXIT_CONNECTION)
    finally:
        await ws.close()


def _refusal(frame: dict[str, Any], what: str) -> AdminError:
    return AdminError(f"{what} refused ({frame.get('code')}): {frame.get('message')}", EXIT_REFUSED)


async def _import(ns: argparse.Namespace, text: str, room: str) -> dict[str, Any]:
    parts = [text[i : i + IMPORT_CHUNK_CHARS] for i in range(0, len(text), IMPORT_CHUNK_CHARS)]
    upload = "imp-" + secrets.token_hex(6)
    base = {"room": room, "upload": upload, "parts": len(parts)}
    if ns.replace:
        base["replace"] = True
    async with _admin_session(ns) as (ws, codec, _):
        last: dict[str, Any] = {}
        sent = 0
        acked = 0
        while acked < len(parts):
            while sent < len(parts) and sent - acked < IMPORT_WINDOW:
                args = {**base, "part": sent, "data": parts[sent]}
                frame = protocol.cmd(f"{upload}-{sent}", "import_room", args)
                await ws.send(codec.encode(frame))
                sent += 1
            reply = frames.parse_server(codec.decode(await ws.recv()))
            if isinstance(reply, frames.Error):
                raise _refusal(reply.raw, "import")
            if isinstance(reply, frames.Ack):
                acked += 1
                last = reply.result
        return dict(last)


# --- rooms, gm-link ---------------------------------------------------------------


def _when(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return "never"
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def rooms(ns: argparse.Namespace) -> int:
    listed = json.loads(_admin_get(ns, "admin/rooms", {}, "the list of rooms"))["rooms"]
    if ns.json:
        print(json.dumps(listed, indent=2, ensure_ascii=False), flush=True)
        return EXIT_OK
    if not listed:
        print("no rooms yet: `vtt-sync client create-room NAME` makes one", file=sys.stderr)
        return EXIT_OK
    rows = [("ROOM", "NAME", "VERSION", "LAST ACTIVITY", "CONNECTED")]
    for r in listed:
        who = ", ".join(
            f"{c.get('name') or c['user']} ({c.get('role') or '?'})"
            + (f" x{c['sessions']}" if c.get("sessions", 1) > 1 else "")
            for c in r["connected"]
        )
        rows.append((r["room"], r.get("name") or "", str(r["v"]), _when(r["last_activity"]), who))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + row[4])
    return EXIT_OK


async def _gm_link(ns: argparse.Namespace) -> tuple[dict[str, Any], str]:
    args = {"room": ns.room}
    if ns.user:
        args["user"] = ns.user
    async with _admin_session(ns) as (ws, codec, ws_url):
        await ws.send(
            codec.encode(protocol.cmd("gm-" + secrets.token_hex(6), "reissue_gm_link", args))
        )
        while True:
            reply = frames.parse_server(codec.decode(await ws.recv()))
            if isinstance(reply, frames.Error):
                raise _refusal(reply.raw, "a new GM link")
            if isinstance(reply, frames.Ack):
                return dict(reply.result), ws_url


def _public_page(ns: argparse.Namespace) -> str | None:
    """The server's public page address for links (its --public-url), or None."""
    ws_url, _ = _urls(ns)
    context = _ssl(ns)

    def fetch(url: str) -> bytes:
        with urllib.request.urlopen(url, timeout=links.LINKS_TIMEOUT_SECONDS, context=context) as r:
            return bytes(r.read())

    return links.public_page(ws_url, fetch)


def gm_link(ns: argparse.Namespace) -> int:
    result, ws_url = asyncio.run(_gm_link(ns))
    link = links.page_link(ws_url, result["room"], result["gm_token"], _public_page(ns))
    print(
        f"room {result['room']!r}: a new link for its GM {result['user']} (the old one no "
        "longer works; it holds the GM's token: give it to them only):",
        file=sys.stderr,
    )
    print(link, flush=True)
    return EXIT_OK


def import_(ns: argparse.Namespace) -> int:
    try:
        text = Path(ns.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AdminError(f"cannot read {ns.file}: {exc}", EXIT_USAGE)
    try:
        doc = transfer.loads(text)
        # The server checks the file whole before it stores anything; the
        # same checks here give a bad file's reason before any upload.
        transfer.from_document(json.loads(transfer.dumps(doc)))
    except transfer.BadRoomFile as exc:
        raise AdminError(f"{ns.file}: {exc}", EXIT_USAGE)
    room = str(doc["room"])  # a room id: from_document checked it
    # Sent as the export wrote it, re-encoded as ASCII: any character escaped,
    # so the text can be cut anywhere.
    result = asyncio.run(_import(ns, transfer.dumps(doc), room))
    print(
        f"room {result.get('room')!r} imported at v{result.get('v')} ({result.get('users')} users)",
        file=sys.stderr,
    )
    tokens = result.get("tokens") or {}
    if tokens:
        ws_url, _ = _urls(ns)
        page = _public_page(ns)
        users = (doc.get("state") or {}).get("users") or {}
        print(
            "every user has a new token; their links (each holds a token: give each to its "
            "owner only):",
            file=sys.stderr,
        )
        for uid, token in tokens.items():
            user = users.get(uid, {})
            print(
                f"{uid}\t{user.get('role', '?')}\t{user.get('name', '?')}\t"
                f"{links.page_link(ws_url, result['room'], token, page)}",
                flush=True,
            )
    return EXIT_OK


# --- backup -------------------------------------------------------------------


def backup(ns: argparse.Namespace) -> int:
    from sync_server.storage import StorageError
    from sync_server.storage.sqlite import DB_FILE, backup_database

    source = _data_dir(ns) / DB_FILE
    dest = Path(ns.file)
    if dest.is_dir():  # a directory: the copy goes in it, named after the time
        now = datetime.datetime.fromtimestamp(CLOCK.time(), datetime.UTC)
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        dest = dest / f"vtt-sync-{stamp}.sqlite3"
    if not dest.parent.is_dir():
        raise AdminError(
            f"cannot write the backup to {dest}: no directory {dest.parent}", EXIT_USAGE
        )
    try:
        backup_database(source, dest)
    except StorageError as exc:
        raise AdminError(str(exc), EXIT_REFUSED if source.exists() else EXIT_USAGE)
    except OSError as exc:  # the destination cannot be written
        raise AdminError(f"cannot write the backup to {dest}: {exc}", EXIT_USAGE)
    size = dest.stat().st_size
    print(f"database backed up to {dest} ({size} bytes, integrity checked)", file=sys.stderr)
    return EXIT_OK


def main(ns: argparse.Namespace) -> int:
    try:
        tasks = {"rooms": rooms, "gm-link": gm_link, "export": export, "import": import_}
        return {**tasks, "backup": backup}[ns.task](ns)
    except AdminError as exc:
        print(f"vtt-sync admin: {exc}", file=sys.stderr, flush=True)
        return exc.code
    except KeyboardInterrupt:
        return 130
