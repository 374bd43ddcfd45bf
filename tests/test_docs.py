"""The repository stands alone: no file points outside it, and every link of
its Markdown files leads to a file of the repository."""

from __future__ import annotations

import functools
import os
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


# --- files and sections that comments and docs name -------------------------------

# A file name as prose cites it: a path or a bare name with a source or doc suffix.
CITED = re.compile(r"(?<![\w./@:$-])((?:[\w-]+/)*[\w-]+\.(?:py|md|mjs|js|toml|css|html))(?![\w/-])")
# Files of other projects or of a reader's own, which the repository does not
# hold: h11's state machine (a model, docs/architecture.md) and its
# connection (the 431 it answers: tests/server/test_http_statuses.py), the Foundry
# system's sources the module is modelled on (foundry/README.md), the older
# tree an A/B benchmark is pointed at, an operator's own settings file.
# Foundry's own client and common code, and the sfrpg and pf1 sources, that
# the Foundry module and its stand-in cite (foundry/README.md, "The stand-in's
# rules, and the source each follows").
FOUNDRY_SOURCES = ("client/", "common/", "sheet/base.js", "actor-pf.mjs",
                   "actor-conditions.js", "client-backend.mjs")  # fmt: skip
ELSEWHERE = (
    *FOUNDRY_SOURCES,
    "_state.py",
    "h11/_connection.py",
    "src/module/",
    "OLD/",
    "config.toml",
    "vtt.toml",
)
# A section cited as `docs/<page>.md, "<heading>"` (the heading's beginning).
SECTION = re.compile(r"docs/([\w-]+)\.md, \"([^\"]+)\"")


def _python_prose(path: Path) -> str:
    """A Python file's comments and docstrings (not its code: a test may
    well spell a name that must not exist)."""
    import ast
    import io
    import tokenize

    source = path.read_text(encoding="utf-8")
    parts = [
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            parts.append(ast.get_docstring(node, clean=False) or "")
    return "\n".join(parts)


@functools.cache
def _prose(path: Path) -> str:
    """What a reader reads as prose in a file: comments, docstrings, Markdown
    outside its code blocks."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        return _python_prose(path)
    if path.suffix == ".md":
        return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    if path.suffix in (".js", ".mjs"):
        return "\n".join(re.findall(r"//[^\n]*|/\*.*?\*/", text, flags=re.S))
    if path.suffix == ".toml":
        return "\n".join(re.findall(r"#[^\n]*", text))
    return ""


def _tree() -> list[Path]:
    """Every file and folder of the repository (installed packages aside)."""
    out = []
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.endswith(".egg-info")]
        out += [Path(folder, name) for name in dirs + files]
    return out


@functools.cache
def _prose_files() -> list[Path]:
    skip = ("tests/fixtures/", "CHANGELOG.md")  # data, and history naming what was
    return [
        p
        for p in _tree()
        if p.suffix in (".py", ".md", ".js", ".mjs", ".toml")
        and p.is_file()
        and not str(p.relative_to(REPO)).startswith(skip)
    ]


def test_comments_and_docs_name_files_that_exist() -> None:
    """Every file a comment, docstring or page names exists: as a path from
    the repository's root or from the citing file's folder, or, written
    bare, as some file of the repository (no name left behind by a
    rename)."""
    every = _tree()
    paths = {str(p.relative_to(REPO)) for p in every}
    names = {p.name for p in every}
    missing = []
    seen = 0
    for path in _prose_files():
        for cited in CITED.findall(_prose(path)):
            seen += 1
            if cited.startswith(ELSEWHERE) or cited in paths or (path.parent / cited).exists():
                continue
            if "/" not in cited and cited in names:
                continue
            if any(p.endswith("/" + cited) for p in paths):  # a path inside a package
                continue
            missing.append(f"{path.relative_to(REPO)}: {cited}")
    assert missing == []
    assert seen > 500  # it reads the citations (a broken pattern would find none)


def test_sections_cited_exist() -> None:
    """`docs/protocol.md, "Refusals"` names a heading of that page (its
    beginning): the contracts are cited as the repository's own pages."""
    headings: dict[str, list[str]] = {}
    for md in (REPO / "docs").glob("*.md"):
        found = re.findall(r"^#+ (.+)$", md.read_text(encoding="utf-8"), flags=re.M)
        headings[md.stem] = [h.strip().strip("`") for h in found]
    wrong = []
    for path in _prose_files():
        for page, section in SECTION.findall(_prose(path)):
            if not any(h.startswith(section) for h in headings.get(page, [])):
                wrong.append(f"{path.relative_to(REPO)}: docs/{page}.md, {section!r}")
    assert wrong == []
    assert sum(len(SECTION.findall(_prose(p))) for p in _prose_files()) > 50  # it reads them
