"""`vtt-sync serve --workers N`: one machine, every core.

A server process uses one core. With `--workers N`, `serve` supervises N
server processes on the same data, each a node of a cluster as in
docs/cluster.md: each room is served by one of them at a time (a lease in
the database: the SQLite file itself, cluster/sqlite_leases.py, or
PostgreSQL's), a hello for a room another worker serves is answered with a
`redirect` to that worker's own port, and the clients follow it. Nothing
here is new machinery: leases, fencing, redirects and drains are the
cluster's; the supervisor only starts, restarts and stops processes.

The supervisor
- holds the data directory's lock (one supervisor per directory, as one
  server) and hands it down to its workers: a flock belongs to the open
  file, so the lock holds while any of them lives, and no independent
  server can start beside workers whose supervisor was killed;
- makes the admin token once (the first start), for every worker;
- binds the port users open (`--port`) and hands the listening socket to
  every worker: the kernel gives each new connection to one of them, and
  the worker that gets a hello claims the room, or redirects it to the
  worker that holds it;
- starts worker i on a port of its own (`--port` + 1 + i, a free one with
  `--port 0`) with node id `BASE/wI` (BASE: `--node-id`, else HOST:PORT of
  the shared port), stable across restarts, and the public URL of its own
  port (`--public-url` with that port, else the address bound);
- restarts a worker that dies: under the same node id it takes its rooms
  back at once (another worker's hello would take them after the lease);
- on SIGTERM or SIGINT drains every worker (each releases its rooms and
  closes its sessions with 1012, as a node does) and waits for them;
  forwards SIGHUP (TLS reload).

A worker is `python -m sync_server.ops.workers`: its settings come pickled
on its stdin from the supervisor (no secret on a command line), it writes
its URL to a pipe once it listens, and it stops if its supervisor is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import socket
import sys
import urllib.parse
from typing import Any

import attrs

from sync_server.clock import Clock, SystemClock
from sync_server.core.auth import WeakAdminToken, load_admin_token
from sync_server.core.limits import (
    WORKER_HEALTHY_SECONDS,
    WORKER_ORPHAN_CHECK_SECONDS,
    WORKER_RESTART_MAX_SECONDS,
    WORKER_RESTART_SECONDS,
    WORKER_START_SECONDS,
    WORKERS_LISTEN_BACKLOG,
)
from sync_server.hosting.config import Config
from sync_server.observe import logs
from sync_server.ops import settings
from sync_server.ops.serving import run, serve, tune_gc
from sync_server.storage import StorageError
from sync_server.storage.datadir import DataDirLock

log = logging.getLogger("sync_server.workers")

# A worker's own watch on its supervisor (orphaned) reads the clock port.
CLOCK: Clock = SystemClock()

WORKER_MODULE = "sync_server.ops.workers"


@attrs.frozen
class WorkerSpec:
    """What the supervisor hands a worker (pickled on its stdin)."""

    index: int
    config: Config
    demo: bool
    log_level: str
    log_format: str
    ready_fd: int  # the worker writes its URL there once it listens
    supervisor: int  # pid: the worker stops when its parent is no longer it


def _with_port(url: str, port: int) -> str:
    """`url` with `port` instead of its own (a worker's public URL)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return urllib.parse.urlunsplit((parts.scheme, f"{host}:{port}", parts.path or "/", "", ""))


def worker_configs(
    config: Config, shared_port: int, n: int, lock_fd: int, listen_fd: int
) -> list[Config]:
    """Each worker's config: its own port, node id and public URL, the
    supervisor's lock and listening socket."""
    base = config.node_id or f"{socket.gethostname()}:{shared_port}"
    configs = []
    for i in range(n):
        port = 0 if config.port == 0 else config.port + 1 + i
        public_url = None if config.public_url is None else _with_port(config.public_url, port)
        configs.append(
            attrs.evolve(
                config,
                port=port,
                node_id=f"{base}/w{i}",
                public_url=public_url,
                worker_leases=True,
                lock_fd=lock_fd,
                listen_fd=listen_fd,
            )
        )
    return configs


def check(config: Config, n: int) -> None:
    """Refuse, before anything starts, what workers cannot do."""
    if config.port != 0 and config.port + n > 65535:
        raise settings.SettingError(
            f"--workers {n} needs the ports {config.port}-{config.port + n} (one per worker)"
        )
    if config.host in ("0.0.0.0", "::", "") and config.public_url is None:
        raise settings.SettingError(
            f"--workers listening on every interface ({config.host}) needs --public-url: "
            "the address clients reach this machine at (each worker's port replaces its port)"
        )
    if config.public_url is not None and config.port == 0:
        raise settings.SettingError("--workers with --public-url needs a fixed --port")


def listen(host: str, port: int) -> socket.socket:
    """The socket every worker accepts on."""
    family = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0][0]
    return socket.create_server((host, port), family=family, backlog=WORKERS_LISTEN_BACKLOG)


# --- the supervisor -------------------------------------------------------------


@attrs.define
class _Worker:
    index: int
    config: Config
    proc: asyncio.subprocess.Process | None = None
    url: str | None = None
    started: float = 0.0
    restarts: int = 0


class Supervisor:
    """Starts, restarts and stops the workers (see the module docstring)."""

    def __init__(
        self,
        configs: list[Config],
        port: int,
        demo: bool,
        resolved: settings.Resolved,
        out: logs.Output,
        clock: Clock | None = None,
    ) -> None:
        # The supervisor's waits and restart pacing (a worker's start, its
        # back-off, the drain at stop) read the clock port too.
        self.clock = clock or SystemClock()
        self.port = port  # the shared one
        self.workers = [_Worker(i, c) for i, c in enumerate(configs)]
        self.demo = demo
        self.resolved = resolved
        self.out = out
        self.stopping = asyncio.Event()

    async def _spawn(self, w: _Worker) -> str:
        """Start worker `w`; its URL once it listens. Raises RuntimeError if
        it exits first or does not listen in time."""
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        config = w.config
        spec = WorkerSpec(
            w.index,
            config,
            self.demo and w.index == 0 and w.restarts == 0,
            self.resolved["log_level"],
            self.resolved["log_format"],
            write_fd,
            os.getpid(),
        )
        fds = [write_fd] + [fd for fd in (config.lock_fd, config.listen_fd) if fd is not None]
        try:
            w.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                WORKER_MODULE,
                stdin=asyncio.subprocess.PIPE,
                pass_fds=fds,
                # Its own session: a Ctrl-C reaches the supervisor only, which
                # drains the workers (once each).
                start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        w.started = self.clock.monotonic()
        assert w.proc.stdin is not None
        w.proc.stdin.write(pickle.dumps(spec))
        w.proc.stdin.close()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0)
        )
        try:
            async with self.clock.timeout(WORKER_START_SECONDS):
                line = await reader.readline()
        except TimeoutError:
            line = b""
        finally:
            transport.close()  # closes read_fd
        if not line.strip():
            with contextlib.suppress(ProcessLookupError):
                w.proc.kill()
            rc = await w.proc.wait()
            raise RuntimeError(f"worker {w.index} did not start (exit status {rc})")
        w.url = line.decode().strip()
        return w.url

    async def _watch(self, w: _Worker, first: asyncio.Future[str]) -> None:
        """Keep worker `w` running until the supervisor stops."""
        delay = WORKER_RESTART_SECONDS
        while not self.stopping.is_set():
            try:
                url = await self._spawn(w)
            except RuntimeError as exc:
                if not first.done():
                    first.set_exception(exc)
                    return
                log.error("%s", exc)
            else:
                if not first.done():
                    first.set_result(url)
                elif w.proc is not None:
                    log.warning("worker %d restarted (pid %d) at %s", w.index, w.proc.pid, url)
                assert w.proc is not None
                rc = await w.proc.wait()
                if self.stopping.is_set():
                    return
                ran = self.clock.monotonic() - w.started
                delay = WORKER_RESTART_SECONDS if ran >= WORKER_HEALTHY_SECONDS else delay
                log.error(
                    "worker %d (pid %d) exited with status %s after %.1f s; restarting in %g s",
                    w.index,
                    w.proc.pid,
                    rc,
                    ran,
                    delay,
                )
            w.restarts += 1
            with contextlib.suppress(TimeoutError):
                async with self.clock.timeout(delay):
                    await self.stopping.wait()
            delay = min(delay * 2, WORKER_RESTART_MAX_SECONDS)

    def _signal(self, sig: int) -> None:
        for w in self.workers:
            if w.proc is not None and w.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    w.proc.send_signal(sig)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.set)
        loop.add_signal_handler(signal.SIGHUP, self._signal, signal.SIGHUP)
        firsts = [loop.create_future() for _ in self.workers]
        watchers: list[asyncio.Task[None]] = []
        try:
            try:
                # Worker 0 first: it creates (or migrates) the database, which
                # the others would otherwise find half made.
                watchers.append(loop.create_task(self._watch(self.workers[0], firsts[0])))
                await firsts[0]
                watchers += [
                    loop.create_task(self._watch(w, f))
                    for w, f in zip(self.workers[1:], firsts[1:], strict=True)
                ]
                urls = await asyncio.gather(*firsts)
            except RuntimeError as exc:
                self.out.error(f"vtt-sync: {exc}")
                return 2
            for w, url in zip(self.workers, urls, strict=True):
                pid = w.proc.pid if w.proc is not None else "?"
                self.out.say(f"  worker {w.index}: node {w.config.node_id}, pid {pid}, at {url}")
            shared = self.shared_url()
            self.out.say(
                f"vtt-sync listening on {shared} ({len(self.workers)} workers)",
                event="listening",
                url=shared,
                workers=urls,
            )
            await self.stopping.wait()
            self.out.say("vtt-sync shutting down: draining every worker", event="stopping")
        finally:
            self.stopping.set()
            await self._stop(watchers)
        return 0

    def shared_url(self) -> str:
        config = self.workers[0].config
        host = config.host
        if ":" in host:
            host = f"[{host}]"
        scheme = "wss" if config.tls_cert is not None else "ws"
        return f"{scheme}://{host}:{self.port}"

    async def _stop(self, watchers: list[asyncio.Task[None]]) -> None:
        """SIGTERM to every worker (each drains), then wait for them: at
        most their drain plus a margin, then SIGKILL."""
        self._signal(signal.SIGTERM)
        config = self.workers[0].config
        bound = config.drain_seconds + 2 * config.limits.shutdown_drain_seconds + 10
        procs = [w.proc for w in self.workers if w.proc is not None]
        try:
            async with self.clock.timeout(bound):
                await asyncio.gather(*(p.wait() for p in procs))
        except TimeoutError:
            log.error("workers still running %g s after SIGTERM: killed", bound)
            self._signal(signal.SIGKILL)
            await asyncio.gather(*(p.wait() for p in procs))
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)


def supervise(
    config: Config, resolved: settings.Resolved, out: logs.Output, redact: logs.Redact
) -> int:
    """`serve --workers N`: the supervisor's life; the exit status."""
    n = resolved["workers"]
    try:
        check(config, n)
    except settings.SettingError as exc:
        out.error(f"vtt-sync: {exc}")
        return 2
    lock = DataDirLock(config.data_dir)
    try:
        try:
            config.data_dir.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except OSError as exc:
            raise StorageError(f"cannot use the data directory {config.data_dir}: {exc}") from exc
        try:
            # Made once, here, rather than raced for by the workers.
            token, generated = load_admin_token(config.data_dir, config.admin_token)
            redact.add(token)
            if generated:
                where = config.data_dir / "admin_token"
                if out.json:
                    out.say(f"admin token generated; read it in {where} (mode 0600)")
                else:
                    print(f"admin token (generated, shown once; stored in {where}):")
                    print(f"  {token}", flush=True)
            try:
                sock = listen(config.host, config.port)
            except OSError as exc:
                out.error(f"vtt-sync: cannot listen on {config.host}:{config.port}: {exc}")
                return 2
            try:
                assert lock.fd is not None
                port = sock.getsockname()[1]
                supervisor = Supervisor(
                    worker_configs(config, port, n, lock.fd, sock.fileno()),
                    port,
                    resolved["demo"],
                    resolved,
                    out,
                )
                return asyncio.run(supervisor.run())
            finally:
                sock.close()
        finally:
            lock.release()
    except (StorageError, WeakAdminToken) as exc:
        out.error(f"vtt-sync: {exc}")
        return 2
    except KeyboardInterrupt:
        return 130


# --- a worker -------------------------------------------------------------------


def worker_main() -> int:
    """A worker's life: read its spec, serve until told to stop (or until
    the supervisor is gone)."""
    spec: WorkerSpec = pickle.load(sys.stdin.buffer)
    sys.stdin.close()
    out = logs.Output(spec.log_format)
    redact = logs.setup(spec.log_level, spec.log_format)
    if spec.config.admin_token:
        redact.add(spec.config.admin_token)
    out.redact = redact
    tasks: set[asyncio.Task[None]] = set()

    async def orphaned(stop: asyncio.Event) -> None:
        while os.getppid() == spec.supervisor:
            await CLOCK.sleep(WORKER_ORPHAN_CHECK_SECONDS)
        log.error("worker %d: the supervisor is gone; stopping", spec.index)
        stop.set()

    def ready(srv: Any, stop: asyncio.Event) -> None:
        os.write(spec.ready_fd, f"{srv.url}\n".encode())
        os.close(spec.ready_fd)
        tasks.add(asyncio.get_running_loop().create_task(orphaned(stop)))

    tune_gc()
    try:
        return run(spec.config, serve(spec.config, spec.demo, out, redact, worker=ready))
    except (StorageError, WeakAdminToken, settings.SettingError) as exc:
        out.error(f"vtt-sync worker {spec.index}: {exc}")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(worker_main())
