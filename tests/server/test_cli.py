"""The CLI: `vtt-sync serve --demo` (once, idempotent), `vtt-sync client`
delegating to client_stub (the vtt_sync command, above both), `python -m
sync_server` (the server's commands alone)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from sync_server.core.ratelimit import RateSpec
from sync_server.ops.cli import build_parser, main
from sync_server.ops.settings import SETTINGS, resolve
from tests.helpers.server import REPO, connect, create_table, start_subprocess_server

URL_RE = re.compile(r"(http://127\.0\.0\.1:\d+)/#(room=demo&token=\S+)")


def _demo_urls(output: list[str]) -> list[dict[str, str]]:
    found = []
    for line in output:
        m = URL_RE.search(line)
        if m:
            q = parse_qs(m.group(2))
            found.append({"base": m.group(1), "room": q["room"][0], "token": q["token"][0]})
    return found


async def test_demo_room_is_created_once_and_playable(tmp_path) -> None:
    child = start_subprocess_server(tmp_path / "data", "--demo")
    try:
        urls = _demo_urls(child.output)
        assert len(urls) == 5  # GM, three players, an observer
        assert urls[0]["base"] == "http" + child.url[2:]
        roles = []
        for u in urls:
            c = await connect(child.url, u["token"], "demo", "json")
            roles.append(c.role)
            state, v = c.state, c.v
            await c.close()
        assert roles == ["gm", "player", "player", "player", "observer"]
        chars = state["characters"].values()
        assert len(chars) == 4
        assert len({c["level"] for c in chars}) == 4  # varied
        players = {uid for uid, u in state["users"].items() if u["role"] == "player"}
        assert {c["owner"] for c in chars} == players | {None}
        assert child.terminate() == 0
    finally:
        if child.proc.poll() is None:
            child.kill()
    child = start_subprocess_server(tmp_path / "data", "--demo")
    try:
        again = _demo_urls(child.output)
        assert [u["token"] for u in again] == [u["token"] for u in urls]
        obs = await connect(child.url, again[-1]["token"], "demo")
        assert obs.v == v and obs.state == state  # nothing created twice
        await obs.close()
    finally:
        child.terminate()


async def test_vtt_sync_client_delegates_to_the_python_client(tmp_path) -> None:
    pytest.importorskip("client_stub.cli")
    child = start_subprocess_server(tmp_path / "data")
    try:
        t = await create_table(child.url)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vtt_sync", "client", "state", "--url", child.url,
            f"--token={t.tokens['obs']}", "--room", "r1", "--compact",
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(30):
            out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        state = json.loads(out.decode().strip().splitlines()[-1])
        found = state.get("state", state)
        assert found["room"] == "r1"
    finally:
        child.terminate()


def test_the_server_cli_alone_names_where_the_client_is(capsys) -> None:
    """`python -m sync_server client ...` runs no client (the server never
    imports it): it says which command does, and exits 2 (usage)."""
    assert main(["client", "state"]) == 2
    err = capsys.readouterr().err
    assert "vtt-sync client" in err and "python3 -m vtt_sync client" in err


def test_the_vtt_sync_command_hands_the_rest_to_the_server_cli(capsys) -> None:
    import vtt_sync

    with pytest.raises(SystemExit) as done:
        vtt_sync.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("vtt-sync ")
    assert "client" in build_parser().format_help()  # `vtt-sync --help` lists it


def test_serve_options() -> None:
    ns = build_parser().parse_args(
        ["serve", "--port", "0", "--data-dir", "d", "--rate", "10/15", "--gm-rate", "50"]
    )
    got = resolve(ns, environ={})
    assert (got["port"], got["data_dir"], got["rate"], got["gm_rate"]) == (
        0,
        Path("d"),
        RateSpec(10, 15),
        RateSpec(50, 100),
    )
    got = resolve(build_parser().parse_args(["serve"]), environ={})
    assert (got["host"], got["port"], got["rate"], got["gm_rate"], got["demo"]) == (
        "127.0.0.1",
        8765,
        RateSpec(20, 40),
        None,
        False,
    )


def test_bad_rate_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--rate", "-3"])
    assert "rate" in capsys.readouterr().err


def test_serve_help_shows_every_default_and_variable() -> None:
    parser = build_parser()
    serve = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[
        "serve"
    ]
    for action in serve._actions:
        if not action.option_strings or action.dest == "help":
            continue
        assert "default" in (action.help or ""), f"{action.option_strings}: no default in help"
    text = " ".join(serve.format_help().split())
    for shown in ("default 127.0.0.1", "default 8765", "default ./vtt-data", "default 20/40"):
        assert shown in text
    for setting in SETTINGS:
        if setting.flag_name is not None:
            assert setting.flag_name in text
            assert f"env {setting.env_name}" in text, setting.name
