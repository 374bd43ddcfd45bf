"""Runs the JavaScript test suites with Node's own runner (`node --test`), so
that the one test command runs every suite: the browser client's checks
against the protocol vectors (tests/js) and the Foundry module's suite
against a real server (foundry/test). Node 20 or later is part of the test
setup (scripts/install-test-deps); without it this test fails and says so,
rather than skipping.

One test per file: node's runner would take the files one at a time on a
2-core machine (its concurrency is the cores less one), and the Foundry
suite alone is half a minute; as separate tests, the test command's
workers share them out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


SUITES = ("tests/js", "foundry/test")


def node() -> str:
    found = shutil.which("node")
    assert found, "node is not installed: run scripts/install-test-deps"
    version = subprocess.run([found, "--version"], capture_output=True, text=True).stdout
    assert int(version.strip().lstrip("v").split(".")[0]) >= 20, f"Node {version} < 20"
    return found


def with_this_python() -> dict[str, str]:
    """The environment, with this interpreter's directory first on PATH: the
    suites start `python3 -m sync_server` and `python3 foundry/build.py`
    (foundry/test/server.mjs, manifest.test.mjs), which must be the Python
    running the tests (.venv's, where the project is installed), never a
    global one without it."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}


# One file of the Foundry module's suite runs tsc --strict over Foundry's
# type definitions, others live tests against real servers: a file may take
# over a minute on a busy two-core machine, past pytest's default 120 s.
FILE_TIMEOUT_S = 300


def suite_files(suite: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / suite).glob("*.test.mjs"))


@pytest.mark.parametrize("suite", SUITES)
def test_each_suite_has_tests(suite: str) -> None:
    assert suite_files(suite), f"no tests in {suite}"


@pytest.mark.timeout(FILE_TIMEOUT_S + 30)
@pytest.mark.parametrize("file", [f for suite in SUITES for f in suite_files(suite)])
def test_each_javascript_test_file_passes(file: str) -> None:
    # Node 20's WebSocket (the browser API the clients use) is behind a flag.
    run = subprocess.run(
        [node(), "--experimental-websocket", "--test", file],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=FILE_TIMEOUT_S,
        env=with_this_python(),
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
