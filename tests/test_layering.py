"""The direction of dependencies, checked on the source (docs/architecture.md):

- `rules/` imports nothing of ours but itself, and only the standard library
  and attrs: it stays a pure core.
- `sync_server/` never imports `client_stub/` at module level (the CLI
  dispatches `vtt-sync client` to it lazily, inside a function).
- `client_stub/` uses of the server package only the wire modules
  (protocol, codec, limits), and of the rules only the patch vocabulary.
- `bench/` never imports `tests/`.
- No import cycle among the product's modules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rules", "sync_server", "client_stub")
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(*packages: str) -> dict[str, Path]:
    return {module_name(p): p for pkg in packages for p in sorted((ROOT / pkg).rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def top_level_imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Modules imported when `name` is imported: module-level statements
    only (not inside functions, not under `if TYPE_CHECKING`)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                found.add(mod)
                for alias in node.names:
                    if f"{mod}.{alias.name}" in known:
                        found.add(f"{mod}.{alias.name}")
            elif isinstance(node, ast.If) and not _type_checking(node):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules(*PACKAGES, "bench")
    known = set(mods)
    return {name: top_level_imports(path, name, known) for name, path in mods.items()}


def ours(mod: str) -> bool:
    return mod.split(".")[0] in (*PACKAGES, "tests", "bench")


def test_rules_is_a_pure_core() -> None:
    for name, imports in graph().items():
        if not name.startswith("rules"):
            continue
        for mod in imports:
            top = mod.split(".")[0]
            assert top == "rules" or top in STDLIB or top == "attrs", (name, mod)
            assert top not in ("asyncio", "socket", "sqlite3", "time", "random") or (
                name == "rules.dice" and top == "random"
            ), f"{name} imports {mod}: rules has no I/O, clock or global random"


SANS_IO = ("sync_server.core", "sync_server.wire")


def test_the_server_cores_and_the_wire_do_no_io() -> None:
    """`core/` and `wire/` are sans-I/O, as websockets' protocol.py: they
    import neither asyncio nor websockets nor the asyncio side of the server
    (checked on every import, not only module level)."""
    mods = modules("sync_server")
    for name, path in mods.items():
        if not name.startswith(SANS_IO):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found = [node.module or ""]
            else:
                continue
            for mod in found:
                top = mod.split(".")[0]
                assert top not in ("asyncio", "websockets", "socket", "sqlite3", "asyncpg"), (
                    f"{name} imports {mod}: the cores and the wire do no I/O"
                )
                assert not mod.startswith(("sync_server.hosting", "sync_server.ops")), (
                    f"{name} imports {mod}: the cores never reach for the asyncio side"
                )


def test_the_server_does_not_depend_on_the_clients() -> None:
    for name, imports in graph().items():
        if name.startswith("sync_server"):
            assert not any(m.startswith("client_stub") for m in imports), (name, imports)


def test_the_clients_use_only_the_wire_modules_of_the_server() -> None:
    for name, imports in graph().items():
        if name.startswith("client_stub"):
            for mod in imports:
                if mod.startswith("sync_server"):
                    assert mod == "sync_server" or mod.startswith("sync_server.wire"), (name, mod)
                if mod.startswith("rules"):
                    assert mod in ("rules", "rules.patch"), (name, mod)


def test_benchmarks_do_not_import_the_tests() -> None:
    for name, imports in graph().items():
        if name.startswith("bench"):
            assert not any(m.split(".")[0] == "tests" for m in imports), (name, imports)


def test_no_import_cycle() -> None:
    g = {n: {m for m in deps if m in modules(*PACKAGES)} for n, deps in graph().items()}
    # A package's __init__ importing its own submodules is not a cycle of
    # layers; only edges between distinct modules count, parents excluded.
    g = {n: {m for m in deps if not n.startswith(m + ".") and m != n} for n, deps in g.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(g.get(node, ())):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(g):
        if node not in state:
            visit(node)
