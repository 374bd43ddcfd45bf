"""TLS end to end, with self-signed certificates the test makes (openssl):
https:// and wss:// on one port, the Python client and CLI with --ca-file,
a reload into the live context (new connections see the new certificate,
a bad pair changes nothing), and SIGHUP to a child server."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import shutil
import signal
import ssl
import subprocess
from pathlib import Path

import pytest

import rules
from client_stub import Client, ConnectionFailed, tls_context
from client_stub.cli import main as client_main
from sync_server.hosting.tls import TlsError
from sync_server.testing.server import seen_by
from tests.helpers.http import api, bearer, events
from tests.helpers.server import (
    ADMIN_TOKEN,
    WAIT,
    create_table,
    on_both_transports,
    open_ws,
    running_server,
    start_subprocess_server,
)

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")

pytestmark = on_both_transports  # issue 22: the fast transport keeps the protocol


def make_cert(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (EC P-256: fast)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert),
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def certs(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    return {name: make_cert(tmp_path / "certs", name) for name in ("first", "second")}


def fingerprint_of_server(port: int) -> str:
    """SHA-256 of the certificate the server presents to a new connection."""
    pem = ssl.get_server_certificate(("127.0.0.1", port), timeout=10)
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()


def fingerprint_of_file(cert: Path) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert.read_text())).hexdigest()


def https_get(port: int, path: str, cafile: Path, method: str = "GET") -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection(
        "127.0.0.1", port, timeout=10, context=ssl.create_default_context(cafile=str(cafile))
    )
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


@pytest.mark.http_door  # the HTTP API / the admin's HTTP export
async def test_https_and_wss_with_a_self_signed_certificate(tmp_path: Path, certs) -> None:
    cert, key = certs["first"]
    async with running_server(tmp_path / "data", tls_cert=cert, tls_key=key) as srv:
        assert srv.url.startswith("wss://") and srv.http_url.startswith("https://")
        status, body = await asyncio.to_thread(https_get, srv.port, "/healthz", cert)
        assert status == 200 and json.loads(body)["status"] == "ok"
        status, body = await asyncio.to_thread(https_get, srv.port, "/", cert, "HEAD")
        assert status == 200 and body == b""
        ctx = tls_context(str(cert))
        t = await create_table(srv.url, ssl=ctx)  # the raw protocol client over wss://
        gm = await t.connect("gm")
        await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 2})
        # the HTTP API behind the same certificate: a command, and the stream
        async with api(srv.http_url, verify=ctx) as c, events(c, "r1", t.tokens["p2"]) as s:
            assert (await s.next()).event == "snapshot"
            body = {"op": "damage", "args": {"char": t.chars["c_p1"], "amount": 1}}
            r = await c.post("/api/v1/rooms/r1/commands", headers=bearer(t.tokens["gm"]), json=body)
            assert r.status_code == 200, r.text
            assert (await s.next()).id == r.json()["v"]
        await gm.wait_v(r.json()["v"])
        # the Python client, trusting the certificate
        async with Client(srv.url, t.tokens["p1"], "r1", ssl_context=ctx) as p1:
            await p1.wait_version(gm.v, timeout=WAIT)
            assert p1.state == seen_by(gm.state, rules.Viewer(p1.user, p1.role))
        # without it, the certificate is refused: a clear connection failure
        with pytest.raises(ConnectionFailed, match=r"certificate is not trusted.*--ca-file"):
            async with Client(srv.url, t.tokens["p1"], "r1", retry_first=False):
                pass
        # plain ws:// to the TLS port gets no session
        with pytest.raises(Exception):  # noqa: B017 - whatever the handshake breaks on
            await open_ws(srv.url.replace("wss://", "ws://"))
        # the CLI: --ca-file, or VTT_SYNC_CA_FILE
        argv = ["state", "--url", srv.url, f"--token={t.tokens['obs']}", "--room", "r1"]
        code = await asyncio.to_thread(client_main, [*argv, "--ca-file", str(cert), "--compact"])
        assert code == 0
        assert await asyncio.to_thread(client_main, argv) == 3  # untrusted: no connection
        await gm.close()


@pytest.mark.http_door  # `admin rooms` reads /admin/rooms over HTTPS
async def test_an_untrusted_certificate_names_the_fix_in_both_clis(
    tmp_path: Path, certs, capsys: pytest.CaptureFixture[str]
) -> None:
    """A self-signed certificate without --ca-file: `client` and `admin` say
    it is not trusted and name --ca-file, in the same words; with it, both work."""
    from sync_server.ops.cli import main as vtt_main

    cert, key = certs["first"]
    async with running_server(tmp_path / "data", tls_cert=cert, tls_key=key) as srv:
        t = await create_table(srv.url, ssl=tls_context(str(cert)))
        client = ["state", "--url", srv.url, f"--token={t.tokens['obs']}", "--room", "r1"]
        admin = ["admin", "rooms", "--url", srv.url, "--token", ADMIN_TOKEN]
        said = []
        for main, argv in ((client_main, client), (vtt_main, admin)):
            assert await asyncio.to_thread(main, argv) == 3
            out, err = capsys.readouterr()
            assert out == "" and len(err.splitlines()) == 1, err
            assert "certificate is not trusted (self-signed certificate)" in err, err
            assert "--ca-file FILE (or VTT_SYNC_CA_FILE)" in err, err
            said.append(err.split(": ", 1)[1].split(": ", 1)[1])  # after "cannot connect to URL"
            assert await asyncio.to_thread(main, [*argv, "--ca-file", str(cert)]) == 0
            capsys.readouterr()
        assert said[0] == said[1]  # one wording


async def test_reload_serves_the_new_certificate_to_new_connections(tmp_path: Path, certs) -> None:
    live_cert, live_key = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(certs["first"][0], live_cert)
    shutil.copy(certs["first"][1], live_key)
    async with running_server(tmp_path / "data", tls_cert=live_cert, tls_key=live_key) as srv:
        first = fingerprint_of_file(certs["first"][0])
        assert await asyncio.to_thread(fingerprint_of_server, srv.port) == first
        both = tmp_path / "both.pem"  # a client trusting either certificate
        both.write_text(certs["first"][0].read_text() + certs["second"][0].read_text())
        t = await create_table(srv.url, ssl=tls_context(str(both)))
        gm = await t.connect("gm")  # opened under the first certificate
        # a half-done renewal (the new certificate, the old key) is refused, nothing changes
        shutil.copy(certs["second"][0], live_cert)
        assert srv.reload_tls() is False
        assert await asyncio.to_thread(fingerprint_of_server, srv.port) == first
        shutil.copy(certs["second"][1], live_key)
        assert srv.reload_tls() is True
        second = fingerprint_of_file(certs["second"][0])
        assert second != first
        assert await asyncio.to_thread(fingerprint_of_server, srv.port) == second
        await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 1})  # still open, still works
        p1 = await t.connect("p1")
        assert p1.v == gm.v
        await p1.close()
        await gm.close()


def test_a_missing_or_mismatched_pair_is_a_clear_error(tmp_path: Path, certs) -> None:
    from sync_server.hosting.tls import ServerTls

    with pytest.raises(TlsError, match="no such file"):
        ServerTls(tmp_path / "nope.crt", certs["first"][1])
    with pytest.raises(TlsError, match="cannot use the certificate"):
        ServerTls(certs["first"][0], certs["second"][1])


async def test_sighup_reloads_the_certificate_of_a_running_server(tmp_path: Path, certs) -> None:
    live_cert, live_key = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(certs["first"][0], live_cert)
    shutil.copy(certs["first"][1], live_key)
    child = start_subprocess_server(
        tmp_path / "data", "--log-level", "INFO", env={
            "VTT_SYNC_TLS_CERT": str(live_cert), "VTT_SYNC_TLS_KEY": str(live_key)},
    )  # fmt: skip
    try:
        assert child.url.startswith("wss://")
        port = int(child.url.rsplit(":", 1)[1].strip("/"))
        assert await asyncio.to_thread(fingerprint_of_server, port) == fingerprint_of_file(
            certs["first"][0]
        )
        shutil.copy(certs["second"][0], live_cert)
        shutil.copy(certs["second"][1], live_key)
        child.proc.send_signal(signal.SIGHUP)
        assert child.proc.stdout is not None

        def wait_for_reload() -> str:
            for _ in range(200):  # bounded: the line comes within a few lines
                line = child.proc.stdout.readline()
                if not line or "TLS certificate reloaded" in line:
                    return line
            return ""

        line = await asyncio.wait_for(asyncio.to_thread(wait_for_reload), WAIT)
        assert "TLS certificate reloaded" in line
        assert await asyncio.to_thread(fingerprint_of_server, port) == fingerprint_of_file(
            certs["second"][0]
        )
        assert child.terminate() == 0
    finally:
        if child.proc.poll() is None:
            child.kill()


async def test_wss_and_the_get_routes_behind_one_certificate(tmp_path: Path, certs) -> None:
    """Issue 22: TLS holds on both transports (the fast one serves no HTTP
    API, so this is the part of the test above that both serve)."""
    cert, key = certs["first"]
    async with running_server(tmp_path / "data", tls_cert=cert, tls_key=key) as srv:
        status, body = await asyncio.to_thread(https_get, srv.port, "/healthz", cert)
        assert status == 200 and json.loads(body)["status"] == "ok"
        t = await create_table(srv.url, ssl=tls_context(str(cert)))
        gm, p1 = await t.connect("gm"), await t.connect("p1", "json")
        ack = await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 2})
        await p1.wait_v(ack["v"])
        assert p1.state == p1.seen(gm.state)
        await gm.close()
        await p1.close()
