"""PostgreSQL for tests and benchmarks: throwaway databases on the shared
server, and throwaway clusters of one's own.

- `admin_dsn()`: where to create databases: $VTT_SYNC_TEST_PG_ADMIN, or the
  local server's `postgres` database (127.0.0.1:5432, trust auth).
- `create_database(admin)` / `drop_database(admin, name)`: a fresh database
  named vtt_sync_test_<random> (dropped with FORCE: a test that failed may
  leave a connection open).
- `empty_tables(dsn)`: every row of vtt-sync's tables gone, the schema kept
  (between tests sharing one database).
- `LocalCluster`: a PostgreSQL of the test's own (initdb + pg_ctl in a temp
  directory, a free port on 127.0.0.1), for tests that stop it (`stop()`
  with `pg_ctl -m immediate`: a crash) and start it again. Never the shared
  server. As root it runs the binaries as the `postgres` OS user (initdb
  refuses root).
- `UNREACHABLE`: the message a fixture fails with when no server answers.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import asyncpg

from sync_server.clock import Clock, SystemClock
from sync_server.storage.pg_schema import DATA_TABLES

# A database starting up is waited for in real time, through the clock port,
# asking again every READY_POLL_SECONDS (a start takes a few hundred ms).
CLOCK: Clock = SystemClock()
READY_POLL_SECONDS = 0.05

PG_BIN = Path(os.environ.get("VTT_SYNC_PG_BIN", "/usr/lib/postgresql/15/bin"))
DEFAULT_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"

# Seconds to wait for a server to accept connections after pg_ctl start
# (crash recovery included).
START_TIMEOUT = 30

UNREACHABLE = (
    "PostgreSQL is required by these tests and is not reachable at {where} ({error}). "
    "Start the local server (`pg_ctlcluster --skip-systemctl-redirect 15 main start`, "
    "or run scripts/install-test-deps, which starts it), or point the tests at one: "
    "VTT_SYNC_TEST_PG_ADMIN=postgresql://USER@HOST:PORT/postgres (to create a database "
    "per run) or VTT_SYNC_TEST_DATABASE=postgresql://... (a database to use as is; "
    "its vtt-sync tables are emptied)."
)


def admin_dsn() -> str:
    return os.environ.get("VTT_SYNC_TEST_PG_ADMIN", DEFAULT_ADMIN_DSN)


def with_database(dsn: str, name: str) -> str:
    """The same server, another database."""
    base, _, _ = dsn.rpartition("/")
    return f"{base}/{name}"


async def create_database(admin: str | None = None) -> tuple[str, str]:
    """A new empty database: (its DSN, its name)."""
    admin = admin or admin_dsn()
    name = f"vtt_sync_test_{secrets.token_hex(6)}"
    conn = await asyncpg.connect(admin, timeout=10)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return with_database(admin, name), name


async def drop_database(name: str, admin: str | None = None) -> None:
    conn = await asyncpg.connect(admin or admin_dsn(), timeout=10)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def empty_tables(dsn: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        if await conn.fetchval("SELECT to_regclass('rooms') IS NOT NULL"):
            await conn.execute(f"TRUNCATE {', '.join(DATA_TABLES)}")
    finally:
        await conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """A throwaway PostgreSQL server: `init()` once, then `start()`,
    `stop(mode)`, `start()` again..., `destroy()` at the end."""

    def __init__(self) -> None:
        for tool in ("initdb", "pg_ctl"):
            if not (PG_BIN / tool).exists():
                raise RuntimeError(
                    f"{PG_BIN / tool} is missing: install PostgreSQL 15's server package "
                    "(apt-get install postgresql-15, which scripts/install-test-deps does) "
                    "or set VTT_SYNC_PG_BIN"
                )
        self.root = Path(tempfile.mkdtemp(prefix="vtt-sync-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")

    def _run(self, tool: str, *args: str, timeout: float = 60) -> None:
        cmd = [str(PG_BIN / tool), *args]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed: {done.stdout}{done.stderr}\n{tail}")

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        conf = (
            f"port = {self.port}\n"
            "listen_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.root}'\n"
            "max_connections = 40\n"
            "shared_buffers = 16MB\n"
        )
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(conf)

    def start(self) -> None:
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w",
            "-t", str(START_TIMEOUT), "start",
            timeout=START_TIMEOUT + 10,
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """`immediate` is a crash: every server process quits at once, no
        checkpoint; the next start recovers from the WAL."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


async def wait_ready(dsn: str, timeout: float = START_TIMEOUT) -> None:
    """Until the server accepts a query (it may still be recovering)."""
    async with CLOCK.timeout(timeout):
        while True:
            try:
                conn = await asyncpg.connect(dsn, timeout=2)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                await CLOCK.sleep(READY_POLL_SECONDS)
                continue
            await conn.close()
            return
