"""Backups and moving rooms: `vtt-sync admin export` from one server and
`import` into a fresh one gives the same room (state, version, log, undo,
retries); the import refuses an existing room unless --replace (a room in
use then reconnects to the new one); bad files are refused and store
nothing; the export needs the admin token in a header; a backup taken
under load is a sound database a server starts on."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import shutil
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sync_server import Server
from sync_server.ops.cli import main
from sync_server.storage import transfer
from sync_server.storage.sqlite import DB_FILE
from tests.helpers.server import (
    ADMIN_TOKEN,
    Closed,
    Table,
    connect,
    connect_admin,
    create_table,
    running_server,
)


async def vtt(*argv: str) -> int:
    """`vtt-sync ARGV` in a thread (the CLI runs its own event loop)."""
    return await asyncio.to_thread(main, list(argv))


async def played(t: Table) -> Any:
    """A few minutes of play on r1: damage, healing, a clock advance, an undo."""
    gm = await t.connect("gm")
    await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 5}, id="hit-1")
    await gm.ok("heal", {"char": t.chars["c_p1"], "amount": 2})
    await gm.ok("damage", {"char": t.chars["c_p2"], "amount": 3})
    await gm.ok("undo", {})  # reverts the second damage
    await gm.ok("advance_clock", {"seconds": 60})
    return gm


async def test_export_then_import_into_a_fresh_server_is_the_same_room(tmp_path: Path) -> None:
    async with running_server(tmp_path / "a") as a, running_server(tmp_path / "b") as b:
        t = await create_table(a.url)
        gm = await played(t)
        room_file = tmp_path / "r1.json"
        assert await vtt("admin", "export", "r1", "--url", a.url, "--out", str(room_file),
                         "--token", ADMIN_TOKEN) == 0  # fmt: skip
        doc = json.loads(room_file.read_text())
        assert doc["format_version"] == 1 and doc["head"] == gm.v == len(doc["versions"])
        assert all("token_hash" not in u for u in doc["users"])  # not unless asked
        assert ADMIN_TOKEN not in room_file.read_text()
        for token in t.tokens.values():
            assert token not in room_file.read_text()
        links = tmp_path / "links.txt"
        code = await asyncio.to_thread(_import_capturing, b.url, room_file, links)
        assert code == 0
        new_tokens = _tokens_from_links(links.read_text())
        assert set(new_tokens) == set(t.users.values())  # every user, a new token
        # the same room: state, version, log
        gm_b = await connect(b.url, new_tokens[t.users["gm"]], "r1")
        assert (gm_b.v, gm_b.state) == (gm.v, gm.state)
        assert (await gm_b.sync(0))["patches"] == (await gm.sync(0))["patches"]
        # the old tokens do not open the moved room
        with pytest.raises(Closed, match=r"refused|closed"):
            await connect(b.url, t.tokens["gm"], "r1")
        # a retried command id is a retry on the new server too
        again = await gm_b.cmd("damage", {"char": t.chars["c_p1"], "amount": 5}, id="hit-1")
        assert again["dup"] is True and again["v"] == 1 + _v_of(doc, "hit-1") - 1
        # undo walks the same log: the same version undone, the same state after
        undo_a, undo_b = await gm.ok("undo", {}), await gm_b.ok("undo", {})
        assert undo_a["result"] == undo_b["result"] and undo_a["v"] == undo_b["v"]
        await gm_b.wait_v(undo_b["v"])
        assert gm_b.state == gm.state
        await gm.close()
        await gm_b.close()


def _v_of(doc: dict[str, Any], cmd_id: str) -> int:
    return next(v["v"] for v in doc["versions"] if v["id"] == cmd_id)


def _import_capturing(url: str, room_file: Path, links: Path, *extra: str) -> int:
    """The import CLI, its stdout (the users' links) into `links`."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["admin", "import", str(room_file), "--url", url, "--token", ADMIN_TOKEN,
                     *extra])  # fmt: skip
    links.write_text(out.getvalue())
    return code


def _tokens_from_links(text: str) -> dict[str, str]:
    from urllib.parse import parse_qs

    found = {}
    for line in text.splitlines():
        uid, _role, _name, link = line.split("\t")
        found[uid] = parse_qs(link.split("#", 1)[1])["token"][0]
    return found


async def test_with_token_hashes_the_old_links_work_on_the_new_server(tmp_path: Path) -> None:
    async with running_server(tmp_path / "a") as a, running_server(tmp_path / "b") as b:
        t = await create_table(a.url)
        gm = await played(t)
        room_file = tmp_path / "r1.json"
        assert await vtt("admin", "export", "r1", "--with-token-hashes", "--url", a.url,
                         "--out", str(room_file), "--token", ADMIN_TOKEN) == 0  # fmt: skip
        assert all(len(u["token_hash"]) == 64 for u in json.loads(room_file.read_text())["users"])
        links = tmp_path / "links.txt"
        assert await asyncio.to_thread(_import_capturing, b.url, room_file, links) == 0
        assert links.read_text() == ""  # no new token: the old ones hold
        p1 = await connect(b.url, t.tokens["p1"], "r1")
        assert (p1.v, p1.state) == (gm.v, p1.seen(gm.state)) and p1.role == "player"
        await p1.close()
        await gm.close()


async def test_import_refuses_an_existing_room_unless_replace(tmp_path: Path) -> None:
    async with running_server(tmp_path / "a") as a:
        t = await create_table(a.url)
        gm = await played(t)
        room_file = tmp_path / "r1.json"
        assert await vtt("admin", "export", "r1", "--with-token-hashes", "--url", a.url,
                         "--out", str(room_file), "--token", ADMIN_TOKEN) == 0  # fmt: skip
        exported_v = gm.v
        await gm.ok("damage", {"char": t.chars["c_npc"], "amount": 1})  # after the export
        links = tmp_path / "links.txt"
        assert await asyncio.to_thread(_import_capturing, a.url, room_file, links) == 1
        assert (await a.rooms.get("r1")).v == exported_v + 1  # untouched
        # --replace, with a session open: it is closed (1012) and comes back to the file's room
        assert await asyncio.to_thread(_import_capturing, a.url, room_file, links, "--replace") == 0
        assert (await gm.closed())[0] == 1012
        back = await t.connect("gm")
        assert back.v == exported_v and back.state == json.loads(room_file.read_text())["state"]
        await back.ok("damage", {"char": t.chars["c_npc"], "amount": 2})  # and it goes on
        await back.close()


_PLAYED_DOC: dict[str, Any] = {}


async def played_doc(tmp_path: Path) -> dict[str, Any]:
    """The room file of a played table (made once for the module)."""
    if not _PLAYED_DOC:
        async with running_server(tmp_path / "played") as a:
            t = await create_table(a.url)
            gm = await played(t)
            await gm.close()
            dump = await a.storage.export_room("r1")
        _PLAYED_DOC.update(json.loads(transfer.dumps(transfer.to_document(dump))))
    return copy.deepcopy(_PLAYED_DOC)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(format_version=2), "newer than this server's"),
        (lambda d: d.update(format="something-else"), "not a room file"),
        (lambda d: d["versions"].pop(3), "the whole log"),
        (lambda d: d["versions"][4].update(v=9), "versions[4].v must be 5"),
        (lambda d: d["versions"][4].update(ops="set"), "versions[4].ops must be a list"),
        (lambda d: d["state"]["characters"].clear(), "state is not what the snapshot"),
        (lambda d: d["versions"][2].update(undone=True, undoable=False), "undoable"),
        (lambda d: d.update(room="../etc"), "room must be a room id"),
        (lambda d: d.update(room="other"), "the room's state names room 'r1'"),
        (lambda d: d["users"].append({"user": "u99"}), "not a user of the room"),
        (lambda d: d.update(token_hashes=True, users=[{"user": "u1", "token_hash": "ab"}]),
         "64 hex digits"),
    ],
)  # fmt: skip
async def test_bad_room_files_are_refused_with_their_reason(
    tmp_path: Path, change: Any, message: str
) -> None:
    doc = await played_doc(tmp_path)
    transfer.from_document(copy.deepcopy(doc))  # the file as exported is fine
    change(doc)
    with pytest.raises(transfer.BadRoomFile, match=re.escape(message)):
        transfer.from_document(doc)


async def test_a_bad_file_sent_to_the_server_stores_nothing(
    tmp_path: Path, vtt_server: Server
) -> None:
    doc = await played_doc(tmp_path)
    doc["state"]["clock"] = 12345  # tampered
    admin = await connect_admin(vtt_server.url)
    text = transfer.dumps(doc)
    parts = [text[i : i + 30_000] for i in range(0, len(text), 30_000)]
    base = {"room": "r1", "upload": "u", "parts": len(parts)}
    for i, part in enumerate(parts[:-1]):
        await admin.ok("import_room", {**base, "part": i, "data": part})
    reply = await admin.cmd("import_room", {**base, "part": len(parts) - 1, "data": parts[-1]})
    assert reply["code"] == "invalid_args" and "the room file is refused" in reply["message"]
    assert not vtt_server.rooms.exists("r1") and await vtt_server.storage.room_ids() == set()
    await admin.close()


async def test_import_parts_in_order_retried_and_bounded(tmp_path: Path) -> None:
    async with running_server(tmp_path / "a", max_import_bytes=100_000) as a:
        admin = await connect_admin(a.url)
        base = {"room": "big", "upload": "u1", "parts": 3}
        out_of_order = await admin.cmd("import_room", {**base, "part": 1, "data": "x"})
        assert out_of_order["code"] == "invalid_args"
        assert "start at part 0" in out_of_order["message"]
        first = await admin.ok("import_room", {**base, "part": 0, "data": '{"format":'})
        again = await admin.ok("import_room", {**base, "part": 0, "data": '{"format":'})
        assert first["result"] == again["result"] == {"upload": "u1", "received": 1}
        skipped = await admin.cmd("import_room", {**base, "part": 2, "data": "x"})
        assert "part 1 is next" in skipped["message"]
        other = await admin.cmd("import_room", {**base, "upload": "u2", "part": 0, "data": "x"})
        assert other["code"] == "conflict"  # one upload at a time
        await admin.ok("import_room", {**base, "part": 1, "data": "x" * 30_000})
        changed = await admin.cmd("import_room", {**base, "parts": 9, "part": 2, "data": "x"})
        assert changed["code"] == "invalid_args"  # parts must not change midway
        last = await admin.cmd("import_room", {**base, "part": 2, "data": "x" * 30_000})
        assert last["code"] == "invalid_args" and "not JSON" in last["message"]
        # over max_import_bytes (100,000 here): refused at the part that crosses it
        big = {"room": "big", "upload": "u3", "parts": 5}
        for i in range(3):
            await admin.ok("import_room", {**big, "part": i, "data": "x" * 30_000})
        over = await admin.cmd("import_room", {**big, "part": 3, "data": "x" * 30_000})
        assert over["code"] == "invalid_args" and "over 100000 bytes" in over["message"]
        # a room file of several parts goes through (the CLI cuts it)
        t = await create_table(a.url, room="r1")
        gm = await t.connect("gm")
        for i in range(120):
            await gm.ok("advance_clock", {"seconds": 1 + i})
        room_file = tmp_path / "r1.json"
        assert await vtt("admin", "export", "r1", "--url", a.url, "--out", str(room_file),
                         "--token", ADMIN_TOKEN) == 0  # fmt: skip
        text = room_file.read_text()
        assert len(text) > 30_000  # more than one part
        links = tmp_path / "links.txt"
        async with running_server(tmp_path / "b") as b:
            assert await asyncio.to_thread(_import_capturing, b.url, room_file, links) == 0
            copied = await b.rooms.get("r1")
            assert copied is not None and (copied.v, copied.state) == (gm.v, gm.state)
        await gm.close()
        await admin.close()


async def test_the_export_needs_the_admin_token_in_a_header(vtt_server: Server, vtt_table) -> None:
    url = vtt_server.http_url + "/admin/export?room=r1"

    def fetch(headers: dict[str, str], target: str = url) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(urllib.request.Request(target, headers=headers)) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    status, body = await asyncio.to_thread(fetch, {})
    assert status == 401 and b"Bearer" in body
    status, _ = await asyncio.to_thread(fetch, {"Authorization": "Bearer wrong-" + "x" * 40})
    assert status == 401
    status, _ = await asyncio.to_thread(fetch, {"Authorization": ADMIN_TOKEN})  # no scheme
    assert status == 401
    ok = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    status, body = await asyncio.to_thread(fetch, ok)
    assert status == 200 and json.loads(body)["room"] == "r1"
    status, _ = await asyncio.to_thread(fetch, ok, vtt_server.http_url + "/admin/export?room=no")
    assert status == 404
    status, _ = await asyncio.to_thread(fetch, ok, vtt_server.http_url + "/admin/nothing")
    assert status == 404
    # the CLI says why, and exits 3 for a bad token
    assert await vtt("admin", "export", "r1", "--url", vtt_server.url, "--token", "x" * 40) == 3


async def test_a_backup_under_load_is_sound_and_a_server_starts_on_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with running_server(data) as srv:
        tables = [await create_table(srv.url, room=f"room{i}") for i in range(3)]
        gms = [await t.connect("gm") for t in tables]
        stop = asyncio.Event()

        async def load(t: Table, gm: Any) -> None:
            i = 0
            while not stop.is_set():
                # a hit, then as much healed: however long the backups take, nobody dies
                op = "heal" if i % 2 else "damage"
                await gm.ok(op, {"char": t.chars["c_npc"], "amount": 1})
                i += 1

        writers = [asyncio.create_task(load(t, gm)) for t, gm in zip(tables, gms, strict=True)]
        await gms[0].wait_v(gms[0].v + 20)  # the load is on
        backups = [tmp_path / f"backup{i}.sqlite3" for i in range(3)]
        for b in backups:  # several, while the commands keep coming
            assert await vtt("admin", "backup", str(b), "--data-dir", str(data)) == 0
        stop.set()
        await asyncio.gather(*writers)
        versions_at_end = [gm.v for gm in gms]
        for gm in gms:
            await gm.close()
    for b in backups:
        db = sqlite3.connect(b)
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file
        db.close()
    restored = tmp_path / "restored"
    restored.mkdir()
    shutil.copy(backups[-1], restored / DB_FILE)
    async with running_server(restored) as again:
        for i, t in enumerate(tables):
            gm = await connect(again.url, t.tokens["gm"], f"room{i}")
            assert 0 < gm.v <= versions_at_end[i]
            await gm.ok("damage", {"char": t.chars["c_npc"], "amount": 1})  # it goes on
            await gm.close()
    assert await vtt("admin", "backup", str(tmp_path / "x"), "--data-dir", str(tmp_path)) == 2
