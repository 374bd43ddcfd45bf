"""Upgrades: a data directory written by each released version opens in
this one, and serves every viewer as before (CHANGELOG.md, "Upgrading").

tests/fixtures/datadirs/<version>/ holds a database written by that version
(scripts/make_release_datadir.py, run with that version's code: 0.1.0 is
commit ba0dbd0, the last to write schema 1; 0.2.0 is commit 9f7e09f, schema
2; schema3-42315f9 is unreleased main at 42315f9, schema 3, the views in
their own column; schema4-09364e4 is main at 09364e4, schema 4, one blob per
version) and `expected.json`: its tokens, character ids, head, and the GM's state
at every version. Opening it migrates it (SQLite schema 1 -> 2: the head;
2 -> 3: each version's views rebuilt from the log; 3 -> 4: one blob per
version; 4 -> 5: result and ts in columns of their own); then old links
still work, the state is the one that version left, and a player or an
observer resuming from an old version gets their view's patches, events
included (not a snapshot), before and after one more restart.

A PostgreSQL schema of 0.2.0 (schema 1, the one that version creates) is
filled with the 0.2.0 fixture's rows and opened the same way.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import msgpack
import pytest

from rules import Viewer, apply_ops, view_state
from sync_server.storage.postgres import MIGRATIONS, PgStorage
from sync_server.storage.sqlite import DB_FILE, SCHEMA_VERSION
from sync_server.testing.postgres import admin_dsn, create_database, drop_database
from sync_server.testing.server import Table, seen_by, without_affordances
from tests.helpers.server import running_server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "datadirs"
RELEASES = ("0.1.0", "0.2.0", "schema3-42315f9", "schema4-09364e4")
ROLES = {"p1": "player", "p2": "player", "obs": "observer"}


def fixture(version: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    data = tmp_path / f"data-{version}"
    data.mkdir()
    shutil.copyfile(FIXTURES / version / DB_FILE, data / DB_FILE)
    return data, json.loads((FIXTURES / version / "expected.json").read_text())


def first(expected: dict[str, Any]) -> int:
    """The first version whose state the fixture kept (once the table was set)."""
    return min(int(v) for v in expected["states"])


def table(url: str, expected: dict[str, Any]) -> Table:
    return Table(url, expected["room"], expected["tokens"], expected["users"], expected["chars"])


async def check_viewers(t: Table, expected: dict[str, Any], since: int) -> None:
    """The GM gets the state that version left; each player and the observer
    resuming from `since` gets the patches after it as their view, and ends
    with their view of the room; history reaches back to `since` for them."""
    head, states = expected["head"], expected["states"]
    gm = await t.connect("gm")
    assert gm.v == head and without_affordances(gm.state) == states[str(head)]
    for who, role in ROLES.items():
        viewer = Viewer(expected["users"][who], role)
        base = view_state(states[str(since)], viewer)
        c = await t.connect(who, since=since, base=base)
        assert [p["v"] for p in c.welcome["patches"]] == list(range(since + 1, head + 1)), who
        assert without_affordances(c.state) == view_state(states[str(head)], viewer), who
        # what they may do: set whole by the last patch (those from the log carry none)
        assert c.state == seen_by(gm.state, viewer), who
        reply = await c.sync(since)
        assert reply["t"] == "patches" and len(reply["patches"]) == head - since
        assert any(p["events"] for p in reply["patches"]), who
        mirror = view_state(states[str(since)], viewer)
        for p in reply["patches"]:
            apply_ops(mirror, p["ops"])
        assert mirror == c.state
        await c.close()
    await gm.close()


@pytest.mark.parametrize("version", RELEASES)
async def test_a_data_directory_of_each_release_opens(tmp_path, version) -> None:
    data, expected = fixture(version, tmp_path)
    conn = sqlite3.connect(data / DB_FILE)
    found = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
    conn.close()
    assert (
        found
        == {"0.1.0": "1", "0.2.0": "2", "schema3-42315f9": "3", "schema4-09364e4": "4"}[version]
    )
    async with running_server(data) as srv:
        t = table(srv.url, expected)
        await check_viewers(t, expected, since=first(expected))
        gm = await t.connect("gm")
        obs = await t.connect("obs")
        args = {"char": expected["chars"]["c_npc"], "amount": 1}
        ack = await gm.ok("damage", args, id="after-the-upgrade")  # not an id of the old log
        assert not ack.get("dup")
        await obs.wait_v(ack["v"])
        assert obs.state == obs.seen(gm.state)
        expected["states"][str(ack["v"])] = without_affordances(gm.state)
        expected["head"] = ack["v"]
        await gm.close()
        await obs.close()
    conn = sqlite3.connect(data / DB_FILE)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == (
        SCHEMA_VERSION
    )
    conn.close()
    async with running_server(data) as srv:  # and once more, migrated
        await check_viewers(table(srv.url, expected), expected, since=first(expected) + 2)


async def test_a_schema_4_directory_keeps_its_dedup_answers(tmp_path) -> None:
    """4 -> 5 moves each version's result and ts out of its blob: a retry of
    a command stored before the migration still gets its original ack (its
    version and result), from the dedup window loaded out of the new columns."""
    data, expected = fixture("schema4-09364e4", tmp_path)
    conn = sqlite3.connect(data / DB_FILE)
    stored = [
        (v, cmd_id, msgpack.unpackb(rec, strict_map_key=False))
        for v, cmd_id, rec in conn.execute(
            "SELECT v, cmd_id, rec FROM versions WHERE user = ? ORDER BY v",
            (expected["users"]["gm"],),
        )
    ]
    conn.close()
    # The fixture's commands are older than a day: no age bound here.
    async with running_server(data, dedup_window_seconds=float("inf")) as srv:
        gm = await table(srv.url, expected).connect("gm")
        for v, cmd_id, f in (stored[3], stored[-1]):  # an add_character, the last heal
            dup = await gm.cmd(f["op"], f["args"], id=cmd_id)
            assert dup["t"] == "ack" and dup.get("dup"), cmd_id
            assert (dup["v"], dup["result"]) == (v, f["result"]), cmd_id
        assert gm.v == expected["head"]  # nothing new was committed
        await gm.close()


async def test_a_postgresql_schema_of_0_2_0_opens(tmp_path) -> None:
    data, expected = fixture("0.2.0", tmp_path)
    dsn, name = await create_database(admin_dsn())
    try:
        import asyncpg

        conn = await asyncpg.connect(dsn)
        try:  # the schema 0.2.0 creates (its only migration), filled with its rows
            await conn.execute("CREATE TABLE schema_version (version integer)")
            for statement in MIGRATIONS[0]:
                assert isinstance(statement, str)
                await conn.execute(statement)
            await conn.execute("INSERT INTO schema_version VALUES (1)")
            lite = sqlite3.connect(data / DB_FILE)
            for room, created, head in lite.execute("SELECT room, created, head FROM rooms"):
                snap_v = lite.execute(
                    "SELECT max(v) FROM snapshots WHERE room = ?", (room,)
                ).fetchone()[0]
                await conn.execute(
                    "INSERT INTO rooms (room, created, head, snapshot_v) VALUES ($1, $2, $3, $4)",
                    room,
                    created,
                    head,
                    snap_v,
                )
            await conn.executemany(
                "INSERT INTO users (room, user_id, token_hash) VALUES ($1, $2, $3)",
                lite.execute("SELECT room, user, token_hash FROM users").fetchall(),
            )
            await conn.executemany(
                "INSERT INTO snapshots (room, v, state) VALUES ($1, $2, $3)",
                lite.execute("SELECT room, v, state FROM snapshots").fetchall(),
            )
            rows = lite.execute(
                "SELECT room, v, cmd_id, user, op, args, ops, inverse, events, result,"
                " undoable, undone, undoes, ts FROM versions"
            ).fetchall()
            await conn.executemany(
                "INSERT INTO versions (room, v, cmd_id, user_id, op, args, ops, inverse, events,"
                " result, undoable, undone, undoes, ts)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                [(*r[:10], bool(r[10]), bool(r[11]), *r[12:]) for r in rows],
            )
            lite.close()
        finally:
            await conn.close()
        storage = PgStorage(dsn)
        await storage.open()
        try:
            stored = await storage.load_room(expected["room"], 500, 100)
            assert stored is not None
            assert any(row.views is not None for row in stored.log)  # rebuilt on migration
        finally:
            await storage.close()
        async with running_server(tmp_path / "pgnode", database=dsn, node_id="n1") as srv:
            await check_viewers(table(srv.url, expected), expected, since=first(expected))
    finally:
        await drop_database(name, admin_dsn())
