"""`serve`'s settings: flag > environment > TOML file > default, each value's
source printed at start with secrets masked, clear errors naming where a bad
value came from, and the table filling `Config`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import attrs
import pytest

from sync_server.core.ratelimit import RateSpec
from sync_server.hosting.config import Config
from sync_server.observe import logs
from sync_server.ops.cli import build_parser, print_configuration
from sync_server.ops.settings import (
    BY_NAME,
    MASK,
    SETTINGS,
    SettingError,
    config_fields,
    resolve,
)

SECRET = "s3cret-admin-token-" + "y" * 24


def serve_ns(*argv: str):
    return build_parser().parse_args(["serve", *argv])


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "vtt.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_precedence_flag_over_env_over_file_over_default(tmp_path: Path) -> None:
    conf = write_toml(
        tmp_path,
        'host = "10.0.0.1"\nport = 7000\nrate = "5/10"\nsynchronous = "normal"\n'
        'allowed_origins = ["https://a.example", "https://b.example"]\n'
        f'admin_token = "{SECRET}"\n',
    )
    env = {"VTT_SYNC_PORT": "7100", "VTT_SYNC_RATE": "7/14", "VTT_SYNC_CONFIG": str(conf)}
    got = resolve(serve_ns("--rate", "9/18"), environ=env)
    assert got["rate"] == RateSpec(9, 18) and got.sources["rate"] == "flag"
    assert got["port"] == 7100 and got.sources["port"] == "env VTT_SYNC_PORT"
    assert got["host"] == "10.0.0.1" and got.sources["host"] == f"file {conf}"
    assert got["synchronous"] == "NORMAL"
    assert got["allowed_origins"] == ("https://a.example", "https://b.example")
    assert got["admin_token"] == SECRET
    assert got["data_dir"] == Path("./vtt-data") and got.sources["data_dir"] == "default"
    # --config (a flag) wins over VTT_SYNC_CONFIG
    other = tmp_path / "other.toml"
    other.write_text("port = 7200\n")
    got = resolve(serve_ns("--config", str(other)), environ={"VTT_SYNC_CONFIG": str(conf)})
    assert got["port"] == 7200 and got["host"] == "127.0.0.1"


def test_every_setting_reads_from_each_of_its_sources(tmp_path: Path) -> None:
    """Each row of the table, from its flag, its variable and the file: the
    same text gives the same value (one table drives all three)."""
    samples = {
        "host": ("0.0.0.0", "0.0.0.0"),
        "port": ("9000", 9000),
        "data_dir": ("/srv/vtt", "/srv/vtt"),
        "demo": ("true", True),
        "affordances": ("false", False),
        "rate": ("3/6", "3/6"),
        "gm_rate": ("50", "50"),
        "synchronous": ("NORMAL", "NORMAL"),
        "transport": ("picows", "picows"),
        "allowed_origins": ("https://a.example", ["https://a.example"]),
        "tls_cert": ("/etc/cert.pem", "/etc/cert.pem"),
        "tls_key": ("/etc/key.pem", "/etc/key.pem"),
        "trusted_proxies": ("127.0.0.1,::1", ["127.0.0.1", "::1"]),
        "drain_seconds": ("2.5", 2.5),
        "log_summary_seconds": ("30", 30),
        "log_level": ("debug", "DEBUG"),
        "log_format": ("json", "json"),
        "admin_token": (SECRET, SECRET),
        "database": (
            "postgresql://vtt@db.example:5432/vtt",
            "postgresql://vtt@db.example:5432/vtt",
        ),
        "public_url": ("https://node-2.example/vtt/", "https://node-2.example/vtt/"),
        "node_id": ("node-2", "node-2"),
        "lease_seconds": ("5", 5),
        "workers": ("2", 2),
    }
    assert set(samples) == set(BY_NAME), "a new setting needs a sample here"
    # settings that need a partner (checked together), given in the environment
    partner = {"tls_cert": {"VTT_SYNC_TLS_KEY": "/k"}, "tls_key": {"VTT_SYNC_TLS_CERT": "/c"}}
    for s in SETTINGS:
        text, toml_value = samples[s.name]
        base = partner.get(s.name, {})
        from_env = resolve(serve_ns(), environ={**base, s.env_name: text})
        conf = write_toml(tmp_path, f"{s.name} = {json.dumps(toml_value)}\n")
        from_file = resolve(serve_ns("--config", str(conf)), environ=base)
        assert from_env[s.name] == from_file[s.name] != s.default, s.name
        if s.flag_name is not None:
            argv = [s.flag_name] if s.name == "demo" else [s.flag_name, text]
            from_flag = resolve(serve_ns(*argv), environ=base)
            assert from_flag[s.name] == from_env[s.name], s.name


def test_a_repeated_flag_and_commas_make_one_list() -> None:
    got = resolve(
        serve_ns("--allow-origin", "https://a.example/", "--allow-origin", "https://b,https://c"),
        environ={},
    )
    assert got["allowed_origins"] == ("https://a.example", "https://b", "https://c")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"VTT_SYNC_PORT": "eighty"}, "VTT_SYNC_PORT: expected an integer 0-65535"),
        ({"VTT_SYNC_PORT": "70000"}, "VTT_SYNC_PORT: expected an integer 0-65535"),
        ({"VTT_SYNC_DEMO": "maybe"}, "VTT_SYNC_DEMO: expected true or false"),
        ({"VTT_SYNC_SYNCHRONOUS": "OFF"}, "VTT_SYNC_SYNCHRONOUS: expected one of FULL, NORMAL"),
        ({"VTT_SYNC_ALLOW_ORIGIN": "evil.example"}, "expected an origin"),
        ({"VTT_SYNC_TLS_CERT": "/c.pem"}, "TLS needs both"),
    ],
)
def test_bad_values_name_their_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingError, match=message):
        resolve(serve_ns(), environ=env)


def test_bad_files_are_refused_clearly(tmp_path: Path) -> None:
    conf = write_toml(tmp_path, 'prot = 80\nhots = "x"\n')
    with pytest.raises(SettingError, match=r"unknown setting\(s\) hots, prot"):
        resolve(serve_ns("--config", str(conf)), environ={})
    conf = write_toml(tmp_path, 'port = "80"\n')
    with pytest.raises(SettingError, match=r"vtt.toml: port: expected an integer"):
        resolve(serve_ns("--config", str(conf)), environ={})
    conf = write_toml(tmp_path, "port = \n")
    with pytest.raises(SettingError, match="not valid TOML"):
        resolve(serve_ns("--config", str(conf)), environ={})
    with pytest.raises(SettingError, match="cannot read the configuration file"):
        resolve(serve_ns("--config", str(tmp_path / "missing.toml")), environ={})


def test_a_bad_flag_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit):
        serve_ns("--port", "eighty")
    assert "--port" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_printed_configuration_masks_secrets(fmt: str) -> None:
    got = resolve(serve_ns("--port", "0"), environ={"VTT_SYNC_ADMIN_TOKEN": SECRET})
    buf = io.StringIO()
    print_configuration(logs.Output(fmt, out=buf), got)
    text = buf.getvalue()
    assert SECRET not in text and MASK in text
    if fmt == "json":
        (line,) = [json.loads(x) for x in text.splitlines()]
        assert line["settings"]["admin_token"] == MASK
        assert line["sources"]["admin_token"] == "env VTT_SYNC_ADMIN_TOKEN"
        assert line["settings"]["port"] == "0" and line["sources"]["port"] == "flag"
        assert set(line["settings"]) == set(BY_NAME)
    else:
        assert "port" in text and "(flag)" in text and "(env VTT_SYNC_ADMIN_TOKEN)" in text


def test_the_settings_fill_the_config(tmp_path: Path) -> None:
    got = resolve(
        serve_ns("--data-dir", str(tmp_path), "--allow-origin", "https://a.example"),
        environ={"VTT_SYNC_TRUSTED_PROXY": "127.0.0.1", "VTT_SYNC_ADMIN_TOKEN": SECRET},
    )
    config = Config(**config_fields(got))
    assert config.data_dir == tmp_path and config.admin_token == SECRET
    assert config.allowed_origins == frozenset({"https://a.example"})
    assert config.trusted_proxies == frozenset({"127.0.0.1"})
    assert config.rate == RateSpec(20, 40) and config.port == 8765
    # every Config field a row names exists (adding a row without its field fails here)
    assert {s.config for s in SETTINGS if s.config} <= {f.name for f in attrs.fields(Config)}
