"""The static checks, in the one test command: ruff (lint and format), mypy
(pyproject's [tool.mypy]: default settings on the product, strict on the pure
cores), for the browser client and the page `tsc --checkJs`, and eslint over
the browser client, the page and the Foundry module with its tests
(eslint.config.mjs; package.json at the top, installed by
scripts/install-test-deps with `npm ci`; the Foundry module's own
`tsc --checkJs --strict` is foundry/test/types.test.mjs). Each fails with
the checker's own report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NODE_BIN = ROOT / "node_modules" / ".bin"
# What tsc and eslint keep between runs (mypy and ruff keep theirs in
# .mypy_cache and .ruff_cache): each checks again only the files that
# changed. Under node_modules, so that `npm ci` (new tools) starts afresh.
JS_CACHE = ROOT / "node_modules" / ".cache" / "vtt-sync"


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_lint_and_format() -> None:
    # The ruff of the Python running the tests (.venv's: `.venv/bin/python -m
    # pytest` puts nothing on PATH), as mypy below.
    ruff = (sys.executable, "-m", "ruff")
    assert run(*ruff, "--version").returncode == 0, "no ruff: run scripts/install-test-deps"
    lint = run(*ruff, "check", ".")
    assert lint.returncode == 0, lint.stdout[-6000:]
    fmt = run(*ruff, "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout[-6000:]


def test_mypy_finds_no_error() -> None:
    checked = run(sys.executable, "-m", "mypy")
    assert checked.returncode == 0, checked.stdout[-8000:] + checked.stderr[-2000:]


def node_tool(name: str) -> str:
    tool = NODE_BIN / name
    assert tool.exists(), f"{tool} is missing: run scripts/install-test-deps (npm ci)"
    return str(tool)


def test_the_browser_client_type_checks() -> None:
    tsc = node_tool("tsc")
    built = JS_CACHE / "tsconfig.tsbuildinfo"
    checked = run(tsc, "-p", "tsconfig.json", "--incremental", "--tsBuildInfoFile", str(built))
    assert checked.returncode == 0, checked.stdout[-8000:]


LINTED = ("client_stub/web", "foundry/scripts", "foundry/test", "foundry/tools")


def test_the_browser_client_and_the_foundry_module_lint() -> None:
    eslint = node_tool("eslint")
    linted = run(eslint, "--cache", "--cache-location", str(JS_CACHE / "eslint"), *LINTED)
    assert linted.returncode == 0, linted.stdout[-8000:]
