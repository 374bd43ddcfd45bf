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

ENV_PREFIX = "VTT_SYNC_"
CONFIG_ENV = "VTT_SYNC_CONFIG"
MASK = "********"

# Where a value came from, as printed at start.
FLAG, ENV, FILE, DEFAULT = "flag", "env", "file", "default"


class SettingError(ValueError):
    """A setting's value cannot be used; the message names where it came from."""


# --- kinds: text (flag, env) or a TOML value -> the setting's value ----------


@attrs.frozen
class Kind:
    """How a setting's value is read. `text` parses a flag's or a variable's
    text; `toml` accepts a TOML value (already typed: an int stays an int);
    `show` prints a value back in the form `text` reads."""

    name: str  # for messages: "an integer 0-65535"
    text: Callable[[str], Any]
    toml: Callable[[Any], Any]
    show: Callable[[Any], str] = str
    many: bool = False  # a list: a repeated flag, comma-separated in the environment


def _integer(lo: int, hi: int) -> Kind:
    what = f"an integer {lo}-{hi}"

    def check(v: Any) -> int:
        if type(v) is not int or not lo <= v <= hi:
            raise ValueError(f"expected {what}, got {v!r}")
        return v

    def text(s: str) -> int:
        try:
            return check(int(s.strip()))
        except ValueError:
            raise ValueError(f"expected {what}, got {s!r}") from None

    return Kind(what, text, check)


def _number(lo: float, hi: float) -> Kind:
    what = f"a number {lo:g}-{hi:g}"

    def check(v: Any) -> float:
        if type(v) not in (int, float) or not lo <= v <= hi:
            raise ValueError(f"expected {what}, got {v!r}")
        return float(v)

    def text(s: str) -> float:
        try:
            return check(float(s.strip()))
        except ValueError:
            raise ValueError(f"expected {what}, got {s!r}") from None

    return Kind(what, text, check, show=lambda v: f"{v:g}")


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _bool_text(s: str) -> bool:
    low = s.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"expected true or false, got {s!r}")


def _bool_toml(v: Any) -> bool:
    if type(v) is not bool:
        raise ValueError(f"expected true or false, got {v!r}")
    return v


BOOL = Kind("true or false", _bool_text, _bool_toml, show=lambda v: "true" if v else "false")


def _text_toml(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {v!r}")
    return v


def _nonempty(s: str) -> str:
    if not s.strip():
        raise ValueError("expected a non-empty string")
    return s.strip()


TEXT = Kind("a string", _nonempty, lambda v: _nonempty(_text_toml(v)))


def _optional_path(s: str) -> Path | None:
    return Path(s) if s.strip() else None


PATH = Kind(
    "a file path",
    _optional_path,
    lambda v: _optional_path(_text_toml(v)),
    show=lambda v: "none" if v is None else str(v),
)


def _choice(*options: str, upper: bool = False) -> Kind:
    what = "one of " + ", ".join(options)

    def check(v: Any) -> str:
        s = _text_toml(v).strip()
        s = s.upper() if upper else s.lower()
        if s not in options:
            raise ValueError(f"expected {what}, got {v!r}")
        return s

    return Kind(what, check, check)


def _rate_text(s: str) -> RateSpec | None:
    return RateSpec.parse(s)


def _rate_toml(v: Any) -> RateSpec | None:
    if type(v) in (int, float):
        v = str(v)
    return RateSpec.parse(_text_toml(v))


RATE = Kind(
    "RATE[/BURST] per second, or none",
    _rate_text,
    _rate_toml,
    show=lambda v: "none" if v is None else str(v),
)


def _origin(s: str) -> str:
    s = s.strip().rstrip("/")
    if s != "*" and "://" not in s:
        raise ValueError(f"expected an origin like https://host[:port] (or *), got {s!r}")
    return s


def _address(s: str) -> str:
    s = s.strip()
    if not s:
        raise ValueError("expected an IP address")
    return s


def _many(item: Callable[[str], str], what: str) -> Kind:
    def text(s: str) -> tuple[str, ...]:
        return tuple(item(part) for part in s.split(",") if part.strip())

    def toml(v: Any) -> tuple[str, ...]:
        if isinstance(v, str):
            return text(v)
        if not isinstance(v, list):
            raise ValueError(f"expected a list of {what}, got {v!r}")
        return tuple(item(_text_toml(x)) for x in v)

    return Kind(
        f"a list of {what}",
        text,
        toml,
        show=lambda v: ", ".join(v) if v else "none",
        many=True,
    )


def _show_dir(p: Path) -> str:
    """./vtt-data, not vtt-data: a relative directory says it is relative."""
    text = str(p)
    return text if p.is_absolute() or text.startswith(".") else f"./{text}"


def _dsn(s: str) -> str:
    if not s.startswith(("postgresql://", "postgres://")):
        raise ValueError("expected postgresql://USER@HOST:PORT/DATABASE")
    return s


def _show_dsn(dsn: str) -> str:
    from sync_server.storage.postgres import describe_dsn  # asyncpg only when asked

    return describe_dsn(dsn)


def _ws_url(s: str) -> str:
    """A ws:// or wss:// URL; the page's http(s):// address is taken too."""
    if s.startswith("https://"):
        s = "wss://" + s[len("https://") :]
    elif s.startswith("http://"):
        s = "ws://" + s[len("http://") :]
    if not s.startswith(("ws://", "wss://")):
        raise ValueError(f"expected a ws:// or wss:// URL (or the page's https://), got {s!r}")
    return s


ORIGINS = _many(_origin, "origins")
ADDRESSES = _many(_address, "IP addresses")


# --- the table --------------------------------------------------------------


@attrs.frozen
class Setting:
    """One setting. `flag`/`env` default to --NAME-WITH-DASHES and
    VTT_SYNC_NAME; "" means none (e.g. a secret has no flag: a flag shows
    in `ps`). `config`: the `Config` field it fills, if the server reads it."""

    name: str
    kind: Kind
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


def _server(name: str, kind: Kind, default: Any, help: str, **kw: Any) -> Setting:
    """A setting the server reads (it fills the `Config` field `name`)."""
    return Setting(name, kind, default, help, config=name, **kw)


SETTINGS: tuple[Setting, ...] = (
    _server("host", TEXT, "127.0.0.1", "address to bind; 0.0.0.0 or :: for every interface"),
    _server("port", _integer(0, 65535), 8765, "port; 0 picks a free one"),
    _server(
        "data_dir",
        Kind(
            "a directory",
            lambda s: Path(_nonempty(s)),
            lambda v: Path(_nonempty(_text_toml(v))),
            show=_show_dir,
        ),
        Path("./vtt-data"),
        "where the database and the admin token live",
        metavar="DIR",
    ),
    Setting("demo", BOOL, False, "create (once) and print a demo room"),
    _server(
        "rate",
        RATE,
        RateSpec(PLAYER_RATE_PER_SECOND, PLAYER_BURST),
        "player/observer command rate, RATE[/BURST] per second, or 'none'",
    ),
    _server("gm_rate", RATE, None, "GM/admin command rate, RATE[/BURST]; none is unlimited"),
    _server(
        "synchronous",
        _choice("FULL", "NORMAL", upper=True),
        "FULL",
        "SQLite durability: FULL survives power loss, NORMAL a process crash",
    ),
    _server(
        "allowed_origins",
        ORIGINS,
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
        PATH,
        None,
        "TLS certificate chain (PEM): serve https:// and wss:// (reloaded on SIGHUP)",
        metavar="FILE",
    ),
    _server("tls_key", PATH, None, "the TLS certificate's private key (PEM)", metavar="FILE"),
    _server(
        "trusted_proxies",
        ADDRESSES,
        (),
        "addresses of reverse proxies whose X-Forwarded-For names the client "
        "(logs, failed-hello limits); repeat, or separate with commas",
        flag="--trusted-proxy",
        env="VTT_SYNC_TRUSTED_PROXY",
        metavar="ADDRESS",
    ),
    _server(
        "drain_seconds",
        _number(0, 3600),
        0.0,
        "on SIGTERM, seconds /healthz answers 503 while the server still serves, "
        "so a load balancer stops sending clients before it closes",
        metavar="SECONDS",
    ),
    _server(
        "log_summary_seconds",
        _number(0, 86400),
        60.0,
        "commands are logged at INFO as one summary line per room this often; 0: never",
        metavar="SECONDS",
    ),
    _server(
        "database",
        Kind(
            "a postgresql:// DSN",
            lambda s: _dsn(_nonempty(s)),
            lambda v: _dsn(_nonempty(_text_toml(v))),
            show=lambda v: "none (SQLite in the data directory)" if v is None else _show_dsn(v),
        ),
        None,
        "cluster mode: PostgreSQL holding every room (postgresql://USER@HOST:PORT/DB); "
        "several nodes share it, each room served by one at a time (docs/cluster.md)",
        metavar="DSN",
    ),
    _server(
        "public_url",
        Kind(
            "a ws:// or wss:// URL",
            lambda s: _ws_url(_nonempty(s)),
            lambda v: _ws_url(_nonempty(_text_toml(v))),
            show=lambda v: "none (the address bound)" if v is None else v,
        ),
        None,
        "the address players reach this server at, e.g. wss://vtt.example/ or "
        "https://vtt.example/vtt/ behind a proxy: every link printed or shown uses it "
        "(demo, create-room, invitations); cluster mode: this node's address in redirects",
        metavar="URL",
    ),
    _server(
        "node_id",
        Kind(
            "a name",
            _nonempty,
            lambda v: _nonempty(_text_toml(v)),
            show=lambda v: "none (HOST:PORT)" if v is None else v,
        ),
        None,
        "cluster mode: this node's id, stable across restarts",
        metavar="NAME",
    ),
    _server(
        "lease_seconds",
        _number(1, 3600),
        LEASE_SECONDS,
        "cluster mode: a room's lease; a dead node's rooms move after at most this long",
        metavar="SECONDS",
    ),
    Setting(
        "workers",
        _integer(1, MAX_WORKERS),
        1,
        "server processes on this machine, on the same data: one per core; each room is "
        "served by one of them, the others redirect its clients there (docs/cluster.md)",
        metavar="N",
    ),
    Setting(
        "log_level",
        _choice("DEBUG", "INFO", "WARNING", "ERROR", upper=True),
        "INFO",
        "logging level",
    ),
    Setting(
        "log_format",
        _choice("text", "json"),
        "text",
        "text, or json: every line on stdout and stderr one JSON object (log shippers)",
    ),
    _server(
        "admin_token",
        Kind("a token", _nonempty, lambda v: _nonempty(_text_toml(v))),
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
    if s.kind is BOOL and s.default is False:
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
        if s.kind is BOOL:
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
