"""The PostgreSQL tests never skip: without a server they fail, saying how
to start one (a suite that skipped them would pass while testing nothing
of the cluster's storage)."""

from __future__ import annotations

import os
import subprocess
import sys

from sync_server.testing.postgres import free_port
from sync_server.testing.server import REPO


def test_without_postgresql_the_tests_fail_loudly_with_how_to_start_it() -> None:
    env = {k: v for k, v in os.environ.items() if k != "VTT_SYNC_TEST_DATABASE"}
    env["VTT_SYNC_TEST_PG_ADMIN"] = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
            "tests/server/test_storage_contract.py", "-k", "postgres and version_zero",
        ],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 error" in out and "skipped" not in out, out
    assert "PostgreSQL is required" in out and "pg_ctlcluster" in out, out
