"""docs/http.md's status table lists every HTTP status the API answers, and
only those: read from the code that answers (the error codes' `STATUS`,
each status written as a number where a request is answered or refused,
h11's hint for a head over the bound), and a real server gives the ones a
newcomer meets first (405, 431) with their documented code."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import pytest

from sync_server.core.limits import MAX_HTTP_HEAD_BYTES
from sync_server.hosting import api
from tests.helpers.http import api as http_client
from tests.helpers.server import running_server

REPO = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| (\d{3}) \| ([^|]*) \|", flags=re.M)
# The functions that answer a request with a status given as a number:
# the connection's respond/respond_error (first argument), a refused read
# or body (_refuse_read, BodyRefused: first) and a Refusal (third argument,
# or status=).
ANSWERS = {"respond": 0, "respond_error": 0, "_refuse_read": 0, "BodyRefused": 0, "Refusal": 2}
# h11 refuses a request whose line and headers pass its
# max_incomplete_event_size with this status hint (h11/_connection.py,
# Connection._extract_next_receive_event: "Receive buffer too long").
HEAD_TOO_BIG = 431


def documented() -> dict[int, str]:
    text = (REPO / "docs/http.md").read_text(encoding="utf-8")
    return {int(status): codes for status, codes in ROW.findall(text)}


def answered_in_code() -> set[int]:
    found = {HEAD_TOO_BIG, *api.STATUS.values()}
    for module in ("sync_server/hosting/api.py", "sync_server/hosting/http1.py"):
        tree = ast.parse((REPO / module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name not in ANSWERS:
                continue
            index = ANSWERS[name]
            args = [*node.args, *(k.value for k in node.keywords if k.arg == "status")]
            if len(node.args) > index:
                args = [node.args[index]]
            for arg in args:  # a number, or numbers chosen between (413 if ... else 400)
                for sub in ast.walk(arg):
                    if isinstance(sub, ast.Constant) and type(sub.value) is int:
                        found.add(sub.value)
    return found


def test_the_status_table_lists_every_status_the_api_answers() -> None:
    table = documented()
    assert set(table) == answered_in_code()
    for code, status in api.STATUS.items():
        assert f"`{code}`" in table[status], (code, status, table[status])


@pytest.mark.http_door
async def test_a_wrong_method_and_an_oversized_head_get_their_documented_status(
    tmp_path: Path,
) -> None:
    table = documented()
    async with (
        running_server(tmp_path / "data") as srv,
        http_client("http" + srv.url[2:]) as c,
    ):
        r = await c.get("/api/v1/rooms/r1/commands")
        assert r.status_code == 405 and r.headers["allow"] == "POST, OPTIONS"
        assert f"`{r.json()['code']}`" in table[405]
        r = await c.options("/api/v1/rooms/r1/commands")
        assert r.status_code == 204 and "POST" in r.headers["allow"]
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        # a head that goes on past the bound (never ended: h11 judges
        # what it holds unparsed)
        writer.write(b"GET /api/v1/rooms/r1 HTTP/1.1\r\nX-Big: " + b"a" * MAX_HTTP_HEAD_BYTES)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        assert status_line.split()[1] == b"431", status_line
