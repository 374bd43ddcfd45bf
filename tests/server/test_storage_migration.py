"""A data directory written by an older server opens with this one.

`data/sqlite_schema2.sql` is the dump of a database written by the server
of schema 2 (one column per field of a version, two indexes), with what that
server exported of its room in `data/sqlite_schema2.json`: a room of 22
versions, three snapshots, an undo, a rotated token. Schema 4 keeps one
blob per version (after schema 3's column of views), schema 5 a version's
result and time in columns beside it; the migrations must
keep every version, the undo marks, the dedup window and the tokens.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from sync_server.core.auth import hash_token
from sync_server.storage import transfer
from sync_server.storage.sqlite import DB_FILE, SCHEMA_VERSION, SqliteStorage
from sync_server.testing.server import connect, running_server

DATA = Path(__file__).parent / "data"


def old_data_dir(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    data = tmp_path / "data"
    data.mkdir()
    conn = sqlite3.connect(data / DB_FILE)
    conn.executescript((DATA / "sqlite_schema2.sql").read_text())
    conn.close()
    return data, json.loads((DATA / "sqlite_schema2.json").read_text())


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("exported_at", "server_version")}


async def test_a_schema_2_database_migrates_with_every_version(tmp_path: Path) -> None:
    data, old = old_data_dir(tmp_path)
    store = SqliteStorage(data)
    await store.open()
    try:
        dump = await store.export_room(old["room"])
        assert dump is not None
        assert comparable(transfer.to_document(dump, with_token_hashes=True)) == comparable(
            old["export"]
        )
        target = await store.undo_target(old["room"])
        assert target is not None
        assert [target.v, target.op, target.user] == old["undo_target"]
        assert await store.find_token(hash_token(old["gm_token"])) == (old["room"], old["gm"])
        loaded = await store.load_room(old["room"], 500, 100_000)
        assert loaded is not None
        assert [d.cmd_id for d in loaded.dedup][-3:] == ["undo-1", "rot-1", "clk-1"]
    finally:
        await store.close()
    conn = sqlite3.connect(data / DB_FILE)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == (
        SCHEMA_VERSION,
    )
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


async def test_a_server_serves_a_migrated_room_on(tmp_path: Path) -> None:
    data, old = old_data_dir(tmp_path)
    head = old["export"]["head"]
    async with running_server(data) as srv:
        gm = await connect(srv.url, old["gm_token"], old["room"])
        assert gm.v == head
        dup = await gm.cmd("damage", {"char": old["npc"], "amount": 1}, id="dmg-3")
        assert dup["t"] == "ack" and dup.get("dup")  # remembered across the migration
        assert gm.v == head
        # Explicit ids from here: the old server's test client used c-1, c-2... too.
        undo = await gm.ok("undo", {}, id="new-1")  # the last undoable version: clk-1
        assert undo["result"]["undone"] == old["undo_target"][0]
        await gm.ok("damage", {"char": old["npc"], "amount": 1}, id="new-2")
        await gm.wait_v(head + 2)
        await gm.close()
    async with running_server(data) as srv:  # and it stays where it was
        gm = await connect(srv.url, old["gm_token"], old["room"])
        assert gm.v == head + 2
        await gm.close()
