"""Write a data directory with a released vtt-sync, for the upgrade tests.

Run it with the released code on the path (its own tests/helpers), e.g.

    mkdir /tmp/v010 && git archive ba0dbd0 | tar -x -C /tmp/v010
    cd /tmp/v010 && PYTHONPATH=$PWD python3 /path/to/scripts/make_release_datadir.py \\
        /path/to/tests/fixtures/datadirs/0.1.0

It starts that version's server on port 0 in the target directory, plays a
short session (users, characters, a status NPC and, where the version has
`shown`, a hidden one, damage, a clock advance, an undo), and writes
`expected.json` beside the database: the tokens, the character ids, the
head version, and the GM's state at every version (the GM sees everything
in every version), which the test turns into each viewer's view.
tests/server/test_upgrade.py opens these directories with today's code.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import sys
from pathlib import Path

import sync_server
from tests.helpers.server import create_table, running_server
from tests.helpers.table import SHEET

DB_FILE = "vtt-sync.sqlite3"


async def main(out: Path) -> None:
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    states: dict[int, dict] = {}
    async with running_server(work) as srv:
        t = await create_table(srv.url)
        gm = await t.connect("gm")
        states[gm.v] = copy.deepcopy(gm.state)

        async def ok(op: str, args: dict) -> dict:
            ack = await gm.ok(op, args)
            await gm.wait_v(ack["v"])
            states[gm.v] = copy.deepcopy(gm.state)
            return ack

        npc = t.chars["c_npc"]
        secret = None
        try:
            ack = await ok(
                "add_character",
                {**SHEET, "name": "Secret-Liche-QWV", "pv_max": 9887, "shown": "hidden"},
            )
            secret = ack["result"]["char"]
        except AssertionError:  # a version without `shown`
            pass
        await ok("damage", {"char": t.chars["c_p1"], "amount": 3})
        await ok("damage", {"char": npc, "amount": 4})
        await ok("advance_clock", {"seconds": 60})
        if secret is not None:
            await ok("damage", {"char": secret, "amount": 5})
        await ok("damage", {"char": t.chars["c_p2"], "amount": 2})
        await ok("undo", {})
        await ok("heal", {"char": t.chars["c_p1"], "amount": 1})
        await gm.close()
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(work / DB_FILE, out / DB_FILE)
    shutil.rmtree(work)
    expected = {
        "made_by": sync_server.__dict__.get("__version__", "0.1.0"),
        "room": t.room,
        "tokens": t.tokens,
        "users": t.users,
        "chars": {**t.chars, **({"secret": secret} if secret else {})},
        "head": max(states),
        "states": {str(v): s for v, s in sorted(states.items())},
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
