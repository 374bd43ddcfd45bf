"""The README's and docs/http.md's commands run as written, on a fresh copy
of the repository, against a real server.

How each block runs (a block is marked in the Markdown by an HTML comment,
`<!-- doc-test: KIND, prints TEXT -->`, on the line before it; every
command block of the two files has one):

- The README's first line (its first block) runs whole on a fresh copy of
  the working tree (the files git tracks or would track, as a clone has
  them, with their uncommitted changes): `python3 -m venv .venv`, the pip
  install into it (the install is that line's point, so it is not reused:
  about ten seconds with pip's cache), and `serve --demo`, which keeps
  running: it is the server every other block talks to.
- The README's second line is not run (it runs this suite): it is checked
  to be exactly `.ci/run`'s command, and `scripts/install-test-deps` to
  install into `.venv`, whose Python that command runs.
- `run` blocks run with bash in the copy, in order, each after the
  variables the file's earlier blocks set (a reader's terminal keeps
  them); they reuse the copy's `.venv`. `python` blocks run with that
  `.venv`'s Python. `follow` blocks (a stream that never ends) run until
  they print what the marker says, a GM's damage command being sent
  meanwhile, then are stopped. `skip` blocks say why they do not run.

What differs from a reader's machine, and only that: the server listens on
a free port, not 8765 (`VTT_SYNC_PORT=0` for the first line, then
`VTT_SYNC_URL` names it and `127.0.0.1:8765` in a block becomes its
address), and the blocks' placeholders for a token (`<a token>`,
`TOKEN=...`, `$OBSERVER_TOKEN`, the environment's `VTT_SYNC_TOKEN` for the
Python block) are the demo's GM's and observer's tokens. Nothing else of
the environment reaches the blocks' shell (no VTT_SYNC_*, no virtual
environment of the test run).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import textwrap
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from client_stub.cli import main as client_main
from sync_server.testing.server import read_until

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/http.md")
MARKER = re.compile(r"^\s*<!-- doc-test: (\w+)(?:, (.*?))? -->\s*$")
COMMAND_FENCES = ("sh", "bash", "shell", "python")
ASSIGNMENT = re.compile(r"[A-Z_]+=\S*(\s+#.*)?$")  # URL=... # a comment: a reader's variable
LISTENING = re.compile(r"vtt-sync listening on (ws://127\.0\.0\.1:(\d+))")
# Bounds on waiting (never asserted as speeds): lines the first command may
# print before it listens, a block's run, the commands sent while a stream
# is followed.
MAX_START_LINES = 400
BLOCK_SECONDS = 60
MAX_FOLLOW_COMMANDS = 40

pytestmark = [
    pytest.mark.timeout(300),  # the first command installs vtt-sync
    # One worker runs the module: its fixture (the copy, its .venv, its
    # server) is made once, where the test command's workers would each
    # make their own.
    pytest.mark.xdist_group("fresh-checkout"),
]


@attrs.frozen
class Block:
    doc: str
    line: int  # 1-based, the block's first line
    kind: str  # start, run, python, follow, skip
    note: str
    text: str

    @property
    def prints(self) -> str | None:
        return self.note[len("prints ") :] if self.note.startswith("prints ") else None

    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def _block_at(lines: list[str], i: int) -> tuple[int, int, str, str | None]:
    """The block starting at or after line i: (first line, end, text, fence language)."""
    while not lines[i].strip():
        i += 1
    if lines[i].lstrip().startswith("```"):
        lang = lines[i].strip()[3:] or None
        end = i + 1
        while not lines[end].lstrip().startswith("```"):
            end += 1
        return i + 1, end + 1, textwrap.dedent("\n".join(lines[i + 1 : end])), lang
    indent = len(lines[i]) - len(lines[i].lstrip())
    end = i
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) >= indent
    ):
        end += 1
    return i, end, textwrap.dedent("\n".join(lines[i:end])).strip("\n"), None


def blocks(doc: str) -> list[Block]:
    lines = (REPO / doc).read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if m:
            first, _, text, _ = _block_at(lines, i + 1)
            out.append(Block(doc, first + 1, m.group(1), m.group(2) or "", text))
    return out


def command_blocks(doc: str) -> Iterator[tuple[int, str]]:
    """Every block a reader would type: fenced as sh or python, or indented
    by four spaces or more after a blank line (the docs' list items go on at
    three); (its first line, 1-based; the line before it: its marker)."""
    lines = (REPO / doc).read_text(encoding="utf-8").splitlines()
    fenced = indented = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            if not fenced and line.strip()[3:] in COMMAND_FENCES:
                yield i + 1, _previous(lines, i)
            fenced = not fenced
        elif not fenced and line.startswith("    ") and line.strip():
            if not indented and not lines[i - 1].strip():
                yield i + 1, _previous(lines, i)
            indented = True
        elif line.strip():
            indented = False


def _previous(lines: list[str], i: int) -> str:
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return lines[j] if j >= 0 else ""


def test_every_command_block_is_marked_to_run_or_says_why_not() -> None:
    for doc in DOCS:
        start = doc == "README.md"
        for line, before in command_blocks(doc):
            if start:  # the README's first block: the two commands (test below)
                start = False
                assert line <= 4, "the README's first lines are its two commands"
                continue
            assert MARKER.match(before), f"{doc}:{line}: no <!-- doc-test: ... --> before it"
    kinds = {b.kind for doc in DOCS for b in blocks(doc)}
    assert kinds <= {"run", "python", "follow", "skip"}, kinds
    for doc in DOCS:
        for b in blocks(doc):
            assert b.kind != "skip" or b.note, f"{b.where()}: a skipped block says why"
            assert b.kind == "skip" or b.prints, f"{b.where()}: say what it prints"


def first_lines() -> tuple[str, str]:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    _, _, text, _ = _block_at(lines, 1)
    one, two = text.splitlines()
    return one, two


def command_of(line: str) -> str:
    return line.split("  #", 1)[0].strip()


def test_the_readme_test_command_is_what_ci_runs_with_the_venvs_python() -> None:
    one, two = first_lines()
    assert "keeps its terminal" in one
    ci = (REPO / ".ci/run").read_text(encoding="utf-8").splitlines()
    ci_command = [line for line in ci if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert ci_command == [command_of(two)]
    assert command_of(two) == "scripts/install-test-deps && .venv/bin/python -m pytest"
    deps = (REPO / "scripts/install-test-deps").read_text(encoding="utf-8")
    assert "[ -x .venv/bin/python ] || python3 -m venv .venv" in deps
    assert ".venv/bin/python -m pip install" in deps
    assert "python3 -m pip" not in deps  # never the global interpreter
    assert subprocess.run(["bash", "-n", str(REPO / "scripts/install-test-deps")]).returncode == 0


@attrs.define
class Fresh:
    """The copy, its server (the README's first command, still running) and
    the demo's tokens."""

    root: Path
    proc: subprocess.Popen[str]
    url: str
    port: int
    output: str
    tokens: dict[str, str]

    def env(self, **extra: str) -> dict[str, str]:
        return {**clean_env(), "VTT_SYNC_URL": self.url + "/", **extra}

    def substitute(self, text: str) -> str:
        for placeholder, value in {
            "127.0.0.1:8765": f"127.0.0.1:{self.port}",
            "https://example.org/vtt": f"http://127.0.0.1:{self.port}",
            "<a token>": self.tokens["gm"],
            "TOKEN=...": f"TOKEN={self.tokens['gm']}",
            "$OBSERVER_TOKEN": self.tokens["obs"],
        }.items():
            text = text.replace(placeholder, value)
        return text


def clean_env() -> dict[str, str]:
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VTT_SYNC_") and k not in drop}
    return {**env, "PYTHONUNBUFFERED": "1"}


def copy_of_the_tree(dest: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO, capture_output=True, check=True, timeout=60,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        src = REPO / name
        if src.is_file():  # (a file deleted but not yet committed is not copied)
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fresh]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.fail("the doc commands run on a copy of a git checkout: git is needed")
    root = copy_of_the_tree(tmp_path_factory.mktemp("fresh") / "vtt-sync")
    one, _ = first_lines()
    proc = subprocess.Popen(
        ["bash", "-c", one],
        cwd=root,
        env={**clean_env(), "VTT_SYNC_PORT": "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        m, output = read_until(proc, LISTENING, MAX_START_LINES)
        assert m, "the README's first command did not start the server:\n" + "".join(output)
        people = json.loads((root / "vtt-data/demo_tokens.json").read_text(encoding="utf-8"))
        tokens = {key: p["token"] for key, p in people.items()}
        # the rest of its output goes on being read (a full pipe would stall it)
        assert proc.stdout is not None
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield Fresh(root, proc, m.group(1), int(m.group(2)), "".join(output), tokens)
    finally:
        with_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with_group(proc, signal.SIGKILL)
            proc.wait(timeout=30)


def with_group(proc: subprocess.Popen[str], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def test_the_readmes_first_command_installs_and_serves_the_demo(fresh: Fresh) -> None:
    assert (fresh.root / ".venv/bin/vtt-sync").exists()
    links = re.findall(r"(http://127\.0\.0\.1:\d+/)#room=demo&token=(\S+)", fresh.output)
    assert len(links) == 5, fresh.output  # the GM, three players, the observer
    assert {token for _, token in links} == set(fresh.tokens.values())
    page, _ = links[0]
    with urllib.request.urlopen(page, timeout=BLOCK_SECONDS) as r:
        assert r.status == 200 and b"<html" in r.read().lower()


def run_doc(fresh: Fresh, doc: str) -> list[str]:
    """Run `doc`'s blocks in order; what each printed."""
    said = []
    assignments: list[str] = []  # the variables earlier blocks set
    for block in blocks(doc):
        if block.kind == "skip":
            continue
        script = fresh.substitute("\n".join([*assignments, block.text]))
        if block.kind == "python":
            python = str(fresh.root / ".venv/bin/python")
            out = run(fresh, [python, "-c", script], block, VTT_SYNC_TOKEN=fresh.tokens["gm"])
        elif block.kind == "run":
            out = run(fresh, ["bash", "-e", "-c", script], block)
        else:
            out = follow(fresh, script, block)
        assert block.prints in out, f"{block.where()}: expected {block.prints!r} in:\n{out}"
        said.append(out)
        assignments += [line for line in block.text.splitlines() if ASSIGNMENT.match(line)]
    return said


def run(fresh: Fresh, argv: list[str], block: Block, **env: str) -> str:
    done = subprocess.run(
        argv, cwd=fresh.root, env=fresh.env(**env),
        capture_output=True, text=True, timeout=BLOCK_SECONDS,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{block.where()} failed ({done.returncode}):\n{out}"
    return out


def follow(fresh: Fresh, script: str, block: Block) -> str:
    proc = subprocess.Popen(
        ["bash", "-c", script], cwd=fresh.root, env=fresh.env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stream = proc.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    out = ""
    try:
        for _ in range(MAX_FOLLOW_COMMANDS):
            gm = ["cmd", "--url", fresh.url, "--room", "demo", "--token", fresh.tokens["gm"]]
            assert client_main([*gm, "damage", "char=c2", "amount=1"]) == 0
            try:
                while True:
                    out += lines.get(timeout=1)
            except queue.Empty:
                pass
            if block.prints and block.prints in out:
                break
            assert proc.poll() is None, f"{block.where()} ended:\n{out}"
    finally:
        with_group(proc, signal.SIGTERM)
        proc.wait(timeout=BLOCK_SECONDS)
    return out


def test_the_readmes_blocks_run_as_written(fresh: Fresh) -> None:
    said = run_doc(fresh, "README.md")
    assert len(said) >= 3


def test_the_http_docs_blocks_run_as_written(fresh: Fresh) -> None:
    said = run_doc(fresh, "docs/http.md")
    assert len(said) >= 5
