"""The server's logs: text or JSON lines, what websockets may say, no token.

- `setup(level, fmt)`: one handler on stderr for every logger. With
  `fmt="json"` each record is one JSON object on one line (`ts`, `level`,
  `logger`, `msg`, and the record's structured fields such as `room`,
  `user`, `event`), for log shippers; `Output` writes the CLI's own lines
  (the start-up banner, the configuration) on stdout in the same form, so
  that every line the server writes parses.
- `websockets_logger()`: what the server hands websockets. Its per-request
  INFO lines ("connection open", "HTTP response sent (200 OK)") name no
  room, no user and not even the path: they were most of an INFO log, so
  they go to DEBUG (`sync_server.http`, beside our own access line that
  says method, path, status and peer). Its DEBUG output (every frame, hello
  frames and their tokens included) is never produced at all.
- `TextFormatter`: a text line is one line, whatever a client sent. Op
  names, close reasons, addresses named by a proxy reach log messages;
  their control characters (newlines that would forge a line, ANSI escapes
  that would drive the operator's terminal, C1 controls, Unicode line
  separators and bidirectional overrides) are written escaped (`\n`,
  `\x1b`, `\u2028`). JSON lines need none of it: `json.dumps` escapes
  them in strings.
- `Redact`: a last line of defence on every handler: the secrets the
  server knows (the admin token) and anything shaped like a user token
  (43 URL-safe characters, 256 bits) are replaced before a line is written.
  The server logs no token in the first place; tests check both.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from sync_server.clock import Clock, SystemClock

# A line written before logging is set up (json_line) is stamped by the clock port.
CLOCK: Clock = SystemClock()

# Attributes every LogRecord has: anything else was passed in `extra` and is
# a structured field of the line.
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)

# A user token (secrets.token_urlsafe(32)): 43 URL-safe characters. Word
# boundaries keep longer identifiers (hashes in hex are 64) untouched.
TOKEN_SHAPE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")
REDACTED = "[redacted]"

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# What a text line never holds raw (see TextFormatter): C0 controls, DEL,
# C1 controls, the Unicode line and paragraph separators, bidirectional
# embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    return _SHORT.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_text(text: str) -> str:
    """`text` with every control character written as an escape, so that
    it stays on its line and leaves the terminal alone."""
    return _UNSAFE.sub(_escaped, text)


class TextFormatter(logging.Formatter):
    """TEXT_FORMAT with the message escaped (`escape_text`): the one place
    every client string of a text line passes, whichever module logs it.
    A traceback (the server's own text) keeps its lines."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_text(record.message)
        return super().formatMessage(record)


class Redact(logging.Filter):
    """Replaces known secrets and token-shaped words in a record's message
    and fields (a filter on the handler: it sees every logger's records)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def add(self, secret: str) -> None:
        if secret and secret not in self.secrets:
            self.secrets.append(secret)

    def clean(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return TOKEN_SHAPE.sub(REDACTED, text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.clean(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD and isinstance(value, str):
                setattr(record, key, self.clean(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.clean(record.exc_text)
            record.exc_info = None
        return True


def _now_iso(created: float) -> str:
    return (
        datetime.datetime.fromtimestamp(created, datetime.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _now_iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in fields_of(record).items():
            line.setdefault(key, value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, default=str)


def json_line(msg: str, level: str = "info", logger: str = "vtt-sync", **fields: Any) -> str:
    line = {"ts": _now_iso(CLOCK.time()), "level": level, "logger": logger, "msg": msg}
    line.update(fields)
    return json.dumps(line, ensure_ascii=False, default=str)


class Output:
    """The CLI's own lines (banner, configuration, the listening line), in the
    log's format: plain text, or one JSON object per line. `say` writes to
    stdout, `error` to stderr; `secret_ok` lines (a generated admin token,
    the demo's links) are written in text mode only: a JSON log goes to a
    shipper, and a token must never reach one."""

    def __init__(
        self,
        fmt: str = "text",
        out: TextIO | None = None,
        err: TextIO | None = None,
        redact: Redact | None = None,
    ) -> None:
        self.json = fmt == "json"
        self.out = out
        self.err = err
        self.redact = redact

    def _write(self, stream: TextIO, msg: str, level: str, fields: dict[str, Any]) -> None:
        if self.json:
            if self.redact is not None:
                msg = self.redact.clean(msg)
            stream.write(json_line(msg, level, **fields) + "\n")
        else:
            stream.write(msg + "\n")
        stream.flush()

    def say(self, msg: str, **fields: Any) -> None:
        self._write(self.out or sys.stdout, msg, "info", fields)

    def error(self, msg: str, **fields: Any) -> None:
        self._write(self.err or sys.stderr, msg, "error", fields)


def setup(level: str = "INFO", fmt: str = "text", redact: Redact | None = None) -> Redact:
    """Configure the root logger: one handler on stderr, text or JSON, with
    the redaction filter; Python warnings and uncaught exceptions go
    through it too. Returns the filter (add secrets to it later)."""
    redact = redact or Redact()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(redact)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.captureWarnings(True)
    # websockets' own loggers (a client made in-process, say) stay quiet
    # below WARNING; the server's connections use websockets_logger().
    logging.getLogger("websockets").setLevel(logging.WARNING)

    def excepthook(kind: Any, value: Any, tb: Any) -> None:
        logging.getLogger("sync_server").critical("uncaught exception", exc_info=(kind, value, tb))

    sys.excepthook = excepthook
    return redact


# --- websockets ---------------------------------------------------------------

HTTP_LOG = logging.getLogger("sync_server.http")


class WebsocketsLog(logging.LoggerAdapter):
    """The logger handed to websockets (see the module docstring): DEBUG is
    off for good (frames carry tokens), INFO becomes DEBUG, WARNING and
    above pass as they are."""

    def isEnabledFor(self, level: int) -> bool:
        return level > logging.DEBUG and self.logger.isEnabledFor(
            logging.DEBUG if level == logging.INFO else level
        )

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if level <= logging.DEBUG:
            return
        if level == logging.INFO:
            level = logging.DEBUG
        if self.logger.isEnabledFor(level):
            kwargs.setdefault("stacklevel", 2)
            self.logger.log(level, msg, *args, **kwargs)


def websockets_logger() -> WebsocketsLog:
    return WebsocketsLog(HTTP_LOG, {})
