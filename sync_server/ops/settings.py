"""`vtt-sync serve`'s settings, declared once: flag, environment, TOML file.

Each setting is one row of `SETTINGS`: its name (the TOML key), its command
line flag, its environment variable, its kind (how text or a TOML value
becomes a value, with a clear error otherwise), its default, whether it is
a secret, its help. Everything else is derived from the table: the `serve`
options and their help (every default shown), the reading of the
environment and of the `--config` file, the precedence

    flag > environment > file > default

and the configuration printed at start, with each value's source and the
secrets masked. Adding a setting is one row (and, if the server reads it,
the `Config` field of the same name: rows whose `config` is set fill it).

Why a TOML file as well as the environment: a systemd unit or a container
sets a few variables; a host running many servers keeps one readable file
per server. Python's `tomllib` reads it (no dependency).
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from sync_server.cluster.leases import LEASE_SECONDS
from sync_server.core.limits import MAX_WORKERS, PLAYER_BURST, PLAYER_RATE_PER_SECOND
from sync_server.core.ratelimit import RateSpec
from sync_server.ops import kinds

ENV_PREFIX = "VTT_SYNC_"
CONFIG_ENV = "VTT_SYNC_CONFIG"
MASK = "********"

# Where a value came from, as printed at start.
FLAG, ENV, FILE, DEFAULT = "flag", "env", "file", "default"


class SettingError(ValueError):
    """A setting's value cannot be used; the message names where it came from."""


# --- the table --------------------------------------------------------------


@attrs.frozen
class Setting:
    """One setting. `flag`/`env` default to --NAME-WITH-DASHES and
    VTT_SYNC_NAME; "" means none (e.g. a secret has no flag: a flag shows
    in `ps`). `config`: the `Config` field it fills, if the server reads it."""

    name: str
    kind: kinds.Kind
    default: Any
    help: str
    flag: str | None = None
    env: str | None = None
    secret: bool = False
    config: str | None = None
    metavar: str | None = None

    @property
    def flag_name(self) -> str | None:
        if self.flag == "":
            return None
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def env_name(self) -> str | None:
        if self.env == "":
            return None
        return self.env or ENV_PREFIX + self.name.upper()

    def show(self, value: Any) -> str:
        if self.secret:
            return "none" if value is None else MASK
        return self.kind.show(value)


def _server(name: str, kind: kinds.Kind, default: Any, help: str, **kw: Any) -> Setting:
    """A setting the server reads (it fills the `Config` field `name`)."""
    return Setting(name, kind, default, help, config=name, **kw)


SETTINGS: tuple[Setting, ...] = (
    _server("host", kinds.TEXT, "127.0.0.1", "address to bind; 0.0.0.0 or :: for every interface"),
    _server("port", kinds.integer(0, 65535), 8765, "port; 0 picks a free one"),
    _server(
        "data_dir",
        kinds.Kind(
            "a directory",
            lambda s: Path(kinds.nonempty(s)),
            lambda v: Path(kinds.nonempty(kinds.text_toml(v))),
            show=kinds.show_dir,
        ),
        Path("./vtt-data"),
        "where the database and the admin token live",
        metavar="DIR",
    ),
    Setting("demo", kinds.BOOL, False, "create (once) and print a demo room"),
    _server(
        "rate",
        kinds.RATE,
        RateSpec(PLAYER_RATE_PER_SECOND, PLAYER_BURST),
        "player/observer command rate, RATE[/BURST] per second, or 'none'",
    ),
    _server("gm_rate", kinds.RATE, None, "GM/admin command rate, RATE[/BURST]; none is unlimited"),
    _server(
        "synchronous",
        kinds.choice("FULL", "NORMAL", upper=True),
        "FULL",
        "SQLite durability: FULL survives power loss, NORMAL a process crash",
    ),
    _server(
        "transport",
        kinds.choice("websockets", "picows"),
        "websockets",
        "the WebSocket library: websockets serves every route; picows (pip install "
        "'vtt-sync[fast]', with uvloop) is faster but serves WebSocket and the GET routes "
        "only: no HTTP API, no /admin/ over HTTP (docs/deploy.md)",
    ),
    _server(
        "affordances",
        kinds.BOOL,
        True,
        "tell each page and client which actions its user may take now, and why not "
        "(docs/protocol.md); false only to measure what that costs (the server bench)",
        flag="",
    ),
    _server(
        "allowed_origins",
        kinds.ORIGINS,
        (),
        "a web page origin (https://host[:port]) allowed to open a WebSocket and to load "
        "the JS module (CORS), besides the server's own page; repeat the flag, or separate "
        "with commas",
        flag="--allow-origin",
        env="VTT_SYNC_ALLOW_ORIGIN",
        metavar="ORIGIN",
    ),
    _server(
        "tls_cert",
        kinds.PATH,
        None,
        "TLS certificate chain (PEM): serve https:// and wss:// (reloaded on SIGHUP)",
        metavar="FILE",
    ),
    _server("tls_key", kinds.PATH, None, "the TLS certificate's private key (PEM)", metavar="FILE"),
    _server(
        "trusted_proxies",
        kinds.ADDRESSES,
        (),
        "addresses of reverse proxies whose X-Forwarded-For names the client "
        "(logs, failed-hello limits); repeat, or separate with commas",
        flag="--trusted-proxy",
        env="VTT_SYNC_TRUSTED_PROXY",
        metavar="ADDRESS",
    ),
    _server(
        "drain_seconds",
        kinds.number(0, 3600),
        0.0,
        "on SIGTERM, seconds /healthz answers 503 while the server still serves, "
        "so a load balancer stops sending clients before it closes",
        metavar="SECONDS",
    ),
    _server(
        "log_summary_seconds",
        kinds.number(0, 86400),
        60.0,
        "commands are logged at INFO as one summary line per room this often; 0: never",
        metavar="SECONDS",
    ),
    _server(
        "database",
        kinds.Kind(
            "a postgresql:// DSN",
            lambda s: kinds.dsn(kinds.nonempty(s)),
            lambda v: kinds.dsn(kinds.nonempty(kinds.text_toml(v))),
            show=lambda v: (
                "none (SQLite in the data directory)" if v is None else kinds.show_dsn(v)
            ),
        ),
        None,
        "cluster mode: PostgreSQL holding every room (postgresql://USER@HOST:PORT/DB); "
        "several nodes share it, each room served by one at a time (docs/cluster.md)",
        metavar="DSN",
    ),
    _server(
        "public_url",
        kinds.Kind(
            "an http(s):// or ws(s):// URL",
            lambda s: kinds.public_url(kinds.nonempty(s)),
            lambda v: kinds.public_url(kinds.nonempty(kinds.text_toml(v))),
            show=lambda v: "none (the address bound)" if v is None else v,
        ),
        None,
        "the address players reach this server at, e.g. https://vtt.example/ or "
        "https://vtt.example/vtt/ behind a proxy: every link printed or shown uses it "
        "(demo, create-room, invitations); cluster mode: this node's address in redirects",
        metavar="URL",
    ),
    _server(
        "node_id",
        kinds.Kind(
            "a name",
            kinds.nonempty,
            lambda v: kinds.nonempty(kinds.text_toml(v)),
            show=lambda v: "none (HOST:PORT)" if v is None else v,
        ),
        None,
        "cluster mode: this node's id, stable across restarts",
        metavar="NAME",
    ),
    _server(
        "lease_seconds",
        kinds.number(1, 3600),
        LEASE_SECONDS,
        "cluster mode: a room's lease; a dead node's rooms move after at most this long",
        metavar="SECONDS",
    ),
    Setting(
        "workers",
        kinds.integer(1, MAX_WORKERS),
        1,
        "server processes on this machine, on the same data: one per core; each room is "
        "served by one of them, the others redirect its clients there (docs/cluster.md)",
        metavar="N",
    ),
    Setting(
        "log_level",
        kinds.choice("DEBUG", "INFO", "WARNING", "ERROR", upper=True),
        "INFO",
        "logging level",
    ),
    Setting(
        "log_format",
        kinds.choice("text", "json"),
        "text",
        "text, or json: every line on stdout and stderr one JSON object (log shippers)",
    ),
    _server(
        "admin_token",
        kinds.Kind("a token", kinds.nonempty, lambda v: kinds.nonempty(kinds.text_toml(v))),
        None,
        "the admin token (else the data directory's admin_token file, made at first start)",
        flag="",
        env="VTT_SYNC_ADMIN_TOKEN",
        secret=True,
    ),
)

BY_NAME = {s.name: s for s in SETTINGS}


# --- the command line ---------------------------------------------------------


def _shown_default(s: Setting) -> str:
    if s.kind is kinds.BOOL and s.default is False:
        return "off"
    return s.show(s.default)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `serve` options, one per setting with a flag, plus --config.
    Their defaults are SUPPRESS (an absent flag leaves no attribute), so
    that `resolve` sees which flags were given; the help shows the real
    default and the environment variable."""
    parser.add_argument(
        "--config",
        default=argparse.SUPPRESS,
        metavar="FILE",
        help=f"a TOML file of these settings, by name (default none; env {CONFIG_ENV})",
    )
    for s in SETTINGS:
        flag = s.flag_name
        if flag is None:
            continue
        env = f"; env {s.env_name}" if s.env_name else ""
        help_text = f"{s.help} (default {_shown_default(s)}{env})"
        kw: dict[str, Any] = {"dest": s.name, "default": argparse.SUPPRESS, "help": help_text}
        if s.kind is kinds.BOOL:
            parser.add_argument(flag, action="store_const", const=True, **kw)
            continue
        if s.metavar:
            kw["metavar"] = s.metavar
        parser.add_argument(
            flag,
            type=_argtype(s),
            action="append" if s.kind.many else "store",
            **kw,
        )


def _argtype(s: Setting) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = s.kind.text(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc))
        return value

    convert.__name__ = s.kind.name  # argparse names the type in its message
    return convert


# --- resolution -------------------------------------------------------------


@attrs.frozen
class Resolved:
    """Every setting's value and where it came from."""

    values: dict[str, Any]
    sources: dict[str, str]
    config_file: Path | None = None

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def lines(self) -> list[tuple[str, str, str]]:
        """(name, shown value, source) of every setting, secrets masked."""
        return [(s.name, s.show(self.values[s.name]), self.sources[s.name]) for s in SETTINGS]


def read_file(path: Path) -> dict[str, Any]:
    """A TOML settings file: keys are setting names; unknown keys refused
    (a typo must not be silently ignored)."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise SettingError(f"cannot read the configuration file {path}: {exc.strerror or exc}")
    except tomllib.TOMLDecodeError as exc:
        raise SettingError(f"{path}: not valid TOML: {exc}")
    unknown = sorted(set(data) - set(BY_NAME))
    if unknown:
        raise SettingError(
            f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}"
        )
    return data


def resolve(
    ns: argparse.Namespace | Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Resolved:
    """Each setting from its flag, else its environment variable, else the
    --config file (flag or VTT_SYNC_CONFIG), else its default. Raises
    SettingError naming the variable or the file for a bad value."""
    given = dict(vars(ns) if isinstance(ns, argparse.Namespace) else (ns or {}))
    env = os.environ if environ is None else environ
    config_path = given.get("config") or env.get(CONFIG_ENV) or None
    file_values = read_file(Path(config_path)) if config_path else {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for s in SETTINGS:
        if s.flag_name is not None and s.name in given:
            value = given[s.name]
            if s.kind.many:  # a repeated flag: each may hold a comma-separated list
                value = tuple(x for part in value for x in part)
            values[s.name], sources[s.name] = value, FLAG
        elif s.env_name is not None and env.get(s.env_name, "") != "":
            try:
                values[s.name] = s.kind.text(env[s.env_name])
            except ValueError as exc:
                raise SettingError(f"{s.env_name}: {exc}")
            sources[s.name] = f"{ENV} {s.env_name}"
        elif s.name in file_values:
            try:
                values[s.name] = s.kind.toml(file_values[s.name])
            except ValueError as exc:
                raise SettingError(f"{config_path}: {s.name}: {exc}")
            sources[s.name] = f"{FILE} {config_path}"
        else:
            values[s.name], sources[s.name] = s.default, DEFAULT
    _check_together(values)
    return Resolved(values, sources, Path(config_path) if config_path else None)


def _check_together(values: dict[str, Any]) -> None:
    if (values["tls_cert"] is None) != (values["tls_key"] is None):
        raise SettingError("TLS needs both a certificate (tls_cert) and its key (tls_key)")


def config_fields(resolved: Resolved) -> dict[str, Any]:
    """The `Config` fields the settings fill (rows with `config`)."""
    return {s.config: resolved.values[s.name] for s in SETTINGS if s.config}


def env_names() -> Sequence[str]:
    return [s.env_name for s in SETTINGS if s.env_name]
