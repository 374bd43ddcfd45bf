"""The table page's shape (issue 34: app.js split): its modules, reached from
app.js by their imports, each small enough to read, and none holding
mutable state of its own at module level: what changes between renders is
page.js's one `page` object (a module-level `let` or `var` anywhere else
would be state scattered across files)."""

from __future__ import annotations

import re
from pathlib import Path

WEB = Path(__file__).resolve().parents[2] / "client_stub" / "web"
# A module one reads in a sitting (the split's goal; app.js was 1,217 lines).
MAX_MODULE_LINES = 400
IMPORT = re.compile(r'^import\s[^;]*?from\s+"\./([\w.-]+\.js)";', re.MULTILINE | re.DOTALL)
TOP_LEVEL_BINDING = re.compile(r"^(?:export\s+)?(let|var)\s+(\w+)", re.MULTILINE)
# The browser client is a library of its own (it keeps its state in its
# instances), not one of the page's modules.
LIBRARIES = {"vtt-sync-client.js"}


def page_modules() -> list[str]:
    """app.js and every module it reaches through relative imports."""
    found, todo = [], ["app.js"]
    while todo:
        name = todo.pop()
        if name in found or name in LIBRARIES:
            continue
        found.append(name)
        todo += IMPORT.findall((WEB / name).read_text(encoding="utf-8"))
    return sorted(found)


def test_the_page_is_split_into_modules_each_small_enough_to_read() -> None:
    modules = page_modules()
    assert {"app.js", "page.js", "cards.js", "combat.js", "setup.js", "log.js"} <= set(modules)
    long = {
        m: n
        for m in modules
        if (n := len((WEB / m).read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_the_page_state_is_one_object_in_page_js() -> None:
    scattered = {
        m: TOP_LEVEL_BINDING.findall((WEB / m).read_text(encoding="utf-8")) for m in page_modules()
    }
    assert {m: b for m, b in scattered.items() if b} == {}
    assert re.search(r"^export const page = \{", (WEB / "page.js").read_text(), re.MULTILINE)
