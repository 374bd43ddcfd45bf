"""Trust at the borders (issue 19, items 4 and 5): races and identity, logs
and headers. Each test fails on the code before the issue."""

from __future__ import annotations

import asyncio
import io
import logging
import urllib.request
from collections import Counter
from pathlib import Path

from sync_server.core.limits import FAILED_HELLO_BURST
from sync_server.hosting.clock import FakeClock
from sync_server.ops.logs import TextFormatter, escape_text
from sync_server.wire.protocol import CLOSE_POLICY, CLOSE_UNAUTHENTICATED
from tests.helpers.server import create_table, hello_refused, running_server

# --- 5. logs and headers ----------------------------------------------------------


def test_escape_text_keeps_a_line_one_line_and_the_terminal_alone() -> None:
    raw = "x\nFORGED\r\x1b[2J\x07\x9b31m\u2028\u202etail\u2066é\tok"
    out = escape_text(raw)
    assert out == "x\\nFORGED\\r\\x1b[2J\\x07\\x9b31m\\u2028\\u202etail\\u2066é\\tok"
    assert out.isprintable()


async def test_client_strings_in_text_logs_are_escaped(tmp_path: Path) -> None:
    """An op name (any observer sends one) and a close reason with newlines
    and ANSI escapes: the text log holds them escaped, on their own line."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    forged_op = "look\n2026-01-01 INFO sync_server: FORGED op\x1b[31m"
    forged_reason = "bye\n2026-01-01 INFO sync_server: FORGED close\x1b]0;pwned\x07"
    try:
        async with running_server(tmp_path / "data") as srv:
            t = await create_table(srv.url)
            obs = await t.connect("obs")
            reply = await obs.cmd(forged_op, {})
            assert reply["t"] == "error"
            await obs.ws.close(1000, forged_reason)
            await obs.closed()
            for _ in range(100):  # the server logs the close once it has seen it
                if "FORGED close" in stream.getvalue():
                    break
                await asyncio.sleep(0.02)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    text = stream.getvalue()
    assert "FORGED op" in text and "FORGED close" in text  # both were logged...
    assert "\x1b" not in text and "\x07" not in text  # ...escaped: no escape reaches a terminal
    assert not [line for line in text.splitlines() if "FORGED" in line.split(":", 1)[0]]
    assert not [line for line in text.splitlines() if line.startswith("2026-01-01")]
    assert "look\\n2026-01-01" in text and "bye\\n2026-01-01" in text


def _headers(url: str) -> dict[str, str]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return {k.lower(): v for k, v in r.headers.items()}


async def test_pages_get_a_csp_and_nosniff_and_the_admin_page_no_framing(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        base = srv.http_url
        for path in ("/", "/index.html", "/admin.html", "/app.js", "/style.css", "/healthz"):
            headers = await asyncio.to_thread(_headers, base + path)
            assert headers.get("x-content-type-options") == "nosniff", path
        for path in ("/", "/admin.html"):
            csp = (await asyncio.to_thread(_headers, base + path))["content-security-policy"]
            directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
            assert directives["default-src"] == "'self'"
            assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
            assert directives["object-src"] == "'none'"
            assert directives["base-uri"] == "'none'"
        admin_csp = (await asyncio.to_thread(_headers, base + "/admin.html"))[
            "content-security-policy"
        ]
        assert "frame-ancestors 'none'" in admin_csp
        headers = await asyncio.to_thread(_headers, base + "/admin.html")
        assert headers.get("x-frame-options") == "DENY"


# --- 4. races and identity ----------------------------------------------------------

BAD_HELLO = {"t": "hello", "proto": 1, "token": "x" * 43, "room": "r1"}


async def test_concurrent_bad_hellos_cannot_pass_the_failed_hello_limit(tmp_path: Path) -> None:
    """100 bad hellos at once from one address: each reserves one failed
    hello at its accept, so at most the burst are read, the rest wait and
    get `rate_limited` (1008); the allowance never goes below zero, so the
    address may try again a second later (before: all 100 were read, then
    their debt locked the address, and everyone behind its NAT, ~16 s)."""
    clock = FakeClock()
    async with running_server(tmp_path / "data", clock=clock) as srv:
        t = await create_table(srv.url)  # successful hellos cost nothing
        gm = await t.connect("gm")
        results = await asyncio.gather(*(hello_refused(srv.url, BAD_HELLO) for _ in range(100)))
        codes = Counter(code for _frame, code in results)
        assert codes[CLOSE_UNAUTHENTICATED] <= FAILED_HELLO_BURST, codes
        assert codes[CLOSE_UNAUTHENTICATED] + codes[CLOSE_POLICY] == 100, codes
        clock.advance(1.0)  # refills FAILED_HELLOS_PER_SECOND (5) failed hellos
        frame, code = await hello_refused(srv.url, BAD_HELLO)
        assert code == CLOSE_UNAUTHENTICATED, (frame, code)  # read, not turned away
        ok = await t.connect("p1")  # and an honest hello passes
        await ok.close()
        await gm.close()
