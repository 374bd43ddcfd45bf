"""Tokens: generation, hashing, comparison, and the server-wide admin token.

A token is a bearer secret: whoever holds it is that user. So the server
keeps only SHA-256 hashes (a stolen database opens nothing), compares in
constant time, and never logs or broadcasts one. SHA-256 without salt or
stretching is enough here because tokens are 256-bit random values, not
passwords: there is nothing to brute-force.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TypeGuard

from sync_server.core.limits import (
    MAX_RECENT_TOKENS,
    MAX_TOKEN_LENGTH,
    MIN_ADMIN_TOKEN_LENGTH,
    TOKEN_BYTES,
)

log = logging.getLogger(__name__)

ADMIN_TOKEN_ENV = "VTT_SYNC_ADMIN_TOKEN"
ADMIN_TOKEN_FILE = "admin_token"


def new_token() -> str:
    """A fresh user token: 256 bits from the OS, URL-safe (it travels in
    page URL fragments), never starting with "-": on a command line
    (`--token -xyz...`) it would be read as an option (1 token in 64 did)."""
    while True:
        token = secrets.token_urlsafe(TOKEN_BYTES)
        if not token.startswith("-"):
            return token


def hash_token(token: str) -> bytes:
    """The only form in which a user token is stored."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def same_hash(a: bytes, b: bytes) -> bool:
    """Constant-time comparison, so response timing says nothing about how
    much of a guess matched."""
    return hmac.compare_digest(a, b)


def plausible_token(token: object) -> TypeGuard[str]:
    """Cheap shape check before hashing: a str of sane length."""
    return isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_LENGTH


class WeakAdminToken(ValueError):
    """An admin token given by the operator is too short to be a secret."""


def _strong(token: str, source: str) -> str:
    if len(token) < MIN_ADMIN_TOKEN_LENGTH:
        raise WeakAdminToken(
            f"the admin token from {source} has {len(token)} characters; it needs at least "
            f"{MIN_ADMIN_TOKEN_LENGTH} (generate one: python3 -c 'import secrets; "
            f"print(secrets.token_urlsafe(32))')"
        )
    return token


def load_admin_token(data_dir: Path, explicit: str | None = None) -> tuple[str, bool]:
    """The admin token and whether it was generated just now.

    Order: an explicit value (in-process servers, tests), then the
    VTT_SYNC_ADMIN_TOKEN environment variable, then the file `admin_token`
    in the data directory, created (mode 0600, never group/world readable)
    on the first start. Generated tokens must be printed once by the caller:
    this function never logs one.
    """
    if explicit:
        return _strong(explicit, "the configuration"), False
    env = os.environ.get(ADMIN_TOKEN_ENV)
    if env:
        return _strong(env, ADMIN_TOKEN_ENV), False
    path = data_dir / ADMIN_TOKEN_FILE
    if path.exists():
        token = path.read_text(encoding="utf-8").strip()
        if token:
            mode = path.stat().st_mode & 0o777
            if mode & 0o077:
                log.warning("%s is readable by others (mode %o); fixing to 0600", path, mode)
                path.chmod(0o600)
            return token, False
    token = new_token()
    write_secret_file(path, token + "\n")
    return token, True


def write_secret_file(path: Path, text: str) -> None:
    """Write a file that only the server's user can read, created with mode
    0600 from the start (no window in which it is world-readable)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


class RecentTokens:
    """Tokens just created, kept in memory only and only briefly, so that a
    retried command (same id, after a reconnect) gets its first ack back
    with the token. Never written to disk; gone after `ttl` seconds, past
    `max_items` (the oldest first) or at a restart (then the dup ack carries
    the result without the token, and the GM rotates the token if it was
    lost).

    Every entry lives `ttl` from its insertion on a monotonic clock, so
    insertion order is expiry order: pruning pops expired entries off the
    front, and one `remember` costs O(1) amortized, whatever the number
    kept (a rotate_token loop used to rebuild the whole map each time)."""

    def __init__(
        self,
        ttl: float,
        clock: Callable[[], float],
        max_items: int = MAX_RECENT_TOKENS,
    ) -> None:
        self.ttl = ttl
        self.clock = clock
        self.max_items = max_items
        self._items: OrderedDict[tuple[str, str, str], tuple[float, str, str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def remember(self, key: tuple[str, str, str], field: str, token: str) -> None:
        now = self.clock()
        items = self._items
        while items:
            first = next(iter(items.values()))
            if first[0] > now and len(items) < self.max_items:
                break
            items.popitem(last=False)
        items.pop(key, None)  # re-remembered: its expiry moves to the end
        items[key] = (now + self.ttl, field, token)

    def recall(self, key: tuple[str, str, str]) -> tuple[str, str] | None:
        item = self._items.get(key)
        if item is None or item[0] <= self.clock():
            return None
        return item[1], item[2]
