"""The direction of dependencies, checked on the source (docs/architecture.md
draws the same layers):

- every package of the product has a rank (`LAYERS`, top to bottom), and
  every import, wherever it stands in a module (in a function, under
  `if TYPE_CHECKING`, in a `try`), points to a lower layer or stays in its
  own package: no arrow runs up or sideways;
- no import cycle among the product's modules, function-level imports
  included;
- `rules/` imports nothing of ours but itself, and only the standard
  library and attrs: it stays a pure core;
- `core/` and `wire/` do no I/O;
- the server never imports the clients; `client_stub/` uses of the server
  package only the wire modules, and of the rules only the patch vocabulary
  (and the op reference, which `vtt-sync client ops` prints);
- `bench/` never imports `tests/`.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rules", "sync_server", "client_stub", "vtt_sync")
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

# The product's packages, top to bottom: a module may import what stands in
# a lower layer, and its own package. Two packages of one layer know nothing
# of each other. A module belongs to the longest name here that prefixes it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # The `vtt-sync` command (the server's CLI and the client's), and the
    # benchmarks, which drive servers and clients.
    ("vtt_sync", "bench"),
    # The clients (the server never imports them), and `python -m
    # sync_server`.
    ("client_stub", "sync_server.__main__"),
    # What an operator runs (serve, workers, admin, demo), and the helpers
    # shipped for tests: both drive a whole server.
    ("sync_server.ops", "sync_server.testing"),
    # `sync_server.Server` and `.Config`, loaded on first use.
    ("sync_server",),
    # The asyncio side: the composition root (which also builds the leases),
    # rooms, sessions, bus, HTTP.
    ("sync_server.hosting",),
    # Who serves a room: leases, built on the storage backends' databases.
    ("sync_server.cluster",),
    # The Storage interface, its backends, replay, the room file.
    ("sync_server.storage",),
    # The sans-I/O cores (room, session, views, the records storage keeps),
    # and observability (metrics, activity lines, log formats).
    ("sync_server.core", "sync_server.observe"),
    # What crosses a socket.
    ("sync_server.wire",),
    # The ground: the rules, the clock port, the version.
    ("rules", "sync_server.clock", "sync_server.version"),
)
RANK = {unit: len(LAYERS) - i for i, layer in enumerate(LAYERS) for unit in layer}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(*packages: str) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in packages:
        if (ROOT / pkg).is_dir():
            found.update({module_name(p): p for p in sorted((ROOT / pkg).rglob("*.py"))})
        elif (ROOT / f"{pkg}.py").is_file():
            found[pkg] = ROOT / f"{pkg}.py"
    return found


def every_import(path: Path, name: str, known: set[str]) -> Iterator[tuple[str, int]]:
    """(module imported, line) for every import statement of the module,
    wherever it stands: the whole syntax tree is walked."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod, node.lineno
            for alias in node.names:  # `from package import module`
                if f"{mod}.{alias.name}" in known:
                    yield f"{mod}.{alias.name}", node.lineno


def graph() -> dict[str, dict[str, int]]:
    """Every product and benchmark module -> {module it imports: line}."""
    mods = modules(*PACKAGES, "bench")
    known = set(mods)
    out: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        edges: dict[str, int] = {}
        for mod, line in every_import(path, name, known):
            edges.setdefault(mod, line)
        out[name] = edges
    return out


def unit_of(mod: str) -> str | None:
    """The package of `LAYERS` a module belongs to (None: not ours)."""
    parts = mod.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in RANK:
            return ".".join(parts[:n])
    return None


def arrows_not_down(g: dict[str, dict[str, int]]) -> list[tuple[str, str, int]]:
    """(importer, imported, line) for each import between two packages of
    `LAYERS` that does not point to a lower layer."""
    found = []
    for name, edges in g.items():
        here = unit_of(name)
        for mod, line in edges.items():
            there = unit_of(mod)
            if here is None or there is None or here == there:
                continue
            if RANK[there] >= RANK[here]:
                found.append((name, mod, line))
    return sorted(found)


def cycles(g: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import cycles among the product's modules: the strongly connected
    components of more than one module (Tarjan). An import of a module's own
    enclosing package is left out: a package's __init__ re-exporting its
    submodules is not a cycle of layers."""
    known = set(g)
    edges = {
        n: sorted(m for m in deps if m in known and m != n and not n.startswith(m + "."))
        for n, deps in g.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_every_package_has_a_rank() -> None:
    unranked = sorted(name for name in graph() if unit_of(name) is None)
    assert not unranked, f"modules of no layer (add their package to LAYERS): {unranked}"


def test_every_arrow_points_down() -> None:
    found = arrows_not_down(graph())
    assert not found, "imports that do not point to a lower layer:\n" + "\n".join(
        f"  {name} (line {line}) imports {mod}: {unit_of(name)} -> {unit_of(mod)}"
        for name, mod, line in found
    )


def test_no_import_cycle() -> None:
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join("  " + " <-> ".join(c) for c in found)


def test_the_architecture_page_draws_these_layers() -> None:
    """docs/architecture.md's drawing of the layers names the packages of
    `LAYERS`, in the same layers and order (`sync_server.` left out)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("The layers, top to bottom", 1)[1].split("```")[1]
    drawn = []
    for line in block.strip("\n").splitlines():
        if line.startswith("  "):  # a description running on
            continue
        names = line.strip().split("  ", 1)[0]
        drawn.append(tuple(n.strip() for n in names.split(",")))

    def short(unit: str) -> str:
        if unit == "sync_server":
            return "sync_server (its __init__)"
        if unit == "sync_server.__main__":
            return unit
        return unit.removeprefix("sync_server.")

    assert drawn == [tuple(short(u) for u in layer) for layer in LAYERS]


def test_the_checks_see_what_they_check() -> None:
    """The walk reads imports inside functions and under TYPE_CHECKING, an
    arrow up is counted, and a cycle through a function is found."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from sync_server.hosting import server\n"
        "def f():\n    import sync_server.ops.cli\n"
    )
    path = ROOT / "tests" / "_layering_probe.py"
    path.write_text(source, encoding="utf-8")
    try:
        found = {m for m, _ in every_import(path, "sync_server.storage.probe", set())}
    finally:
        path.unlink()
    assert {"sync_server.hosting", "sync_server.ops.cli"} <= found
    g = {
        "sync_server.storage.a": {"sync_server.hosting.b": 3},
        "sync_server.hosting.b": {"sync_server.storage.a": 9},
    }
    assert arrows_not_down(g) == [("sync_server.storage.a", "sync_server.hosting.b", 3)]
    assert cycles(g) == [["sync_server.hosting.b", "sync_server.storage.a"]]


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
    import neither asyncio nor websockets nor the asyncio side of the server,
    nor the clock port (their time is passed in)."""
    for name, imports in graph().items():
        if not name.startswith(SANS_IO):
            continue
        for mod in imports:
            top = mod.split(".")[0]
            assert top not in ("asyncio", "websockets", "socket", "sqlite3", "asyncpg"), (
                f"{name} imports {mod}: the cores and the wire do no I/O"
            )
            assert not mod.startswith(
                ("sync_server.hosting", "sync_server.ops", "sync_server.clock")
            ), f"{name} imports {mod}: the cores never reach for the asyncio side"


def test_the_server_does_not_depend_on_the_clients() -> None:
    for name, imports in graph().items():
        if name.startswith("sync_server"):
            found = {m for m in imports if m.startswith("client_stub")}
            assert not found, (name, found)


# What the client may read of the rules: the patch vocabulary (its mirror
# applies patches), and the op reference (`vtt-sync client ops` and `cmd OP
# --help` print it: rules/catalog.py ships with the client).
CLIENT_RULES = ("rules", "rules.patch", "rules.catalog")


def test_the_clients_use_only_the_wire_modules_of_the_server() -> None:
    for name, imports in graph().items():
        if name.startswith("client_stub"):
            for mod in imports:
                if mod.startswith("sync_server"):
                    assert mod == "sync_server" or mod.startswith("sync_server.wire"), (name, mod)
                if mod.startswith("rules"):
                    assert mod in CLIENT_RULES, (name, mod)


def test_benchmarks_do_not_import_the_tests() -> None:
    for name, imports in graph().items():
        if name.startswith("bench"):
            assert not any(m.split(".")[0] == "tests" for m in imports), (name, imports)


# --- the room core's narrow face ------------------------------------------------


def room_core_fields() -> set[str]:
    """What a `RoomCore` holds (its attributes and properties): outside
    core/, its host and every other module ask it through its methods, or
    read values in its outputs (`committed()`, the steps), never these."""
    from sync_server.core.room import RoomCore
    from sync_server.testing.core import new_core

    core, _ = new_core()
    props = {n for cls in RoomCore.__mro__ for n, v in vars(cls).items() if isinstance(v, property)}
    return set(vars(core)) | props


def field_reads(source: str, fields: set[str]) -> Iterator[tuple[str, int]]:
    """(field, line) for each read of a room core's field in `source`: a
    room core is `core` wherever it is held outside core/ (a host's
    `.core`, a query's argument), so `core.<field>` and `<x>.core.<field>`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in fields:
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id == "core") or (
                isinstance(owner, ast.Attribute) and owner.attr == "core"
            ):
                yield node.attr, node.lineno


def test_outside_the_core_no_module_reads_the_room_cores_fields() -> None:
    fields = room_core_fields()
    assert {"state", "v", "room", "afford", "dedup"} <= fields  # what the walk looks for
    found = [
        f"  {name} (line {line}) reads core.{field}"
        for name, path in modules(*PACKAGES, "bench").items()
        if not name.startswith("sync_server.core.")
        for field, line in field_reads(path.read_text(encoding="utf-8"), fields)
    ]
    assert not found, "reads of the room core's fields (ask it a method):\n" + "\n".join(found)


def test_the_face_check_sees_a_field_read() -> None:
    source = (
        "def f(host, core):\n"
        "    n = len(core.room.characters)\n"
        "    return host.core.state, core.view(None), core.committed().v, host.state\n"
    )
    assert sorted(field_reads(source, room_core_fields())) == [("room", 2), ("state", 3)]
