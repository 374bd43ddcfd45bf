"""Running one server in this process: on which event loop (`run`), until
which signal, with what printed (`serve`), and how the garbage collector is
tuned first (`tune_gc`). `vtt-sync serve` (cli.py) and each worker process
of `serve --workers N` (workers.py) run their server through it, so neither
imports the other for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from sync_server.clock import Clock
from sync_server.hosting.config import Config
from sync_server.observe import logs
from sync_server.ops import settings

# The cyclic garbage collector's first threshold (CPython's default: 700
# allocations). Every command allocates a few hundred short-lived dicts that
# reference counting frees at once; at 700 the collector ran every few
# commands for nothing. 50,000 cut the server's CPU per command by ~12% and
# its p99 by ~10% in bench/server_bench.py (docs/performance.md), and only
# delays the rare reference cycles.
GC_THRESHOLDS = (50_000, 50, 100)


# The long-lived heap (rooms, sessions, their logs in memory: ~300 KiB a
# table) should not be walked by the collector again and again. Left to
# CPython, it is: a middle pass walks all that tables and clients that
# just joined allocated (1.2 s with 1,200 tables joining on a loaded 2-core
# machine), and every full pass walks all of it (~200 ms over ~500 MB), a
# pause of every room each time. So this often the loop freezes what the
# heap holds (a list splice: no walk), and the passes walk only what came
# after (docs/performance.md,
# "Performance III (issue 36): the collector and capacity"). A young pass
# before each freeze would walk what every command replaced since (the
# rooms' copy-on-write state and answers: 80-350 ms every 2 s at 1,800-
# 2,400 tables), which is why it freezes without one.
FREEZE_SECONDS = 1.0
# Frozen objects are still freed by reference counting, but a cycle among
# them is not: an unloaded room and a closed session leave such cycles (a
# task and its frames, callbacks, back references), and commands leave a
# few (54 objects over 20 joins and 200 commands here). This often the
# frozen heap is thawed and collected whole, once, so that what they left
# is freed: one full pass at this cadence, a bound on what is held.
THAW_SECONDS = 600.0


def thaw() -> None:
    """Collect the whole heap frozen so far, then freeze what survived."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


async def keep_frozen(clock: Clock) -> None:
    """Freeze the heap every FREEZE_SECONDS, `thaw` it every THAW_SECONDS,
    until cancelled."""
    thawed = clock.monotonic()
    while True:
        await clock.sleep(FREEZE_SECONDS)
        if clock.monotonic() - thawed >= THAW_SECONDS:
            thaw()
            thawed = clock.monotonic()
        else:
            gc.freeze()


def tune_gc() -> None:
    """Freeze what start-up allocated (modules, config) out of the collector's
    scans, and collect the young generation less often (GC_THRESHOLDS);
    `serve` then keeps what lives long frozen (`keep_frozen`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


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
    freezer = asyncio.create_task(keep_frozen(srv.clock))
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
                "(the address they reach, e.g. https://vtt.example/): docs/deploy.md"
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
                async with srv.clock.timeout(config.drain_seconds):
                    await stop.wait()
        out.say("vtt-sync shutting down", event="stopping")
    finally:
        freezer.cancel()
        await srv.close()
    return 0
