"""The admin side of a campaign: the list of rooms (`GET /admin/rooms`,
`vtt-sync admin rooms`), a new link for a GM who lost theirs
(`reissue_gm_link`, `vtt-sync admin gm-link ROOM`), and `admin backup` to a
directory."""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
import urllib.error
import urllib.request
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from sync_server.ops.cli import main
from sync_server.testing.server import ADMIN_TOKEN, connect_admin
from tests.helpers.server import create_table, running_server


def vtt_out(*argv: str) -> tuple[int, str, str]:
    """`vtt-sync ARGV`: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def get_rooms(port: int, token: str | None = ADMIN_TOKEN) -> tuple[int, dict]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/admin/rooms", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_the_list_of_rooms_says_name_version_activity_and_who_is_on(tmp_path) -> None:
    async with running_server(tmp_path / "data") as srv:
        t = await create_table(srv.url, room="thursday", name="Thursday table")
        await create_table(srv.url, room="friday", name="Friday table")
        gm, p1 = await t.connect("gm"), await t.connect("p1")
        await gm.ok("update_room", {"name": "Thursday campaign"})
        status, body = await asyncio.to_thread(get_rooms, srv.port)
        assert status == 200
        rooms = {r["room"]: r for r in body["rooms"]}
        assert set(rooms) == {"thursday", "friday"}
        thursday = rooms["thursday"]
        assert thursday["name"] == "Thursday campaign" and thursday["v"] == gm.v + 1 - 1
        assert thursday["last_activity"] > thursday["created"] > 0
        assert {(c["name"], c["role"], c["sessions"]) for c in thursday["connected"]} == {
            ("Maya", "gm", 1),
            ("Paul", "player", 1),
        }
        assert rooms["friday"]["connected"] == [] and rooms["friday"]["name"] == "Friday table"
        code, out, _ = await asyncio.to_thread(
            vtt_out, "admin", "rooms", "--url", srv.url, "--token", ADMIN_TOKEN
        )
        assert code == 0
        lines = out.splitlines()
        assert lines[0].split() == ["ROOM", "NAME", "VERSION", "LAST", "ACTIVITY", "CONNECTED"]
        row = next(line for line in lines if line.startswith("thursday"))
        assert "Thursday campaign" in row and "Maya (gm)" in row and "Paul (player)" in row
        code, out, _ = await asyncio.to_thread(
            vtt_out, "admin", "rooms", "--json", "--url", srv.url, "--token", ADMIN_TOKEN
        )
        assert code == 0 and {r["room"] for r in json.loads(out)} == {"thursday", "friday"}
        # the token is needed, in a header
        status, body = await asyncio.to_thread(get_rooms, srv.port, None)
        assert status == 401 and "Bearer" in body["error"]
        await gm.close()
        await p1.close()


async def test_a_gm_who_lost_their_link_gets_a_new_one(tmp_path) -> None:
    async with running_server(tmp_path / "data") as srv:
        t = await create_table(srv.url, room="thursday")
        old = await t.connect("gm")
        p1 = await t.connect("p1")
        code, out, err = await asyncio.to_thread(
            vtt_out, "admin", "gm-link", "thursday", "--url", srv.url, "--token", ADMIN_TOKEN
        )
        assert code == 0, err
        link = out.strip()
        assert link.startswith(f"http://127.0.0.1:{srv.port}/#room=thursday&token=")
        assert "old one no longer works" in err
        assert (await old.closed())[0] == 4403  # the old link's session ends
        t.tokens["gm"] = link.rsplit("token=", 1)[1]
        gm = await t.connect("gm")  # the new link opens the GM's seat
        assert gm.welcome["role"] == "gm"
        await gm.ok("advance_clock", {"seconds": 6})
        await p1.wait_v(gm.v)  # the players keep theirs
        # the admin op: a retry under the same id gets the same token
        admin = await connect_admin(srv.url)
        first = await admin.cmd("reissue_gm_link", {"room": "thursday"}, id="again")
        retry = await admin.cmd("reissue_gm_link", {"room": "thursday"}, id="again")
        assert first["t"] == retry["t"] == "ack"
        assert retry["result"]["gm_token"] == first["result"]["gm_token"]
        missing = await admin.cmd("reissue_gm_link", {"room": "nope"})
        assert missing["code"] == "not_found"
        not_gm = await admin.cmd("reissue_gm_link", {"room": "thursday", "user": t.users["p1"]})
        assert not_gm["code"] == "not_found"
        await admin.close()
        code, _, err = await asyncio.to_thread(
            vtt_out, "admin", "gm-link", "nope", "--url", srv.url, "--token", ADMIN_TOKEN
        )
        assert code == 1 and "not_found" in err and "Traceback" not in err
        await p1.close()


@pytest.mark.parametrize("existing", [True, False])
async def test_backup_to_a_directory_writes_a_file_in_it(tmp_path: Path, existing: bool) -> None:
    data = tmp_path / "data"
    async with running_server(data) as srv:
        await create_table(srv.url)
        dest = tmp_path / "backups"
        if existing:
            dest.mkdir()
        code, _, err = await asyncio.to_thread(
            vtt_out, "admin", "backup", str(dest if existing else dest / "no" / "such"),
            "--data-dir", str(data),
        )  # fmt: skip
    assert "Traceback" not in err
    if not existing:
        assert code == 2 and "cannot write the backup" in err
        return
    assert code == 0, err
    (copy,) = list(dest.iterdir())
    assert copy.name.startswith("vtt-sync-") and copy.suffix == ".sqlite3"
    db = sqlite3.connect(copy)
    assert db.execute("SELECT count(*) FROM rooms").fetchone()[0] == 1
    db.close()


def test_the_cli_says_what_to_do_when_no_server_answers(tmp_path: Path) -> None:
    for task in (["rooms"], ["gm-link", "r1"]):
        code, _, err = vtt_out("admin", *task, "--url", "ws://127.0.0.1:9/", "--token", "x" * 40,
                               "--timeout", "5")  # fmt: skip
        assert code == 3 and "Traceback" not in err, err
