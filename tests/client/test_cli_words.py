"""The command line's words: what each option is, what to do when something
is wrong (a mistyped argument name, no server, a room that exists), a
removed user by name, and a page link pasted as --url."""

from __future__ import annotations

import asyncio
import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from client_stub.cli import main as client_main
from client_stub.events import EventText, Names
from sync_server.ops.cli import main as vtt_main
from sync_server.testing.server import ADMIN_TOKEN
from tests.helpers.server import create_table, running_server
from tests.helpers.table import Table


def run(main, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # --help
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_create_room_help_calls_its_token_the_admin_token() -> None:
    code, out, _ = run(client_main, "create-room", "--help")
    assert code == 0
    help_text = " ".join(out.split())
    assert "--token TOKEN the server's admin token" in help_text
    assert "user token" not in help_text
    code, out, _ = run(client_main, "cmd", "--help")
    assert "your token: the one in your page link" in " ".join(out.split())


def test_a_mistyped_argument_name_gets_a_suggestion_before_any_connection() -> None:
    code, _, err = run(client_main, "cmd", "damage", "chr=c1", "amount=3", "--token=x")
    assert code == 2
    assert "damage has no argument 'chr' (did you mean char?)" in err
    assert "cmd damage --help" in err


def test_watch_without_a_server_says_what_to_do() -> None:
    code, _, err = run(client_main, "watch", "--once", "--url", "ws://127.0.0.1:9/",
                       "--token=" + "x" * 40, "--room", "r1", "--timeout", "3")  # fmt: skip
    assert code == 3
    assert "connection refused (is `vtt-sync serve` running at that address and port?)" in err
    assert "ConnectionRefusedError" not in err and "Errno" not in err


def test_a_removed_user_reads_by_name_even_to_a_newcomer() -> None:
    t = Table()
    t.do("remove_user", user=t.p2.user)
    (ev,) = t.kinds("user")
    assert ev == {"kind": "user", "user": t.p2.user, "change": "removed", "name": "Zoé"}
    said = EventText(Names()).sentence(ev)  # a page that never saw Zoé
    assert said == "Zoé is removed: their link no longer works"


async def test_a_page_link_pasted_as_url_gives_the_room_and_token(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        t = await create_table(srv.url)
        link = f"http://127.0.0.1:{srv.port}/#room={t.room}&token={t.tokens['gm']}"
        code, out, err = await asyncio.to_thread(
            run, client_main, "cmd", "advance_clock", "seconds=6", "--url", link
        )
        assert code == 0, err
        assert "Time passes" in out
        code, out, err = await asyncio.to_thread(run, client_main, "state", "--url", link)
        assert code == 0 and json.loads(out)["clock"] == 6


async def test_an_import_conflict_says_how_to_replace(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        await create_table(srv.url)
        room_file = tmp_path / "r1.json"
        code, _, err = await asyncio.to_thread(
            run, vtt_main, "admin", "export", "r1", "--url", srv.url, "--out", str(room_file),
            "--token", ADMIN_TOKEN,
        )  # fmt: skip
        assert code == 0, err
        code, _, err = await asyncio.to_thread(
            run, vtt_main, "admin", "import", str(room_file), "--url", srv.url,
            "--token", ADMIN_TOKEN,
        )  # fmt: skip
        assert code == 1
        assert "room 'r1' already exists: to replace it, import again with replace" in err
        assert "--replace" in err and "replace it with replace" not in err


@pytest.mark.parametrize("path", ["docs/performance.md", "docs/protocol.md", "docs/rules.md"])
def test_docs_speak_in_the_repositorys_own_words(path: str) -> None:
    """No stale module names, no internal notes, no contract or rule text
    the repository does not hold."""
    text = (Path(__file__).resolve().parents[2] / path).read_text()
    assert re.search(r"(?<!test_)fanout\.py", text) is None, path  # the module is gone
    for stale in ("LocalFanOut", "v1 contract", "rules contract",
                  "French rule text", "the contract", "RULES.md", "PROTOCOL.md"):  # fmt: skip
        assert stale not in text, (path, stale)
