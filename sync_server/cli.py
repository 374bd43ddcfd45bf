"""`vtt-sync`: run the server (`serve`) or the Python client (`client`).

    vtt-sync serve --host 127.0.0.1 --port 8765 --data-dir ./vtt-data [--demo]
    vtt-sync client ...          (delegates to client_stub.cli.main)

`serve` prints `vtt-sync listening on ws://HOST:PORT` once it accepts
connections (tests start it with --port 0 and read the port from that
line), and stops gracefully on SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Sequence

from sync_server.auth import WeakAdminToken
from sync_server.config import Config
from sync_server.ratelimit import RateSpec
from sync_server.storage import StorageError

log = logging.getLogger("sync_server")


def _rate(text: str) -> RateSpec | None:
    try:
        return RateSpec.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vtt-sync", description="vtt-sync server and client")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the sync server")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    s.add_argument(
        "--data-dir",
        default="./vtt-data",
        help="where the database and the admin token live (default ./vtt-data)",
    )
    s.add_argument("--demo", action="store_true", help="create (once) and print a demo room")
    s.add_argument(
        "--rate",
        type=_rate,
        default=RateSpec(20, 40),
        help="player/observer command rate, RATE[/BURST] per second, or 'none' (default 20/40)",
    )
    s.add_argument(
        "--gm-rate",
        type=_rate,
        default=None,
        help="GM/admin command rate, RATE[/BURST], default unlimited",
    )
    s.add_argument(
        "--synchronous",
        choices=("FULL", "NORMAL"),
        default="FULL",
        help="SQLite durability: FULL survives power loss (default), NORMAL a process crash",
    )
    s.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    s.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web page origin (https://host[:port]) allowed to connect besides the "
        "server's own page; repeat for several (default: none)",
    )
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
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("websockets").setLevel(logging.WARNING)
    config = Config(
        data_dir=args.data_dir,
        host=args.host,
        port=args.port,
        rate=args.rate,
        gm_rate=args.gm_rate,
        synchronous=args.synchronous,
        allowed_origins=frozenset(o.rstrip("/") for o in args.allow_origin),
    )
    tune_gc()
    try:
        return asyncio.run(_serve(config, demo=args.demo))
    except (StorageError, WeakAdminToken) as exc:
        print(f"vtt-sync: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


async def _serve(config: Config, demo: bool) -> int:
    from sync_server.demo import ensure_demo, page_url
    from sync_server.server import Server

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    srv = Server(config)
    try:
        await srv.start()
    except OSError as exc:
        print(f"vtt-sync: cannot listen on {config.host}:{config.port}: {exc}", file=sys.stderr)
        await srv.close()
        return 2
    try:
        if srv.admin_token_generated:
            print(f"admin token (generated, shown once; stored in {config.data_dir}/admin_token):")
            print(f"  {srv.admin_token}")
        if demo:
            people = await ensure_demo(srv)
            print("demo room 'demo':")
            for key in ("gm", "p1", "p2", "p3", "obs"):
                p = people[key]
                print(f"  {p['role']:<8} {p['name']:<18} token {p['token']}")
                print(f"           {page_url(srv, p['token'])}")
        print(f"vtt-sync listening on {srv.url}", flush=True)
        await stop.wait()
        print("vtt-sync shutting down", flush=True)
    finally:
        await srv.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
