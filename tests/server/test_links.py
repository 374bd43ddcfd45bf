"""Links that work for friends elsewhere: every link the server prints or
serves names the address players reach (https with TLS; `--public-url`
when set), and `serve` says where the page and the admin page are."""

from __future__ import annotations

import asyncio
import io
import json
import re
import shutil
import urllib.request
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from client_stub.cli import main as client_main
from sync_server.testing.server import ADMIN_TOKEN
from tests.helpers.server import running_server, start_subprocess_server
from tests.server.test_tls import https_get, make_cert

LINK = re.compile(r"(https?://\S+)#room=demo&token=\S+")


def served(child) -> str:  # type: ignore[no-untyped-def]
    return "".join(child.output)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
def test_demo_with_tls_prints_https_links_that_answer(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path / "certs", "node")
    child = start_subprocess_server(
        tmp_path / "data", "--demo", "--tls-cert", str(cert), "--tls-key", str(key)
    )
    try:
        port = int(child.url.rsplit(":", 1)[1])
        out = served(child)
        links = LINK.findall(out)
        assert len(links) == 5, out
        assert set(links) == {f"https://127.0.0.1:{port}/"}
        assert f"page:       https://127.0.0.1:{port}/" in out
        assert f"admin page: https://127.0.0.1:{port}/admin.html" in out
        status, body = https_get(port, "/", cert)  # the printed page answers, over TLS
        assert status == 200 and b"<html" in body.lower()
    finally:
        child.terminate()


def test_plain_serve_prints_the_page_and_admin_page(tmp_path: Path) -> None:
    child = start_subprocess_server(tmp_path / "data")
    try:
        port = int(child.url.rsplit(":", 1)[1])
        out = served(child)
        assert f"page:       http://127.0.0.1:{port}/" in out
        assert f"admin page: http://127.0.0.1:{port}/admin.html" in out
        assert "--public-url" in out  # links name this machine only: says how to fix it
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin.html", timeout=10) as r:
            assert r.status == 200
    finally:
        child.terminate()


def test_every_interface_without_a_public_url_says_the_links_are_local(tmp_path: Path) -> None:
    child = start_subprocess_server(tmp_path / "data", "--host", "0.0.0.0", "--demo")
    try:
        out = served(child)
        assert "links name this machine only" in out and "--public-url" in out
    finally:
        child.terminate()


def test_public_url_names_every_link(tmp_path: Path) -> None:
    child = start_subprocess_server(
        tmp_path / "data", "--demo", "--public-url", "https://vtt.example/vtt/"
    )
    try:
        port = int(child.url.rsplit(":", 1)[1])
        out = served(child)
        assert set(LINK.findall(out)) == {"https://vtt.example/vtt/"}, out
        assert "page:       https://vtt.example/vtt/" in out
        assert "admin page: https://vtt.example/vtt/admin.html" in out
        assert "links name this machine only" not in out
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/links.json", timeout=10) as r:
            assert json.loads(r.read()) == {"page": "https://vtt.example/vtt/"}
        # create-room through the local address still prints the public link
        stdout, stderr = io.StringIO(), io.StringIO()
        with redirect_stdout(stdout), redirect_stderr(stderr):
            code = client_main(
                ["create-room", "Thursday table", f"--url=ws://127.0.0.1:{port}/",
                 f"--token={ADMIN_TOKEN}"]
            )  # fmt: skip
        assert code == 0, stderr.getvalue()
        assert stdout.getvalue().startswith("https://vtt.example/vtt/#room=thursday-table&token=")
    finally:
        child.terminate()


async def test_links_json_without_a_public_url_is_null(tmp_path: Path) -> None:
    async with running_server(tmp_path / "data") as srv:
        url = f"http://127.0.0.1:{srv.port}/links.json"
        body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read())
        assert json.loads(body) == {"page": None}
        assert srv.page_url == f"http://127.0.0.1:{srv.port}/" and srv.links_local


def _run(main, argv: list[str]) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = main(argv)
    return code, stdout.getvalue(), stderr.getvalue()


def test_cli_invitations_and_gm_links_name_the_public_url_given_as_http(tmp_path: Path) -> None:
    """`serve --public-url http://vtt.lan:PORT/`: the configuration shows the
    address as typed, and every link a CLI prints through the local address
    (create-room, `cmd add_user`, `cmd rotate_token`, `admin gm-link`) names
    the public one; the cluster redirect address stays a WebSocket one."""
    from sync_server.ops.cli import main as vtt_main

    public = "http://vtt.lan:18765/"
    child = start_subprocess_server(tmp_path / "data", "--public-url", public)
    try:
        port = int(child.url.rsplit(":", 1)[1])
        local = f"ws://127.0.0.1:{port}/"
        out = served(child)
        assert re.search(rf"public_url\s+{re.escape(public)}\s+\(flag\)", out), out
        assert "ws://vtt.lan" not in out
        assert f"page:       {public}" in out
        code, link, err = _run(
            client_main, ["create-room", "Thursday", f"--url={local}", f"--token={ADMIN_TOKEN}"]
        )
        assert code == 0, err
        assert link.startswith(f"{public}#room=thursday&token="), link
        gm_token = link.strip().rsplit("token=", 1)[1]
        gm = ["--url", local, "--room", "thursday", "--token", gm_token]
        code, said, err = _run(client_main, ["cmd", *gm, "add_user", "name=Dana", "role=player"])
        assert code == 0, err
        (invite,) = re.findall(r"\S+#room=thursday&token=\S+", said)
        assert invite.startswith(public), said
        code, state, err = _run(client_main, ["state", *gm])
        assert code == 0, err
        (user,) = [u for u, d in json.loads(state)["users"].items() if d["name"] == "Dana"]
        code, said, err = _run(client_main, ["cmd", *gm, "rotate_token", f"user={user}"])
        assert code == 0, err
        (renewed,) = re.findall(r"\S+#room=thursday&token=\S+", said)
        assert renewed.startswith(public) and renewed != invite, said
        code, said, err = _run(
            vtt_main, ["admin", "gm-link", "thursday", "--url", local, "--token", ADMIN_TOKEN]
        )
        assert code == 0, err
        assert said.startswith(f"{public}#room=thursday&token="), said
    finally:
        child.terminate()


def test_one_function_builds_every_link() -> None:
    from sync_server.wire import links

    assert links.ws_url("https://vtt.example/vtt/#room=x") == "wss://vtt.example/vtt/"
    assert links.ws_url("127.0.0.1:8765") == "ws://127.0.0.1:8765/"
    for given in ("ws://h:1", "http://h:1/", "h:1"):
        assert links.page_base(given) == "http://h:1/"
    assert links.page_base("wss://vtt.example/vtt") == "https://vtt.example/vtt/"
    assert links.page_base("https://vtt.example/vtt/?x=1") == "https://vtt.example/vtt/"
    assert (
        links.page_link("ws://127.0.0.1:8765/", "r 1", "t&k", "https://vtt.example/")
        == "https://vtt.example/#room=r+1&token=t%26k"
    )
    assert links.page_link("wss://h:1/", "r", "t") == "https://h:1/#room=r&token=t"
    assert links.links_document(None) == {"page": None}
    assert links.links_document("ws://vtt.lan:8765") == {"page": "http://vtt.lan:8765/"}

    def server_says(body: bytes) -> Callable[[str], bytes]:
        def fetch(url: str) -> bytes:
            assert url == "http://h:1/links.json"
            return body

        return fetch

    def unreachable(url: str) -> bytes:
        raise OSError("connection refused")

    assert links.public_page("ws://h:1", server_says(b'{"page": "https://p/"}')) == "https://p/"
    assert links.public_page("ws://h:1", server_says(b'{"page": null}')) is None
    assert links.public_page("ws://h:1", server_says(b"<html>")) is None  # an older server
    assert links.public_page("ws://h:1", server_says(b'{"page": "javascript:x"}')) is None
    assert links.public_page("ws://h:1", unreachable) is None
