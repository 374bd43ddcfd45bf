"""`vtt-sync client ...`: list the ops, send one, watch a room, create a room.

    vtt-sync client ops                               # every operation, one line each
    vtt-sync client cmd damage --help                 # one op: its arguments, an example
    vtt-sync client cmd damage char=c1 amount=3       # prints what changed, in sentences
    vtt-sync client cmd --json combat_start 'order=["c1","c2"]'   # the ack as JSON
    vtt-sync client watch                             # live view of the table
    vtt-sync client state > room.json
    vtt-sync client create-room "Thursday table"      # admin: prints the new GM's link

Connection settings: --url/--token/--room, or VTT_SYNC_URL, VTT_SYNC_TOKEN,
VTT_SYNC_ROOM; for a wss:// server with a private or self-signed certificate,
--ca-file or VTT_SYNC_CA_FILE. The token is never printed nor logged (except the new links
that `create-room` and the `add_user` / `rotate_token` commands exist to
give); prefer the environment variable (a command-line flag is visible to
other local users in `ps`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shlex
import signal
import ssl
import sys
import textwrap
from pathlib import Path
from typing import Any

from client_stub.actions import actions_text, affordances_of, subject_of
from client_stub.client import Client, tls_context
from client_stub.errors import CommandError, CommandTimeout, ConnectionFailed, VttSyncError
from client_stub.events import EventText, Names
from sync_server.wire import reach
from sync_server.wire.links import LINKS_TIMEOUT_SECONDS, page_link, public_page, ws_url

DEFAULT_URL = "ws://127.0.0.1:8765/"
# `vtt-sync serve`'s default data directory: create-room reads the admin token there.
DEFAULT_DATA_DIR = "./vtt-data"
EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_CONNECTION = 0, 1, 2, 3
MAX_UNDO_LOOKBACK = 200  # versions `cmd undo` fetches to say what it undid

EXIT_CODES = f"""\
exit status:
  {EXIT_OK}  done
  {EXIT_REFUSED}  the server refused the command (the reason is on stderr)
  {EXIT_USAGE}  usage: a bad option, an unknown op, no token
  {EXIT_CONNECTION}  no connection: the server is unreachable or refused the token
errors always go to stderr; --json makes them one JSON object."""


class UsageError(ValueError):
    """A mistake on the command line (exit 2)."""


def server_link(url: str, room: str, token: str, context: ssl.SSLContext | None) -> str:
    """The link for `room` and `token` on the server at `url`, naming its
    public address when it has one (sync_server/wire/links.py)."""

    def fetch(address: str) -> bytes:
        import urllib.request

        with urllib.request.urlopen(address, timeout=LINKS_TIMEOUT_SECONDS, context=context) as r:
            return bytes(r.read())

    return page_link(url, room, token, public_page(url, fetch))


def parse_value(raw: str) -> Any:
    """JSON when it parses (3, true, null, ["c1"], {"pv": 3}, "quoted"), else the string."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def parse_pairs(pairs: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected key=value, got {pair!r}")
        args[key] = parse_value(raw)
    return args


def room_id_from_name(name: str) -> str:
    """A room id from its name: "Thursday table" -> "thursday-table"."""
    slug = re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-_.")[:64].strip("-_.")
    return slug or "room"


# --- the op reference (rules/catalog.py) --------------------------------------


def _catalog() -> Any:
    from rules import catalog  # the reference ships with the client

    return catalog


def ops_text() -> str:
    cat = _catalog()
    rows = [(op, cat.ROLE_SHORT[cat.op_role(op)], cat.OPS[op].summary) for op in cat.all_ops()]
    width = max(len(op) for op, _, _ in rows)
    lines = ["Operations (send one with: vtt-sync client cmd OP key=value ...)", ""]
    lines += [f"  {op:<{width}}  {who:<10}  {what}" for op, who, what in rows]
    lines += [
        "",
        "who: GM = the game master; owner = the GM or the player who owns `char`;",
        "admin = an admin session (the server's admin token, no room).",
        "vtt-sync client cmd OP --help shows an op's arguments; docs/operations.md has them all.",
    ]
    return "\n".join(lines)


def _reads_as_text(s: str) -> bool:
    """The CLI reads a value as JSON when it parses: "3" would be a number."""
    try:
        json.loads(s)
    except ValueError:
        return True
    return False


def cli_example(op: str, args: dict[str, Any]) -> str:
    """The `vtt-sync client cmd` line sending `op` with `args` (also the
    examples of docs/operations.md)."""
    parts = ["vtt-sync", "client", "cmd", op]
    for k, v in args.items():
        text = v if isinstance(v, str) and _reads_as_text(v) else json.dumps(v)
        pair = f"{k}={text}"
        if "'" in pair and not any(ch in pair for ch in '"$`\\!'):
            parts.append(f'"{pair}"')  # reads better than shlex's '"'"'
        else:
            parts.append(shlex.quote(pair))
    return " ".join(parts)


def unknown_args_message(op: str, names: list[str]) -> str | None:
    """None if every argument name is one of `op`'s, else what to type."""
    import difflib

    known = list(_catalog().op_args(op))
    bad = [n for n in names if n not in known]
    if not bad:
        return None
    hints = []
    for name in bad:
        near = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
        hints.append(f"{name!r}" + (f" (did you mean {' or '.join(near)}?)" if near else ""))
    return (
        f"{op} has no argument {', '.join(hints)}; its arguments: "
        f"{', '.join(known) or 'none'} (vtt-sync client cmd {op} --help)"
    )


def unknown_op_message(op: str) -> str:
    """What to type instead of an unknown op: the nearest known ones (the
    client's own help; the rules only check names)."""
    import difflib

    near = difflib.get_close_matches(op, _catalog().all_ops(), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    return f"unknown op {op!r}{hint} (vtt-sync client ops lists them)"


def op_help(op: str) -> str:
    cat = _catalog()
    doc = cat.OPS[op]
    args = cat.op_args(op)
    usage = [f"vtt-sync client cmd {op}"]
    for name, arg in args.items():
        usage.append(f"{name}=…" if arg.required else f"[{name}=…]")
    lines = [" ".join(usage), "", doc.summary[0].upper() + doc.summary[1:] + "."]
    rules = f"  Rules: {doc.rules}." if doc.rules else ""
    lines.append(f"Who: {cat.ROLE_TEXT[cat.op_role(op)]}.{rules}")
    lines.append("")
    if args:
        lines.append("arguments (values are JSON when they parse, else text):")
        width = max(len(n) for n in args)
        for name, arg in args.items():
            need, accepts = cat.describe_arg(arg)
            lines.append(f"  {name:<{width}}  {need}: {doc.meaning[name]}")
            lines.append(f"  {'':<{width}}  accepts {accepts}")
    else:
        lines.append("no arguments")
    lines += ["", *textwrap.wrap("changes: " + doc.changes.replace("`", ""), 88)]
    if doc.result != "{}":
        lines.append(f"result: {doc.result}")
    if doc.events:
        lines.append("events: " + ", ".join(dict.fromkeys(doc.events)))
    lines += ["", "example:", "  " + cli_example(op, doc.example)]
    return "\n".join(lines)


# --- arguments ----------------------------------------------------------------


def _connection_options(
    parser: argparse.ArgumentParser,
    *,
    defaults: bool,
    token_help: str = "your token: the one in your page link (env VTT_SYNC_TOKEN)",
) -> None:
    """The connection options, accepted before and after the subcommand.

    The subcommands' copies default to SUPPRESS: argparse lets a subparser's
    defaults overwrite what the main parser already read, so with real
    defaults there `--token X state` (options first) would lose the token.
    """

    def d(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--url",
        default=d(None),
        help=f"server URL (env VTT_SYNC_URL; default {DEFAULT_URL}); a page link "
        "(https://host/#room=R&token=T) works too: its room and token are used",
    )
    parser.add_argument("--token", default=d(None), help=token_help)
    parser.add_argument("--room", default=d(None), help="room id (env VTT_SYNC_ROOM)")
    parser.add_argument(
        "--proto", choices=("msgpack", "json"), default=d("msgpack"), help="default msgpack"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=d(15.0),
        help="seconds to wait for the server's answer (default 15)",
    )
    parser.add_argument(
        "--json", action="store_true", default=d(False), help="print JSON (acks, errors)"
    )
    parser.add_argument(
        "--ca-file",
        default=d(None),
        metavar="FILE",
        help="for wss://: trust the certificate authority (or self-signed certificate) in "
        "FILE (env VTT_SYNC_CA_FILE; default: the system's authorities)",
    )


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _connection_options(common, defaults=False)
    admin_common = argparse.ArgumentParser(add_help=False)
    _connection_options(
        admin_common,
        defaults=False,
        token_help="the server's admin token (env VTT_SYNC_ADMIN_TOKEN; default: the file "
        "admin_token in --data-dir), not a user's",
    )
    parser = argparse.ArgumentParser(
        prog="vtt-sync client",
        description="Clients of a vtt-sync server.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _connection_options(parser, defaults=True)
    sub = parser.add_subparsers(
        dest="action", required=True, metavar="{ops,cmd,actions,watch,state,create-room}"
    )
    sub.add_parser("ops", help="list the operations (no connection)")
    cmd = sub.add_parser(
        "cmd",
        parents=[common],
        add_help=False,
        help="send one command; prints what changed",
        description="Send one command. `cmd OP --help` shows OP's arguments.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmd.add_argument("-h", "--help", action="store_true", help="this help, or OP's with an OP")
    cmd.add_argument("op", nargs="?", help="operation, e.g. damage (see: vtt-sync client ops)")
    cmd.add_argument("args", nargs="*", metavar="key=value", help="arguments (JSON values)")
    cmd.add_argument("--expect", type=int, default=None, help="room version expected")
    cmd.add_argument("--id", dest="cmd_id", default=None, help="command id (default: random)")
    cmd.add_argument(
        "--events", action="store_true", help="with --json: add the command's events to the ack"
    )
    actions = sub.add_parser(
        "actions",
        parents=[common],
        help="what you may do now (the server says it), and why not",
        description=(
            "What you may do now, as the server says it: for CHAR, or for each character"
            " you may act for and for the room; an action you cannot do now says why."
        ),
    )
    actions.add_argument("char", nargs="?", help="a character id (default: all)")
    watch = sub.add_parser("watch", parents=[common], help="live view of the room")
    watch.add_argument("--events", type=int, default=14, help="event lines to keep (default 14)")
    watch.add_argument("--once", action="store_true", help="render once and exit")
    state = sub.add_parser("state", parents=[common], help="print the room state as JSON")
    state.add_argument("--compact", action="store_true", help="one line of JSON")
    create = sub.add_parser(
        "create-room",
        parents=[admin_common],
        help="admin: create a room, print its GM's link",
        description=(
            "Create a room (admin) and print the link its GM opens. The admin token comes "
            "from --token, else VTT_SYNC_ADMIN_TOKEN, else the file admin_token in --data-dir."
        ),
    )
    create.add_argument("name", help='the room\'s name, e.g. "Thursday table"')
    create.add_argument("--id", dest="room_id", default=None, help="room id (default: from NAME)")
    create.add_argument("--gm-name", default="GM", help="the first GM's name (default GM)")
    create.add_argument(
        "--data-dir",
        default=DEFAULT_DATA_DIR,
        help=f"the server's data directory, for its admin_token file (default {DEFAULT_DATA_DIR})",
    )
    return parser


def link_parts(url: str) -> dict[str, str]:
    """The room, token (and ws) of a page link's fragment (#room=R&token=T):
    a link pasted as --url says which room and token to use."""
    from urllib.parse import parse_qs

    _, _, fragment = url.partition("#")
    found = parse_qs(fragment)
    return {k: v[0] for k, v in found.items() if k in ("room", "token", "ws") and v and v[0]}


def _settings(ns: argparse.Namespace) -> tuple[str, str, str | None]:
    url = ns.url or os.environ.get("VTT_SYNC_URL") or DEFAULT_URL
    link = link_parts(url)
    if "ws" in link:  # a link to a page served elsewhere: its server is `ws`
        url = link["ws"]
    token = ns.token or link.get("token") or os.environ.get("VTT_SYNC_TOKEN")
    room = ns.room or link.get("room") or os.environ.get("VTT_SYNC_ROOM") or None
    if not token:
        raise UsageError("no token: pass --token or set VTT_SYNC_TOKEN")
    return ws_url(url), token, room


def _admin_token(ns: argparse.Namespace) -> str:
    token = ns.token or os.environ.get("VTT_SYNC_ADMIN_TOKEN")
    if token:
        return token
    path = Path(ns.data_dir) / "admin_token"
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        raise UsageError(
            f"no admin token: pass --token, set VTT_SYNC_ADMIN_TOKEN, or --data-dir "
            f"to the server's data directory (no {path})"
        )


# --- output -------------------------------------------------------------------


def _print_json(data: Any, *, compact: bool = False, file: Any = None) -> None:
    out = file or sys.stdout
    if compact:
        out.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    out.flush()


def _error_line(text: str) -> None:
    print(f"vtt-sync client: {text}", file=sys.stderr, flush=True)


def _connection_error(exc: BaseException, url: str, as_json: bool = False) -> int:
    """One line saying why there is no connection (exit 3)."""
    code = getattr(exc, "close_code", None)
    why = reach.reason(exc, url) if code is None else None
    if why is not None:
        message = f"cannot connect to {url}: {why}"
    elif code is not None:
        message = f"the server closed the session: {exc}"
    else:
        message = f"no connection to {url}: {exc}"
    if as_json:
        err: dict[str, Any] = {"error": "connection", "message": message}
        if code is not None:
            err["close_code"] = code
        _print_json(err, compact=True, file=sys.stderr)
    else:
        _error_line(message)
    return EXIT_CONNECTION


def _refused(exc: CommandError, as_json: bool, hint: str | None = None) -> int:
    if as_json:
        _print_json({"error": exc.code, "message": exc.message, "id": exc.id}, file=sys.stderr)
    else:
        _error_line(f"refused ({exc.code}): {exc.message}")
        if hint:
            _error_line(hint)
    return EXIT_REFUSED


# Refusals about what may be done now (not about how the command was written).
HINTED = frozenset({"forbidden", "rule", "conflict", "not_found"})


def _actions_hint(state: dict[str, Any] | None, args: Any, code: str) -> str | None:
    """On a refusal: where to see what one may do now (if the server says it)."""
    if affordances_of(state) is None or code not in HINTED:
        return None
    char = subject_of(args)
    target = f" {char}" if char is not None and char in (state or {}).get("characters", {}) else ""
    return f"what you may do now: vtt-sync client actions{target}"


def _tls(ns: argparse.Namespace) -> ssl.SSLContext | None:
    ca_file = getattr(ns, "ca_file", None) or os.environ.get("VTT_SYNC_CA_FILE")
    try:
        return tls_context(ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"cannot use the CA file {ca_file}: {exc}")


def _one_shot(url: str, token: str, room: str | None, ns: argparse.Namespace) -> Client:
    """A client for one command: the first connection is not retried (a wrong
    address fails at once); a drop after the welcome is, with the same id."""
    return Client(
        url,
        token,
        room,
        ns.proto,
        retry_first=False,
        open_timeout=ns.timeout,
        ssl_context=_tls(ns),
    )


# --- actions ------------------------------------------------------------------


async def _cmd(ns: argparse.Namespace, url: str, token: str, room: str | None) -> int:
    args = parse_pairs(ns.args)
    client = _one_shot(url, token, room, ns)
    patches: dict[int, dict[str, Any]] = {}
    client.on_patch(lambda p: patches.__setitem__(p["v"], p))
    undone_events: dict[int, list[dict[str, Any]]] = {}
    try:
        await client.connect(timeout=ns.timeout)
        ack = await client.command(
            ns.op, args, expect=ns.expect, cmd_id=ns.cmd_id, timeout=ns.timeout
        )
        undone = (ack.get("result") or {}).get("undone")
        if not ns.json and isinstance(undone, int) and isinstance(ack.get("v"), int):
            back = ack["v"] - undone + 1
            if back <= MAX_UNDO_LOOKBACK:
                for p in await client.history(back):
                    undone_events[p["v"]] = p.get("events") or []
    except CommandError as exc:
        return _refused(exc, ns.json, _actions_hint(client.state, args, exc.code))
    except (ConnectionFailed, CommandTimeout) as exc:
        return _connection_error(exc, url, ns.json)
    finally:
        await client.close()
    # The ack returns once the mirror holds its version, so its patch is here
    # (absent only for a `dup` retry whose patch predates this connection).
    v = ack.get("v")
    events = patches.get(v, {}).get("events", []) if isinstance(v, int) else []
    if ns.json:
        _print_json({**ack, "events": events} if ns.events else ack)
        return EXIT_OK
    names = Names()
    names.update(client.state)
    text = EventText(names, history=undone_events.get)
    for event in events:
        print(f"v{ack['v']}  {text.sentence(event)}")
    result = ack.get("result") or {}
    if "token" in result and room is not None:
        who = names.user(result.get("user"))
        print(f"link for {who} (send it to them only):")
        link = await asyncio.to_thread(server_link, url, room, result["token"], _tls(ns))
        print(f"  {link}")
    if not events:
        version = f" (v{ack['v']})" if ack.get("v") else ""
        print(f"done{version}: {json.dumps(result)}")
    if ack.get("dup"):
        print("(this command id was applied before: this is its first answer)")
    return EXIT_OK


async def _state(ns: argparse.Namespace, url: str, token: str, room: str | None) -> int:
    if room is None:
        raise UsageError("state needs a room: pass --room or set VTT_SYNC_ROOM")
    client = _one_shot(url, token, room, ns)
    try:
        await client.connect(timeout=ns.timeout)
        _print_json(client.state, compact=ns.compact)
    except ConnectionFailed as exc:
        return _connection_error(exc, url, ns.json)
    finally:
        await client.close()
    return EXIT_OK


async def _actions(ns: argparse.Namespace, url: str, token: str, room: str | None) -> int:
    if room is None:
        raise UsageError("actions needs a room: pass --room or set VTT_SYNC_ROOM")
    client = _one_shot(url, token, room, ns)
    try:
        await client.connect(timeout=ns.timeout)
        state = client.state or {}
        if ns.json:
            aff = affordances_of(state) or {}
            if ns.char is not None:
                aff = {"chars": {ns.char: (aff.get("chars") or {}).get(ns.char, {})}}
            _print_json(aff)
        else:
            print(actions_text(state, ns.char))
    except ConnectionFailed as exc:
        return _connection_error(exc, url, ns.json)
    finally:
        await client.close()
    return EXIT_OK


async def _create_room(ns: argparse.Namespace) -> int:
    url = ws_url(ns.url or os.environ.get("VTT_SYNC_URL") or DEFAULT_URL)
    token = _admin_token(ns)
    room_id = ns.room_id or room_id_from_name(ns.name)
    client = _one_shot(url, token, None, ns)
    try:
        await client.connect(timeout=ns.timeout)
        ack = await client.command(
            "create_room",
            {"room": room_id, "name": ns.name, "gm_name": ns.gm_name},
            timeout=ns.timeout,
        )
    except CommandError as exc:
        if exc.code == "conflict" and ns.room_id is None:
            exc.message += "; choose another id with --id"
        return _refused(exc, ns.json)
    except (ConnectionFailed, CommandTimeout) as exc:
        return _connection_error(exc, url, ns.json)
    finally:
        await client.close()
    result = ack["result"]
    link = await asyncio.to_thread(server_link, url, result["room"], result["gm_token"], _tls(ns))
    if ns.json:
        _print_json({**result, "link": link})
        return EXIT_OK
    print(
        f"room {result['room']!r} created. Its GM ({ns.gm_name}) opens this link, which "
        "holds their token (keep it to yourself):",
        file=sys.stderr,
    )
    print(link, flush=True)
    return EXIT_OK


def _patch_events(view: Any, patch: dict[str, Any]) -> list[dict[str, Any]]:
    """A patch's events for the feed, each with its version, completed from
    the patch's ops (a status character's arrival reads "joins")."""
    return [
        {**view.text.complete(e, patch.get("ops")), "v": patch.get("v")}
        for e in patch.get("events") or []
    ]


async def _watch(ns: argparse.Namespace, url: str, token: str, room: str | None) -> int:
    from rich.console import Console
    from rich.live import Live

    from client_stub.view import WatchView

    if room is None:
        raise UsageError("watch needs a room: pass --room or set VTT_SYNC_ROOM")
    view = WatchView(feed_size=ns.events)
    client = Client(url, token, room, ns.proto, backoff_max=5.0, ssl_context=_tls(ns))
    console = Console()

    if ns.once:
        try:
            await client.connect(timeout=ns.timeout)
            for patch in await client.history(ns.events):
                view.events.extend(_patch_events(view, patch))
            view.state, view.version = client.state, client.version
            view.user, view.role, view.status = client.user, client.role, "connected"
            console.print(view.render())
        except ConnectionFailed as exc:
            return _connection_error(exc, url, ns.json)
        finally:
            await client.close()
        return EXIT_OK

    with Live(view.render(), console=console, auto_refresh=False, screen=False) as live:

        def refresh() -> None:
            live.update(view.render(), refresh=True)

        def on_resize() -> None:
            # rich reads the terminal's width at each render: draw again at the new one
            refresh()

        loop = asyncio.get_running_loop()
        with contextlib.suppress(AttributeError, NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGWINCH, on_resize)

        def on_state(state: dict[str, Any], version: int) -> None:
            view.state, view.version = state, version
            view.user, view.role = client.user, client.role
            refresh()

        def on_patch(patch: dict[str, Any]) -> None:
            view.names.update(client.state)
            view.events.extend(_patch_events(view, patch))

        def on_status(status: str, detail: str) -> None:
            view.status, view.detail = status, detail
            refresh()

        backfilled = False

        async def backfill(status: str, _detail: str) -> None:
            nonlocal backfilled
            if status != "connected" or backfilled:
                return
            backfilled = True  # the recent log, once, on arrival
            older = [e for p in await client.history(ns.events) for e in _patch_events(view, p)]
            merged = older + list(view.events)
            view.events.clear()
            view.events.extend(merged)  # a bounded deque keeps the newest
            refresh()

        client.on_status(backfill)
        client.on_patch(on_patch)  # events are added before the state refresh
        client.on_state(on_state)
        client.on_status(on_status)
        client.start()
        try:
            await client.wait_closed()
        except ConnectionFailed as exc:
            refresh()
            return _connection_error(exc, url, ns.json)
        finally:
            await client.close()
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "client":
        argv = argv[1:]
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        if ns.action == "ops":
            print(ops_text())
            return EXIT_OK
        if ns.action == "cmd":
            known = ns.op in _catalog().OPS if ns.op else False
            if ns.op and not known:
                raise UsageError(unknown_op_message(ns.op))
            if ns.help:
                print(op_help(ns.op) if known else _cmd_parser_help(parser))
                return EXIT_OK
            if not ns.op:
                raise UsageError("cmd needs an op (vtt-sync client ops lists them)")
            if not known:
                raise UsageError(unknown_op_message(ns.op))
            wrong = unknown_args_message(ns.op, list(parse_pairs(ns.args)))
            if wrong:
                raise UsageError(wrong)
        if ns.action == "create-room":
            return asyncio.run(_create_room(ns))
        url, token, room = _settings(ns)
        runner = {"cmd": _cmd, "actions": _actions, "state": _state, "watch": _watch}[ns.action]
        return asyncio.run(runner(ns, url, token, room))
    except UsageError as exc:
        _error_line(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `... | head`: the reader left
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - no flush error at exit
        return EXIT_OK
    except VttSyncError as exc:  # pragma: no cover - defensive
        return _connection_error(exc, "the server")


def _cmd_parser_help(parser: argparse.ArgumentParser) -> str:
    for action in parser._actions:  # the subparser registered as "cmd"
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["cmd"].format_help()
    return parser.format_help()  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
