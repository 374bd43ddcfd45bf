"""`vtt-sync client cmd|state|watch --once` as subprocesses against a real server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from client_stub import Client
from client_stub.cli import build_parser, normalize_url, parse_pairs
from tests.helpers.live_table import ROOM, LiveTable

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[2]


async def run(t: LiveTable, *argv: str, token: str | None = None, entry: str = "client_stub"):
    env = {
        **os.environ,
        "VTT_SYNC_URL": t.http_url,  # the page's address works too
        "VTT_SYNC_TOKEN": token or t.token("gm"),
        "VTT_SYNC_ROOM": ROOM,
        "COLUMNS": "100",
    }
    args = ["client", *argv] if entry == "sync_server" else list(argv)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        entry,
        *args,
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode, out.decode(), err.decode()


def test_parse_pairs_json_or_string() -> None:
    args = parse_pairs(["amount=3", "nonlethal=true", 'order=["c1","c2"]', "char=c1", "x=null"])
    assert args == {"amount": 3, "nonlethal": True, "order": ["c1", "c2"], "char": "c1", "x": None}
    assert parse_pairs(["name=Aline la Brave", 'set={"pv": 3}'])["set"] == {"pv": 3}
    with pytest.raises(ValueError):
        parse_pairs(["amount"])
    assert normalize_url("http://h:1/#room=x&token=y") == "ws://h:1/"
    assert normalize_url("127.0.0.1:8765") == "ws://127.0.0.1:8765/"


async def test_cmd_prints_ack_and_state_prints_state(table: LiveTable) -> None:
    code, out, err = await run(table, "cmd", "damage", "char=c1", "amount=3", "nonlethal=true")
    assert code == 0, err
    ack = json.loads(out)
    assert ack["t"] == "ack" and isinstance(ack["v"], int)
    code, out, err = await run(table, "state", entry="sync_server")  # `vtt-sync client state`
    assert code == 0, err
    v, state = await table.state()
    assert json.loads(out) == state and ack["v"] == v
    assert state["characters"]["c1"]["pe"] == 15 - 3
    for text in (out, err):
        assert table.token("gm") not in text


async def test_cmd_events_shows_the_rolls_of_the_command(table: LiveTable) -> None:
    """`cmd --events`: the ack carries its patch's events, e.g. the X2 roll event."""
    code, out, err = await run(table, "cmd", "damage", "char=c1", "amount=100")
    assert code == 0, err
    code, out, err = await run(table, "cmd", "queue_rolls", "rolls=[17]")
    assert code == 0, err
    code, out, err = await run(table, "cmd", "--events", "first_aid", "char=c2", "patient=c1")
    assert code == 0, err
    ack = json.loads(out)
    rolls = [e for e in ack["events"] if e["kind"] == "roll"]
    assert len(rolls) == 1 and rolls[0]["d20"] == 17 and rolls[0]["check"] == "medicine"
    assert any(e["kind"] == "condition" and e["to"] == "stable" for e in ack["events"])


async def test_cmd_refused_exits_non_zero_with_json_error(table: LiveTable) -> None:
    code, out, _ = await run(table, "cmd", "damage", "char=c1", "amount=1", token=table.token("p1"))
    assert code == 1
    assert json.loads(out)["error"] == "forbidden"
    code, out, _ = await run(table, "cmd", "combat_start", 'order=["c1","nobody"]')
    assert code == 1 and json.loads(out)["error"] in {"not_found", "invalid_args"}


async def test_bad_token_exits_3_without_echoing_it(table: LiveTable) -> None:
    code, out, err = await run(table, "state", token="wrong-token-123")
    assert code == 3
    assert json.loads(err)["close_code"] == 4401
    assert "wrong-token-123" not in out + err


async def test_watch_once_renders_the_table(table: LiveTable) -> None:
    await table.server.room_command(ROOM, table.user("gm"), "combat_start", {"order": ["c2", "c1"]})
    code, out, err = await run(table, "watch", "--once")
    assert code == 0, err
    for text in ("Demo table", "Aline", "Bastien", "conscious", "Round 1", "38/38"):
        assert text in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--token", "X", "--room", "r9", "--proto", "json", "state"],  # options first
        ["state", "--token", "X", "--room", "r9", "--proto", "json"],  # options after
        ["--token", "X", "state", "--room", "r9", "--proto", "json"],  # both
    ],
)
def test_connection_options_work_before_and_after_the_subcommand(argv: list[str]) -> None:
    ns = build_parser().parse_args(argv)
    assert (ns.token, ns.room, ns.proto, ns.action) == ("X", "r9", "json", "state")
    assert ns.url is None and ns.timeout == 15.0  # untouched defaults stay
    # after the subcommand wins over before it
    assert build_parser().parse_args(["--token", "A", "state", "--token", "B"]).token == "B"


async def test_token_given_before_the_subcommand_is_used(table: LiveTable) -> None:
    env_token = "not-the-token-0123456789"  # the flag must win over the environment
    code, out, err = await run(
        table, "--token", table.token("obs"), "--room", ROOM, "state", token=env_token
    )
    assert code == 0, err
    _, state = await table.state()
    assert json.loads(out) == state
    assert table.token("obs") not in out + err


async def test_watch_keeps_running_across_a_server_restart(table: LiveTable) -> None:
    """`watch` is a live view: it shows the table, survives a restart of the
    server (same data dir and port) and shows what changed after it."""
    env = {
        **os.environ,
        "VTT_SYNC_URL": table.url,
        "VTT_SYNC_TOKEN": table.token("obs"),
        "VTT_SYNC_ROOM": ROOM,
        "COLUMNS": "120",
        "TTY_INTERACTIVE": "1",  # rich: refresh the live view on a pipe too
        "FORCE_COLOR": "0",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client_stub", "watch", cwd=REPO, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    seen = bytearray()

    async def until(text: str, timeout: float = 20) -> None:
        async def read() -> None:
            assert proc.stdout is not None
            while text.encode() not in seen:
                chunk = await proc.stdout.read(4096)
                assert chunk, f"watch exited before showing {text!r}"
                seen.extend(chunk)

        await asyncio.wait_for(read(), timeout)

    try:
        await until("Aline")
        await table.restart()
        async with Client(table.url, table.token("gm"), ROOM) as gm:
            await gm.command("update_character", char="c1", set={"name": "Renamed"})
        await until("Renamed")
        assert proc.returncode is None  # still running
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
    assert table.token("obs").encode() not in seen
