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
        self._inherited = False

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

    @property
    def fd(self) -> int | None:
        """The descriptor holding the lock (a supervisor passes it down)."""
        return self._fd

    def inherit(self, fd: int) -> None:
        """Hold the lock through `fd`, a descriptor of the lock file whose
        lock a supervisor took and passed down (workers mode): a flock
        belongs to the open file, so the lock holds while the supervisor or
        any of its workers lives. Refused if `fd` is not this directory's
        lock file, or if it does not hold the lock."""
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(self.path))
        except OSError as exc:
            raise StorageError(f"no inherited lock of {self.path.parent}: {exc}") from None
        if not same:
            raise StorageError(f"the inherited lock is not the one of {self.path.parent}")
        probe = os.open(self.path, os.O_RDWR)
        try:  # another open of the file must be refused: the lock is held
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            fcntl.flock(probe, fcntl.LOCK_UN)
            raise StorageError(f"the inherited descriptor does not hold {self.path}'s lock")
        finally:
            os.close(probe)
        self._fd = fd
        self._inherited = True

    def release(self) -> None:
        if self._fd is None:
            return
        if self._inherited:  # the supervisor's: it outlives this worker
            os.close(self._fd)
            self._fd, self._inherited = None, False
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
