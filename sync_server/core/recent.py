"""This module holds a room's most recent patches in memory, for the
clients that resume (`RoomCore.patches_after`) and the history
(`RoomCore.history`), as one pickled blob per version.

Why blobs and not the patches' dicts and lists: a room keeps hundreds of
them (RECENT_PATCHES_IN_MEMORY), each a dozen containers (the ops are lists
of lists), and every container is one more object the cyclic garbage
collector walks at each of its passes. Under load (docs/performance.md:
20 busy rooms) that was ~200,000 objects in the young generation and a
50-77 ms pause every 7-15 s, every room of the process stalled; with blobs
(bytes are not tracked by the collector) the passes take 9-14 ms, and the
CPU per command measured the same. Pickling costs ~3 us per version, once, at
commit; unpickling only happens when a client resumes or asks for the
history, a few times per session. The blobs never leave the process and
only ever hold what the room made itself, so pickle's trust model holds.
"""

from __future__ import annotations

import itertools
import pickle
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

# Pickle's protocol 4 measured faster than 5 for these small dicts (2.5 vs
# 3.2 us); 5 only adds out-of-band buffers, which nothing here uses.
PICKLE_PROTOCOL = 4


class RecentPatches(Generic[T]):
    """The last `maxlen` versions' items (a room's `PatchView`s' fields), in
    version order without holes, pickled on the way in: what goes in is a
    copy, so a later change to the object is not seen here."""

    def __init__(self, maxlen: int, items: Iterable[tuple[int, T]] = ()) -> None:
        self._blobs: deque[bytes] = deque(maxlen=maxlen)
        self.last_v = 0  # the version of the newest item (0: none yet)
        for v, item in items:
            self.append(v, item)

    def __len__(self) -> int:
        return len(self._blobs)

    @property
    def first_v(self) -> int | None:
        """The oldest version held, None when empty."""
        return self.last_v - len(self._blobs) + 1 if self._blobs else None

    def append(self, v: int, item: T) -> None:
        if self._blobs and v != self.last_v + 1:
            # Only consecutive versions are held (`after` counts them): past
            # a hole (a log loaded with versions missing before its
            # snapshot), what is older is forgotten, and a resume from
            # before the hole gets a snapshot instead.
            self._blobs.clear()
        self._blobs.append(pickle.dumps(item, PICKLE_PROTOCOL))
        self.last_v = v

    def after(self, since: int) -> list[T] | None:
        """The items of every version after `since`, oldest first; None when
        memory no longer holds the one right after it."""
        first = self.first_v
        if first is None or first > since + 1:
            return None
        return [pickle.loads(b) for b in itertools.islice(self._blobs, since + 1 - first, None)]

    def newest_first(self) -> Iterator[T]:
        for blob in reversed(self._blobs):
            yield pickle.loads(blob)

    def blob(self, v: int) -> bytes | None:
        """Version `v`'s blob itself (None when not held): a reader of a
        long history holds these (shared with the room's, no copy) and not
        what they unpickle to, until it writes them (`load`)."""
        first = self.first_v
        if first is None or not first <= v <= self.last_v:
            return None
        return self._blobs[v - first]

    @staticmethod
    def load(blob: bytes) -> T:
        """The item of one of `newest_blobs`."""
        item: T = pickle.loads(blob)
        return item
