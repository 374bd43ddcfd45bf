"""`vtt-sync`: run the server (`serve`), administer it (`admin`), or the
Python client (`client`).

    vtt-sync serve [--config FILE] [--host H] [--port P] [--data-dir D] [--tls-cert F --tls-key F]
    vtt-sync admin export ROOM > room.json | import room.json | backup FILE
    vtt-sync client ...          (delegates to client_stub.cli.main)
    vtt-sync --version

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
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from sync_server.core.auth import WeakAdminToken
from sync_server.hosting.config import Config
from sync_server.observe import logs
from sync_server.ops import admin_cli, settings
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


# The cyclic garbage collector's first threshold (CPython's default: 700
# allocations). Every command allocates a few hundred short-lived dicts that
# reference counting frees at once; at 700 the collector ran every few
# commands for nothing. 50,000 cut the server's CPU per command by ~12% and
# its p99 by ~10% in bench/server_bench.py (docs/performance.md), and only
# delays the rare reference cycles.
GC_THRESHOLDS = (50_000, 50, 100)


def tune_gc() -> None:
    """Freeze what start-up allocated (modules, config) out of the collector's
    scans, and collect the young generation less often (GC_THRESHOLDS)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "client":
        from client_stub.cli import main as client_main  # lazy: another package

        return client_main(args_list[1:]) or 0
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


def run(config: Config, main: Coroutine[Any, Any, int]) -> int:
    """Run the server's coroutine: on uvloop with the fast transport (the
    [fast] extra brings both), else on asyncio's own loop. Without the
    extra, `--transport picows` is refused with what to install."""
    if config.transport != "picows":
        return asyncio.run(main)
    from sync_server.hosting import picows_transport

    if not picows_transport.available():
        main.close()
        raise settings.SettingError(
            "--transport picows needs the fast extra: pip install 'vtt-sync[fast]'"
        )
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


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


async def serve(
    config: Config,
    demo: bool,
    out: logs.Output,
    redact: logs.Redact,
    worker: Callable[[Any, asyncio.Event], None] | None = None,
) -> int:
    """Run one server until SIGINT or SIGTERM. `worker` (workers mode):
    told the server and the stop event once it listens, instead of the
    listening line (the supervisor prints that one)."""
    from sync_server.hosting.server import Server
    from sync_server.ops.demo import ensure_demo, page_url

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    srv = Server(config)
    loop.add_signal_handler(signal.SIGHUP, srv.reload_tls)
    try:
        await srv.start()
    except OSError as exc:
        out.error(f"vtt-sync: cannot listen on {config.host}:{config.port}: {exc}")
        await srv.close()
        return 2
    redact.add(srv.admin_token)
    try:
        if srv.admin_token_generated:
            where = config.data_dir / "admin_token"
            if out.json:  # a JSON log goes to a shipper: no token in it
                out.say(f"admin token generated; read it in {where} (mode 0600)")
            else:
                print(f"admin token (generated, shown once; stored in {where}):")
                print(f"  {srv.admin_token}", flush=True)
        if demo:
            people = await ensure_demo(srv)
            if out.json:
                out.say(
                    f"demo room 'demo' ready; its links hold tokens: read them in "
                    f"{config.data_dir / 'demo_tokens.json'}"
                )
            else:
                print("demo room 'demo':")
                for key in ("gm", "p1", "p2", "p3", "obs"):
                    p = people[key]
                    print(f"  {p['role']:<8} {p['name']:<18} token {p['token']}")
                    print(f"           {page_url(srv, p['token'])}", flush=True)
        out.say(f"page:       {srv.page_url}  (open a room's link)", event="page", url=srv.page_url)
        out.say(f"admin page: {srv.page_url}admin.html  (create rooms with the admin token)")
        if srv.links_local:
            out.say(
                "links name this machine only; for players elsewhere set --public-url "
                "(the address they reach, e.g. wss://vtt.example/): docs/deploy.md"
            )
        if worker is not None:
            worker(srv, stop)
        else:
            out.say(f"vtt-sync listening on {srv.url}", event="listening", url=srv.url)
        await stop.wait()
        if config.drain_seconds > 0:
            srv.draining = True
            out.say(f"vtt-sync draining: /healthz answers 503 for {config.drain_seconds:g} s")
            stop.clear()  # a second signal cuts the wait short
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(config.drain_seconds):
                    await stop.wait()
        out.say("vtt-sync shutting down", event="stopping")
    finally:
        await srv.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
