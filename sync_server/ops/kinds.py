"""The kinds of `vtt-sync serve`'s settings (settings.py's table): how
the text of a flag or an environment variable, or a TOML value, becomes a
setting's value, with a clear error otherwise, and how a value is printed
back. A kind raises ValueError with what it expected; the resolution
(settings.py) names where the value came from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from sync_server.core.ratelimit import RateSpec


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


def integer(lo: int, hi: int) -> Kind:
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


def number(lo: float, hi: float) -> Kind:
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


def bool_text(s: str) -> bool:
    low = s.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"expected true or false, got {s!r}")


def bool_toml(v: Any) -> bool:
    if type(v) is not bool:
        raise ValueError(f"expected true or false, got {v!r}")
    return v


BOOL = Kind("true or false", bool_text, bool_toml, show=lambda v: "true" if v else "false")


def text_toml(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {v!r}")
    return v


def nonempty(s: str) -> str:
    if not s.strip():
        raise ValueError("expected a non-empty string")
    return s.strip()


TEXT = Kind("a string", nonempty, lambda v: nonempty(text_toml(v)))


def optional_path(s: str) -> Path | None:
    return Path(s) if s.strip() else None


PATH = Kind(
    "a file path",
    optional_path,
    lambda v: optional_path(text_toml(v)),
    show=lambda v: "none" if v is None else str(v),
)


def choice(*options: str, upper: bool = False) -> Kind:
    what = "one of " + ", ".join(options)

    def check(v: Any) -> str:
        s = text_toml(v).strip()
        s = s.upper() if upper else s.lower()
        if s not in options:
            raise ValueError(f"expected {what}, got {v!r}")
        return s

    return Kind(what, check, check)


def rate_text(s: str) -> RateSpec | None:
    return RateSpec.parse(s)


def rate_toml(v: Any) -> RateSpec | None:
    if type(v) in (int, float):
        v = str(v)
    return RateSpec.parse(text_toml(v))


RATE = Kind(
    "RATE[/BURST] per second, or none",
    rate_text,
    rate_toml,
    show=lambda v: "none" if v is None else str(v),
)


def origin(s: str) -> str:
    s = s.strip().rstrip("/")
    if s != "*" and "://" not in s:
        raise ValueError(f"expected an origin like https://host[:port] (or *), got {s!r}")
    return s


def address(s: str) -> str:
    s = s.strip()
    if not s:
        raise ValueError("expected an IP address")
    return s


def many(item: Callable[[str], str], what: str) -> Kind:
    def text(s: str) -> tuple[str, ...]:
        return tuple(item(part) for part in s.split(",") if part.strip())

    def toml(v: Any) -> tuple[str, ...]:
        if isinstance(v, str):
            return text(v)
        if not isinstance(v, list):
            raise ValueError(f"expected a list of {what}, got {v!r}")
        return tuple(item(text_toml(x)) for x in v)

    return Kind(
        f"a list of {what}",
        text,
        toml,
        show=lambda v: ", ".join(v) if v else "none",
        many=True,
    )


def show_dir(p: Path) -> str:
    """./vtt-data, not vtt-data: a relative directory says it is relative."""
    text = str(p)
    return text if p.is_absolute() or text.startswith(".") else f"./{text}"


def dsn(s: str) -> str:
    if not s.startswith(("postgresql://", "postgres://")):
        raise ValueError("expected postgresql://USER@HOST:PORT/DATABASE")
    return s


def show_dsn(dsn: str) -> str:
    from sync_server.storage.postgres import describe_dsn  # asyncpg only when asked

    return describe_dsn(dsn)


def public_url(s: str) -> str:
    """The address players reach the server at: ws(s):// or the page's
    http(s)://, kept as given (the configuration printed at start shows
    what was typed; sync_server/wire/links.py turns it into page links and
    WebSocket addresses)."""
    if not s.startswith(("ws://", "wss://", "http://", "https://")):
        raise ValueError(
            f"expected the page's http:// or https:// address (or ws://, wss://), got {s!r}"
        )
    return s


ORIGINS = many(origin, "origins")
ADDRESSES = many(address, "IP addresses")
