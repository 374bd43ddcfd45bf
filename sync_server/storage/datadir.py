"""One server per data directory: an exclusive lock held while it runs.

Two servers on one data directory would each believe they own every room:
they fork room logs, keep serving users the other one revoked, and leave
rooms unloadable. So a server takes an exclusive `flock` on a lock file in
the directory at start (as PostgreSQL refuses to start while its lock file
is held) and keeps it until it stops; the kernel drops it if the process
dies, so a crash never leaves a stale lock. The file holds the holder's pid,
for the message a second server prints.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from sync_server.storage import StorageError

LOCK_FILE = "vtt-sync.lock"


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise StorageError naming the directory and the
        pid of the server holding it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StorageError(
                f"the data directory {self.path.parent} is in use by another vtt-sync server "
                f"(pid {holder}); stop it first, or give this one its own --data-dir"
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
