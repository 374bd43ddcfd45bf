"""The project's files for hosting: one version everywhere, the license, the
changelog, py.typed, the systemd unit and docs/deploy.md in step with the
settings table."""

from __future__ import annotations

import configparser
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from sync_server import __version__
from sync_server.ops.cli import build_parser
from sync_server.ops.settings import SETTINGS, read_file, resolve

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_reported_everywhere() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sync_server", "--version"],
        cwd=ROOT, capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == f"vtt-sync {__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "sync_server.version.__version__"
    }
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(__version__)}\b", changelog, flags=re.M)


def test_license_and_typed_client() -> None:
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == {"text": "MIT"}
    assert (ROOT / "client_stub" / "py.typed").exists()
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["client_stub"]


def _unit() -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # keys are case-sensitive in systemd
    unit.read(ROOT / "contrib" / "vtt-sync.service")
    return unit


def test_the_systemd_unit_runs_serve_hardened() -> None:
    service = _unit()["Service"]
    argv = shlex.split(service["ExecStart"])
    assert Path(argv[0]).name == "vtt-sync"
    ns = build_parser().parse_args(argv[1:])  # flags the CLI really has
    assert ns.command == "serve" and ns.config == "/etc/vtt-sync/config.toml"
    assert service["User"] == "vtt-sync" and service["StateDirectory"] == "vtt-sync"
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"  # TLS reload
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "CapabilityBoundingSet": "",
        "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    }.items():
        assert service[key] == value, key
    env = dict(e.split("=", 1) for e in [service["Environment"]])
    assert env["VTT_SYNC_DATA_DIR"] == "/var/lib/vtt-sync"


def test_deploy_md_lists_every_setting_and_its_example_config_loads(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "deploy.md").read_text()
    for s in SETTINGS:
        row = next((line for line in text.splitlines() if line.startswith(f"| `{s.name}`")), None)
        assert row is not None, f"docs/deploy.md: no row for {s.name}"
        assert f"`{s.env_name}`" in row
        if s.flag_name:
            assert f"`{s.flag_name}`" in row
    (example,) = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    conf = tmp_path / "config.toml"
    conf.write_text(example)
    assert set(read_file(conf)) <= {s.name for s in SETTINGS}
    got = resolve({"config": str(conf)}, environ={})
    assert got["log_format"] == "json" and got["port"] == 8765
