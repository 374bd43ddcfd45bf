"""Runs the JavaScript test suites with Node's own runner (`node --test`):
the browser client's checks against the protocol vectors. Node 20 is part of
the test setup (scripts/install-test-deps); without it this test fails and
says so, rather than skipping."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_javascript_suites_pass() -> None:
    node = shutil.which("node")
    assert node, "node is not installed: run scripts/install-test-deps"
    suites = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "js").glob("*.test.mjs"))
    assert suites
    run = subprocess.run(
        [node, "--test", *suites], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
