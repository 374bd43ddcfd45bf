"""`vtt-sync client ...`: watch a room live, send one command, print the state.

    vtt-sync client watch
    vtt-sync client cmd damage char=c1 amount=3 nonlethal=true
    vtt-sync client cmd combat_start order='["c1","c2"]'
    vtt-sync client state > room.json

Connection settings: --url/--token/--room, or VTT_SYNC_URL, VTT_SYNC_TOKEN,
VTT_SYNC_ROOM. The token is never printed nor logged; prefer the environment
variable (a command-line flag is visible to other local users in `ps`).
Exit status: 0 ok, 1 command refused, 2 usage, 3 connection failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from typing import Any

from client_stub.client import Client
from client_stub.errors import CommandError, CommandTimeout, ConnectionFailed, VttSyncError

DEFAULT_URL = "ws://127.0.0.1:8765/"
EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_CONNECTION = 0, 1, 2, 3


def normalize_url(url: str) -> str:
    """Accept ws(s)://, http(s):// (the page's address) or host:port."""
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
            raise ValueError(f"expected key=value, got {pair!r}")
        args[key] = parse_value(raw)
    return args


def _connection_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The connection options, accepted before and after the subcommand.

    The subcommands' copies default to SUPPRESS: argparse lets a subparser's
    defaults overwrite what the main parser already read, so with real
    defaults there `--token X state` (options first) would lose the token.
    """

    def d(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--url", default=d(None), help=f"server URL (env VTT_SYNC_URL; {DEFAULT_URL})"
    )
    parser.add_argument("--token", default=d(None), help="user token (env VTT_SYNC_TOKEN)")
    parser.add_argument("--room", default=d(None), help="room id (env VTT_SYNC_ROOM; none: admin)")
    parser.add_argument("--proto", choices=("msgpack", "json"), default=d("msgpack"))
    parser.add_argument(
        "--timeout", type=float, default=d(15.0), help="seconds to connect / wait for an answer"
    )


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _connection_options(common, defaults=False)
    parser = argparse.ArgumentParser(
        prog="vtt-sync client", description="Clients of a vtt-sync server."
    )
    _connection_options(parser, defaults=True)
    sub = parser.add_subparsers(dest="action", required=True, metavar="{watch,cmd,state}")
    watch = sub.add_parser("watch", parents=[common], help="live view of the room")
    watch.add_argument("--events", type=int, default=14, help="event lines to keep (14)")
    watch.add_argument("--once", action="store_true", help="render once and exit")
    cmd = sub.add_parser("cmd", parents=[common], help="send one command, print the ack")
    cmd.add_argument("op", help="operation, e.g. damage")
    cmd.add_argument("args", nargs="*", metavar="key=value", help="arguments (JSON values)")
    cmd.add_argument("--expect", type=int, default=None, help="room version expected")
    cmd.add_argument("--id", dest="cmd_id", default=None, help="command id (default: random)")
    cmd.add_argument(
        "--events",
        action="store_true",
        help="add the command's events (rolls, condition changes...) to the printed ack",
    )
    state = sub.add_parser("state", parents=[common], help="print the room state as JSON")
    state.add_argument("--compact", action="store_true", help="one line of JSON")
    return parser


def _settings(ns: argparse.Namespace) -> tuple[str, str, str | None]:
    url = ns.url or os.environ.get("VTT_SYNC_URL") or DEFAULT_URL
    token = ns.token or os.environ.get("VTT_SYNC_TOKEN")
    room = ns.room or os.environ.get("VTT_SYNC_ROOM") or None
    if not token:
        raise ValueError("no token: pass --token or set VTT_SYNC_TOKEN")
    return normalize_url(url), token, room


def _print_json(data: Any, *, compact: bool = False, file: Any = None) -> None:
    out = file or sys.stdout
    if compact:
        out.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    out.flush()


def _connection_error(exc: BaseException) -> int:
    code = getattr(exc, "close_code", None)
    err = {"error": "connection", "message": str(exc)}
    if code is not None:
        err["close_code"] = code
    _print_json(err, compact=True, file=sys.stderr)
    return EXIT_CONNECTION


async def _cmd(ns: argparse.Namespace, url: str, token: str, room: str | None) -> int:
    args = parse_pairs(ns.args)
    client = Client(url, token, room, ns.proto)
    patches: dict[int, dict[str, Any]] = {}
    client.on_patch(lambda p: patches.__setitem__(p["v"], p))
    try:
        await client.connect(timeout=ns.timeout)
        ack = await client.command(
            ns.op, args, expect=ns.expect, cmd_id=ns.cmd_id, timeout=ns.timeout
        )
    except CommandError as exc:
        _print_json({"error": exc.code, "message": exc.message, "id": exc.id})
        return EXIT_REFUSED
    except (ConnectionFailed, CommandTimeout) as exc:
        return _connection_error(exc)
    finally:
        await client.close()
    if ns.events:
        # The ack returns once the mirror holds its version, so its patch is here
        # (absent only for a `dup` retry whose patch predates this connection).
        ack = {**ack, "events": patches.get(ack.get("v"), {}).get("events", [])}
    _print_json(ack)
    return EXIT_OK


async def _state(ns: argparse.Namespace, url: str, token: str, room: str | None) -> int:
    if room is None:
        raise ValueError("state needs a room: pass --room or set VTT_SYNC_ROOM")
    client = Client(url, token, room, ns.proto)
    try:
        await client.connect(timeout=ns.timeout)
        _print_json(client.state, compact=ns.compact)
    except ConnectionFailed as exc:
        return _connection_error(exc)
    finally:
        await client.close()
    return EXIT_OK


async def _watch(ns: argparse.Namespace, url: str, token: str, room: str | None) -> int:
    from rich.console import Console
    from rich.live import Live

    from client_stub.view import WatchView

    if room is None:
        raise ValueError("watch needs a room: pass --room or set VTT_SYNC_ROOM")
    view = WatchView(feed_size=ns.events)
    client = Client(url, token, room, ns.proto, backoff_max=5.0)
    console = Console()

    if ns.once:
        try:
            await client.connect(timeout=ns.timeout)
            for patch in await client.history(ns.events):
                view.events.extend({**e, "v": patch.get("v")} for e in patch.get("events") or [])
            view.state, view.version = client.state, client.version
            view.user, view.role, view.status = client.user, client.role, "connected"
            console.print(view.render())
        except ConnectionFailed as exc:
            return _connection_error(exc)
        finally:
            await client.close()
        return EXIT_OK

    with Live(view.render(), console=console, auto_refresh=False, screen=False) as live:

        def refresh() -> None:
            live.update(view.render(), refresh=True)

        def on_state(state: dict[str, Any], version: int) -> None:
            view.state, view.version = state, version
            view.user, view.role = client.user, client.role
            refresh()

        def on_event(event: dict[str, Any]) -> None:
            view.events.append(event)

        def on_status(status: str, detail: str) -> None:
            view.status, view.detail = status, detail
            refresh()

        backfilled = False

        async def backfill(status: str, _detail: str) -> None:
            nonlocal backfilled
            if status != "connected" or backfilled:
                return
            backfilled = True  # the recent log, once, on arrival
            older = [
                {**e, "v": p.get("v")}
                for p in await client.history(ns.events)
                for e in p.get("events") or []
            ]
            merged = older + list(view.events)
            view.events.clear()
            view.events.extend(merged)  # a bounded deque keeps the newest
            refresh()

        client.on_status(backfill)
        client.on_event(on_event)  # events are added before the state refresh
        client.on_state(on_state)
        client.on_status(on_status)
        client.start()
        try:
            await client.wait_closed()
        except ConnectionFailed as exc:
            refresh()
            return _connection_error(exc)
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
        url, token, room = _settings(ns)
        runner = {"cmd": _cmd, "state": _state, "watch": _watch}[ns.action]
        return asyncio.run(runner(ns, url, token, room))
    except ValueError as exc:
        parser.print_usage(sys.stderr)
        print(f"vtt-sync client: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except VttSyncError as exc:  # pragma: no cover - defensive
        return _connection_error(exc)


if __name__ == "__main__":  # pragma: no cover
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
