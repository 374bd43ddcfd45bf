"""The server's side of `vtt-sync`: run the server (`serve`), administer it
(`admin`).

    vtt-sync serve [--config FILE] [--host H] [--port P] [--data-dir D] [--tls-cert F --tls-key F]
    vtt-sync admin export ROOM > room.json | import room.json | backup FILE
    vtt-sync --version

`vtt-sync client ...` is the Python client's: the `vtt-sync` command (the
vtt_sync package, above both) hands it to client_stub.cli before this
module sees it, so the server never imports the client. This parser lists
`client` only for `vtt-sync --help`; `python3 -m sync_server` runs these
commands alone.

`serve`'s settings come from its flags, the environment (VTT_SYNC_*) and
an optional TOML file, in that order of precedence (sync_server/ops/settings.py
holds the table); it prints them at start, secrets masked. It prints
`vtt-sync listening on ws://HOST:PORT` (wss:// with TLS) once it accepts
connections (tests start it with --port 0 and read the port from that
line), reloads its TLS certificate on SIGHUP, and stops gracefully on
SIGINT / SIGTERM (after `drain_seconds` of /healthz answering 503).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from sync_server.core.auth import WeakAdminToken
from sync_server.hosting.config import Config
from sync_server.observe import logs
from sync_server.ops import admin_cli, settings
from sync_server.ops.serving import run, serve, tune_gc
from sync_server.storage import StorageError
from sync_server.version import __version__

log = logging.getLogger("sync_server")


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors follow the log format asked for in the
    environment (a JSON log stays JSON even when a flag is wrong)."""

    def error(self, message: str) -> Any:
        if os.environ.get("VTT_SYNC_LOG_FORMAT", "").strip().lower() == "json":
            sys.stderr.write(logs.json_line(f"{self.prog}: {message}", "error") + "\n")
            raise SystemExit(2)
        return super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vtt-sync", description="vtt-sync server and client")
    parser.add_argument("--version", action="version", version=f"vtt-sync {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    s = sub.add_parser(
        "serve",
        help="run the sync server",
        description="Run the sync server. Each setting comes from its flag, else its "
        "environment variable, else the --config TOML file (keys are the setting names: "
        "host, port, data_dir, tls_cert, ...), else its default.",
    )
    settings.add_arguments(s)
    admin_cli.add_parser(sub)
    sub.add_parser("client", help="the Python client (see vtt-sync client --help)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["client"]:  # the command above both dispatched it already
        sys.stderr.write(
            "vtt-sync: the client is `vtt-sync client ...` (or `python3 -m vtt_sync client ...`, "
            "`python3 -m client_stub ...`); `python3 -m sync_server` runs the server's "
            "commands only\n"
        )
        return 2
    args = build_parser().parse_args(args_list)
    if args.command == "admin":
        return admin_cli.main(args)
    return serve_main(args)


def serve_main(args: argparse.Namespace) -> int:
    env_json = os.environ.get("VTT_SYNC_LOG_FORMAT", "").strip().lower() == "json"
    try:
        resolved = settings.resolve(args)
    except settings.SettingError as exc:
        logs.Output("json" if env_json else "text").error(f"vtt-sync: {exc}")
        return 2
    out = logs.Output(resolved["log_format"])
    redact = logs.setup(resolved["log_level"], resolved["log_format"])
    config = Config(**settings.config_fields(resolved))
    if config.admin_token:
        redact.add(config.admin_token)
    out.redact = redact
    print_configuration(out, resolved)
    if resolved["workers"] > 1:
        from sync_server.ops import workers  # only the supervisor needs it

        return workers.supervise(config, resolved, out, redact)
    tune_gc()
    try:
        return run(config, serve(config, resolved["demo"], out, redact))
    except (StorageError, WeakAdminToken, settings.SettingError) as exc:
        out.error(f"vtt-sync: {exc}")
        return 2
    except KeyboardInterrupt:
        return 130


def print_configuration(out: logs.Output, resolved: settings.Resolved) -> None:
    """The settings in force and where each came from, secrets masked."""
    rows = resolved.lines()
    if out.json:
        out.say(
            f"vtt-sync {__version__}: configuration",
            event="configuration",
            version=__version__,
            settings={name: shown for name, shown, _ in rows},
            sources={name: source for name, _, source in rows},
        )
        return
    out.say(f"vtt-sync {__version__}; configuration (flag > env > file > default):")
    width = max(len(name) for name, _, _ in rows)
    for name, shown, source in rows:
        out.say(f"  {name:<{width}}  {shown}  ({source})")


if __name__ == "__main__":
    raise SystemExit(main())
