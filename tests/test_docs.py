"""The repository stands alone: no file points outside it, and every link of
its Markdown files leads to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIP = {".git", ".venv", "vtt-data", "test-artifacts", "__pycache__", ".pytest_cache",
        ".ruff_cache", ".hypothesis", "build", "node_modules", ".mypy_cache"}  # fmt: skip
TEXT = {".md", ".py", ".js", ".html", ".css", ".json", ".toml", ".txt", ""}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def repo_files() -> list[Path]:
    out = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        if any(part in SKIP or part.endswith(".egg-info") for part in rel.parts):
            continue
        if path.is_file() and path.suffix in TEXT:
            out.append(path)
    return out


def test_no_file_points_outside_the_repository() -> None:
    outside = ".." + "/shared"  # (spelled so that this file does not match itself)
    found = [
        str(p.relative_to(REPO))
        for p in repo_files()
        if outside in p.read_text(encoding="utf-8", errors="replace")
        or "/work/" + "shared" in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert found == []


def test_markdown_links_lead_to_files_of_the_repository() -> None:
    broken = []
    for md in [p for p in repo_files() if p.suffix == ".md"]:
        for target in LINK.findall(md.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (md.parent / target.split("#", 1)[0]).resolve()
            if not path.exists() or REPO not in path.parents:
                broken.append(f"{md.relative_to(REPO)}: {target}")
    assert broken == []


NUMBERS = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
]  # fmt: skip


def test_the_architecture_counts_the_storage_methods_right() -> None:
    """docs/architecture.md says how many methods a storage backend
    implements: the `Storage` protocol's own count (a method added or
    removed there changes the sentence too)."""
    import ast

    tree = ast.parse((REPO / "sync_server/storage/base.py").read_text(encoding="utf-8"))
    (storage,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Storage"]
    methods = [n for n in storage.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    text = (REPO / "docs/architecture.md").read_text(encoding="utf-8")
    said = re.search(r"the `Storage` protocol \((\w+) methods", text)
    assert said is not None, "docs/architecture.md no longer counts the Storage methods"
    assert said.group(1) == NUMBERS[len(methods)], (said.group(1), [m.name for m in methods])


# The pages a GM, a player or a host reads speak of tables, players and what
# they see; the design's words live in docs/architecture.md.
USER_PAGES = ("README.md", "docs/deploy.md", "docs/http.md", "docs/operations.md",
              "docs/views.md", "docs/security.md")  # fmt: skip
JARGON = re.compile(r"sans-I/O|view class|fencing|\bfenced\b|\bissues? \d+", re.I)
# `affordances` is a setting's and a state field's name: only as that, in backticks.
BARE_AFFORDANCES = re.compile(r"(?<!`)\baffordances?\b(?!`)", re.I)


def test_user_pages_speak_without_the_designs_jargon() -> None:
    found = []
    for page in USER_PAGES:
        for n, line in enumerate((REPO / page).read_text(encoding="utf-8").splitlines(), 1):
            if JARGON.search(line) or BARE_AFFORDANCES.search(line):
                found.append(f"{page}:{n}: {line.strip()}")
    assert found == []
