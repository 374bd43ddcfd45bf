"""`vtt-sync client ops|cmd|state|watch --once|create-room` as subprocesses,
against a real server where they need one."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from client_stub import Client
from client_stub.cli import build_parser, main, parse_pairs, room_id_from_name
from rules import catalog
from sync_server.wire.links import ws_url
from tests.helpers.live_table import ROOM, LiveTable
from tests.helpers.server import ADMIN_TOKEN

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[2]


async def run(
    t: LiveTable | None,
    *argv: str,
    token: str | None = None,
    entry: str = "client_stub",
    env: dict[str, str] | None = None,
):
    env = {
        **os.environ,
        "VTT_SYNC_URL": t.http_url if t else "127.0.0.1:9",  # the page's address works too
        "VTT_SYNC_TOKEN": token or (t.token("gm") if t else "no-server"),
        "VTT_SYNC_ROOM": ROOM,
        "COLUMNS": "100",
        **(env or {}),
    }
    args = ["client", *argv] if entry == "vtt_sync" else list(argv)
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
    assert room_id_from_name("Thursday table: the Return!") == "thursday-table-the-return"
    assert room_id_from_name("¡¡!!") == "room"
    assert ws_url("http://h:1/#room=x&token=y") == "ws://h:1/"
    assert ws_url("127.0.0.1:8765") == "ws://127.0.0.1:8765/"


async def test_cmd_prints_what_changed_as_sentences(table: LiveTable) -> None:
    code, out, err = await run(table, "cmd", "damage", "char=c1", "amount=18")
    assert code == 0, err
    v, _ = await table.state()
    assert out == f"v{v}  Aline takes 18 damage (-15 PE, -3 PV)\n"
    code, out, err = await run(table, "cmd", "damage", "char=c3", "amount=30")
    assert out.splitlines()[-1] == f"v{v + 1}  Chloe: conscious → dying (damage)"
    # undo says what it undid, with names
    code, out, err = await run(table, "cmd", "undo")
    assert code == 0, err
    assert out == f"v{v + 2}  Undid: 30 damage to Chloe\n"
    assert "=" not in out and "u1" not in out


async def test_add_user_prints_the_new_players_link(table: LiveTable) -> None:
    code, out, err = await run(table, "cmd", "add_user", "name=Dana", "role=player")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].endswith("Dana is invited as player")
    link = lines[-1].strip()
    assert link.startswith(f"{table.http_url}#room={ROOM}&token=")
    async with Client(table.url, link.split("token=", 1)[1], ROOM) as dana:
        assert dana.role == "player" and dana.state["users"][dana.user]["name"] == "Dana"


async def test_cmd_prints_ack_and_state_prints_state(table: LiveTable) -> None:
    code, out, err = await run(
        table, "cmd", "--json", "damage", "char=c1", "amount=3", "nonlethal=true"
    )
    assert code == 0, err
    ack = json.loads(out)
    assert ack["t"] == "ack" and isinstance(ack["v"], int)
    code, out, err = await run(table, "state", entry="vtt_sync")  # `vtt-sync client state`
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
    code, out, err = await run(
        table, "cmd", "--json", "--events", "first_aid", "char=c2", "patient=c1"
    )
    assert code == 0, err
    ack = json.loads(out)
    rolls = [e for e in ack["events"] if e["kind"] == "roll"]
    assert len(rolls) == 1 and rolls[0]["d20"] == 17 and rolls[0]["check"] == "medicine"
    assert any(e["kind"] == "condition" and e["to"] == "stable" for e in ack["events"])


async def test_cmd_refused_exits_1_with_the_reason_on_stderr(table: LiveTable) -> None:
    code, out, err = await run(
        table, "cmd", "damage", "char=c1", "amount=1", token=table.token("p1")
    )
    assert (code, out) == (1, "")
    assert err == (
        "vtt-sync client: refused (forbidden): only the GM may damage\n"
        "vtt-sync client: what you may do now: vtt-sync client actions c1\n"
    )
    code, out, err = await run(table, "cmd", "--json", "combat_start", 'order=["c1","nobody"]')
    assert code == 1 and out == ""
    assert json.loads(err)["error"] == "not_found"


async def test_missing_arguments_are_named_all_at_once(table: LiveTable) -> None:
    code, out, err = await run(table, "cmd", "add_character", "name=Dana", "level=2")
    assert (code, out) == (1, "")
    missing = ["pv_max", "pe_max", "pp_max", "abilities", "medicine"]
    assert err.strip() == (
        "vtt-sync client: refused (invalid_args): add_character: missing arguments "
        + ", ".join(repr(m) for m in missing)
    )


async def test_bad_token_exits_3_with_one_line_without_echoing_it(table: LiveTable) -> None:
    code, out, err = await run(table, "state", token="wrong-token-123")
    assert (code, out) == (3, "")
    assert len(err.splitlines()) == 1 and "4401" in err
    assert "wrong-token-123" not in out + err
    code, out, err = await run(table, "--json", "state", token="wrong-token-123")
    assert json.loads(err)["close_code"] == 4401


async def test_a_refused_connection_fails_at_once_with_one_clear_line() -> None:
    """Nothing listens: one attempt, no retry loop until --timeout (60 s here,
    while the run's own bound is 30 s), one line on stderr, exit 3."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: connections are refused
    url = f"ws://127.0.0.1:{port}/"
    refused = "connection refused (is `vtt-sync serve` running at that address and port?)"
    for action in (["cmd", "damage", "char=c1", "amount=1"], ["state"]):
        code, out, err = await run(None, "--timeout", "60", *action, env={"VTT_SYNC_URL": url})
        assert (code, out) == (3, "")
        assert err == f"vtt-sync client: cannot connect to {url}: {refused}\n"
    # `vtt-sync admin` says it the same way, over WebSocket and over HTTP
    for task, address in ((["gm-link", "r1"], url), (["rooms"], f"http://127.0.0.1:{port}/")):
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "sync_server", "admin", *task],
            cwd=REPO, capture_output=True, text=True, timeout=30,
            env={**os.environ, "VTT_SYNC_URL": url, "VTT_SYNC_ADMIN_TOKEN": "x" * 40},
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (3, "")
        assert done.stderr == f"vtt-sync admin: cannot connect to {address}: {refused}\n"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`vtt-sync client ARGV` in this process (for what needs no server)."""
    code = main(["client", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_ops_lists_every_operation_without_a_server(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "ops")
    assert code == 0, err
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert listed == catalog.all_ops()
    assert "damage            GM          deal damage: PE first, then PV" in out


def test_cmd_op_help_shows_its_arguments_and_an_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = cli(capsys, "cmd", "add_character", "--help")
    assert code == 0, err
    assert out.startswith(
        "vtt-sync client cmd add_character name=… level=… pv_max=… pe_max=… pp_max=… "
        "abilities=… medicine=… [owner=…] [id=…] [pv=…] [pe=…] [pp=…] [shown=…]\n"
    )
    for arg in catalog.op_args("add_character"):
        assert f"\n  {arg} " in out
    assert "accepts integer 1 to 100" in out  # level, from the op table's kind
    assert "accepts map of str, dex, con, int, wis, cha (each integer 1 to 100); all six" in out
    assert "  vtt-sync client cmd add_character name=Aline level=3" in out
    code, out, _ = cli(capsys, "cmd", "--help")  # no op: the command's own help
    assert code == 0 and "exit status:" in out and "3  no connection" in out


@pytest.mark.parametrize(
    ("typed", "hint"),
    [("damge", "did you mean damage?"), ("stabilise", "did you mean stabilize?")],
)
def test_an_unknown_op_suggests_the_nearest_names(
    typed: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["cmd", typed, "char=c1"], ["cmd", typed, "--help"]):
        code, out, err = cli(capsys, *argv)
        assert (code, out) == (2, "")
        assert err == (
            f"vtt-sync client: unknown op {typed!r}; {hint} (vtt-sync client ops lists them)\n"
        )
    code, _, err = cli(capsys, "cmd", "xyzzy")
    assert code == 2 and "did you mean" not in err


async def test_the_entry_point_lists_the_ops_too() -> None:
    """`vtt-sync client ops` through the real entry point, in a child process."""
    code, out, err = await run(None, "ops", entry="vtt_sync")
    assert code == 0 and "undo              GM" in out, err


async def test_create_room_prints_the_gm_link_ready_to_open(
    table: LiveTable, tmp_path: Path
) -> None:
    # the admin token from the environment
    code, out, err = await run(
        table, "create-room", "Thursday table", "--gm-name", "Maya",
        env={"VTT_SYNC_ADMIN_TOKEN": ADMIN_TOKEN, "VTT_SYNC_TOKEN": ""},
    )  # fmt: skip
    assert code == 0, err
    link = out.strip()
    assert link.startswith(f"{table.http_url}#room=thursday-table&token=")
    token = link.split("token=", 1)[1]
    async with Client(table.url, token, "thursday-table") as gm:
        assert gm.role == "gm" and gm.state["name"] == "Thursday table"
        assert gm.state["users"][gm.user]["name"] == "Maya"
    assert token not in err
    # again: the id is taken; the admin token from the data directory's file
    (tmp_path / "admin_token").write_text(ADMIN_TOKEN + "\n")
    code, out, err = await run(
        table, "create-room", "Thursday table", "--data-dir", str(tmp_path),
        env={"VTT_SYNC_TOKEN": ""},
    )  # fmt: skip
    assert (code, out) == (1, "")
    assert "already exists; choose another id with --id" in err
    code, out, err = await run(
        table, "create-room", "Thursday table", "--id", "thu2", "--data-dir", str(tmp_path),
        env={"VTT_SYNC_TOKEN": ""},
    )  # fmt: skip
    assert code == 0 and "#room=thu2&token=" in out


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
        table, f"--token={table.token('obs')}", "--room", ROOM, "state", token=env_token
    )
    assert code == 0, err
    _, state = await table.state()
    assert json.loads(out) == table.seen("obs", state)
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


async def test_actions_prints_what_you_may_do_now_and_why_not(table: LiveTable) -> None:
    """`actions` words the server's affordances with the shared table of
    texts: the player's own character only, each action with the command
    that sends it, or why not now (R1, S3)."""
    async with Client(table.url, table.token("gm"), ROOM) as gm:
        await gm.command("update_character", char="c1", set={"pp": 0})
    code, out, err = await run(table, "actions", "c1", token=table.token("p1"))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Aline (c1):"
    assert (
        "  Rest (night's rest or bed rest; not short rest: Aline has no PP left for a short"
        " rest (R1))"
    ) in lines
    assert '      vtt-sync client cmd rest char="c1" kind=<night|bed>' in lines
    assert "  Stabilize: not now: Aline is conscious: only a dying character can spend PP" in out
    code, out, _ = await run(table, "actions", token=table.token("p1"))
    assert code == 0 and "Bastien" not in out  # not Aline's player's to act for
    assert "Undo: not now: only the GM may undo" in out
    code, out, _ = await run(table, "--json", "actions", "c1", token=table.token("p1"))
    assert json.loads(out)["chars"]["c1"]["rest"]["choices"] == {"kind": ["night", "bed"]}
    code, out, _ = await run(table, "actions")  # the GM: the room's too, and the undo
    assert "Room:" in out and "Undo: reverts v" in out


async def test_T4_roll_initiative_through_the_generic_cmd_path(table: LiveTable) -> None:
    """`vtt-sync client cmd roll_initiative` (T4): maps as JSON arguments, each
    roll and the sorted start as sentences."""
    code, out, err = await run(
        table,
        "cmd",
        "roll_initiative",
        'chars=["c1","c2","c3","c4"]',
        'bonus={"c4": 2}',
        'rolls={"c1": 12, "c2": 9, "c3": 18, "c4": 12}',
        entry="vtt_sync",
    )
    assert code == 0, err
    v, state = await table.state()
    assert out.splitlines() == [
        f"v{v}  Aline rolls initiative: d20 12 +2 = 14 (GM's die)",
        f"v{v}  Bastien rolls initiative: d20 9 +1 = 10 (GM's die)",
        f"v{v}  Chloe rolls initiative: d20 18 +1 = 19 (GM's die)",
        f"v{v}  Gorgol the goblin rolls initiative: d20 12 +2 +2 = 16 (GM's die)",
        f"v{v}  Combat starts: Chloe, Gorgol the goblin, Aline, Bastien",
        f"v{v}  Round 1: Chloe's turn",
    ]
    assert state["combat"]["order"] == ["c3", "c4", "c1", "c2"]
    assert state["initiative"] == {"c1": 14, "c2": 10, "c3": 19, "c4": 16}
    code, out, err = await run(table, "cmd", "roll_initiative", 'bonus={"c9": 1}')
    assert (code, out) == (1, "")
    assert err == (
        "vtt-sync client: refused (not_found): no character 'c9' in this room\n"
        "vtt-sync client: what you may do now: vtt-sync client actions\n"
    )
