"""`vtt-sync admin`: back up the database, export a room, import a room.

    vtt-sync admin export ROOM > room.json        # from the running server
    vtt-sync admin import room.json [--replace]   # into the running server
    vtt-sync admin backup FILE [--data-dir DIR]   # the whole database, online

Where each runs, and why:

- `export` and `import` talk to the running server (--url, the admin token
  from --token, VTT_SYNC_ADMIN_TOKEN or the data directory's admin_token
  file), from this host or another one, through a reverse proxy or TLS
  (--ca-file). Only the running server can take a room in or out
  consistently: it knows which rooms exist, serves the imported room at
  once, and replaces a room in use without losing a command. The export
  is one HTTP GET (`/admin/export`, the token in a header); the import is
  `import_room` commands on an admin session, the file in parts (a client
  frame is at most 64 KiB).
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
import json
import os
import secrets
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from sync_server.core.limits import IMPORT_CHUNK_CHARS
from sync_server.storage import transfer
from sync_server.wire import frames, protocol
from sync_server.wire.codec import CODECS

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
        help="back up the database, export or import a room",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tasks = admin.add_subparsers(dest="task", required=True, metavar="{export,import,backup}")

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
        help="replace the room if it exists (default: refuse); its users reconnect",
    )
    server_options(imp)
    backup = tasks.add_parser("backup", help="copy the whole database (online, consistent) to FILE")
    backup.add_argument("file", help="where the copy goes (written whole, then renamed)")
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
    from client_stub.cli import normalize_url  # the client's rules for URLs

    ws = normalize_url(ns.url or os.environ.get("VTT_SYNC_URL") or DEFAULT_URL)
    if not ws.endswith("/"):
        ws += "/"
    http = "https" + ws[3:] if ws.startswith("wss://") else "http" + ws[2:]
    return ws, http


def _ssl(ns: argparse.Namespace) -> ssl.SSLContext | None:
    ca = ns.ca_file or os.environ.get("VTT_SYNC_CA_FILE")
    if not ca:
        return None
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise AdminError(f"cannot use the CA file {ca}: {exc}", EXIT_USAGE)


# --- export -------------------------------------------------------------------


def export(ns: argparse.Namespace) -> int:
    _, base = _urls(ns)
    query = {"room": ns.room}
    if ns.with_token_hashes:
        query["token_hashes"] = "1"
    url = base + "admin/export?" + urllib.parse.urlencode(query)
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {_admin_token(ns)}"})
    try:
        with urllib.request.urlopen(request, timeout=ns.timeout, context=_ssl(ns)) as r:
            body = r.read()
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        code = EXIT_CONNECTION if exc.code in (401, 429) else EXIT_REFUSED
        raise AdminError(f"export refused ({exc.code}): {message}", code)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AdminError(f"cannot reach {base}: {reason}", EXIT_CONNECTION)
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


async def _import(ns: argparse.Namespace, text: str, room: str) -> dict[str, Any]:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake

    ws_url, _ = _urls(ns)
    codec = CODECS[protocol.MSGPACK]
    parts = [text[i : i + IMPORT_CHUNK_CHARS] for i in range(0, len(text), IMPORT_CHUNK_CHARS)]
    upload = "imp-" + secrets.token_hex(6)
    base = {"room": room, "upload": upload, "parts": len(parts)}
    if ns.replace:
        base["replace"] = True
    kw: dict[str, Any] = {}
    context = _ssl(ns)
    if context is not None:
        kw["ssl"] = context
    try:
        async with asyncio.timeout(ns.timeout):
            ws = await connect(
                ws_url,
                subprotocols=[protocol.MSGPACK],  # type: ignore[list-item]
                max_size=64 * 1024 * 1024,
                open_timeout=ns.timeout,
                **kw,
            )
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        raise AdminError(f"cannot connect to {ws_url}: {exc}", EXIT_CONNECTION)
    try:
        async with asyncio.timeout(ns.timeout):
            handshake = frames.Handshake(_admin_token(ns))
            await ws.send(codec.encode(handshake.hello()))
            outcome = handshake.receive(codec.decode(await ws.recv()))
            if not isinstance(outcome, frames.Welcome):
                said = outcome.error.message if isinstance(outcome, frames.Refused) else outcome
                raise AdminError(f"the server refused the admin token: {said}", EXIT_CONNECTION)
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
                    raise AdminError(
                        f"import refused ({reply.code}): {reply.message}", EXIT_REFUSED
                    )
                if isinstance(reply, frames.Ack):
                    acked += 1
                    last = reply.result
            return dict(last)
    except ConnectionClosed as exc:
        raise AdminError(f"the server closed the session: {exc}", EXIT_CONNECTION)
    except TimeoutError:
        raise AdminError(f"no answer from {ws_url} within {ns.timeout:g} s", EXIT_CONNECTION)
    finally:
        await ws.close()


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
        from client_stub.cli import page_link

        ws_url, _ = _urls(ns)
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
                f"{page_link(ws_url, result['room'], token)}",
                flush=True,
            )
    return EXIT_OK


# --- backup -------------------------------------------------------------------


def backup(ns: argparse.Namespace) -> int:
    from sync_server.storage import StorageError
    from sync_server.storage.sqlite import DB_FILE, backup_database

    source = _data_dir(ns) / DB_FILE
    try:
        backup_database(source, Path(ns.file))
    except StorageError as exc:
        raise AdminError(str(exc), EXIT_REFUSED if source.exists() else EXIT_USAGE)
    size = Path(ns.file).stat().st_size
    print(f"database backed up to {ns.file} ({size} bytes, integrity checked)", file=sys.stderr)
    return EXIT_OK


def main(ns: argparse.Namespace) -> int:
    try:
        return {"export": export, "import": import_, "backup": backup}[ns.task](ns)
    except AdminError as exc:
        print(f"vtt-sync admin: {exc}", file=sys.stderr, flush=True)
        return exc.code
    except KeyboardInterrupt:
        return 130
