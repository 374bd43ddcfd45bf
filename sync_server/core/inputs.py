"""What the host hands the room core: each command, as the core sees it
(`CommandIn`), and for an undo what the stored log holds (`LogReader`),
read by the host before the undo is evaluated, so that the core stays
synchronous (`StaticLog`).
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

import rules
from sync_server.core.records import UndoTarget
from sync_server.wire import protocol

NO_EXPECT = protocol.NO_EXPECT


@attrs.frozen
class CommandIn:
    """One authenticated `cmd`, as the core sees it: who sent it (and under
    which epoch of their token), its id, op, args and `expect`."""

    actor: rules.Actor
    epoch: int
    cmd_id: str
    op: Any
    args: Any
    expect: Any = NO_EXPECT
    # Its id must name this very command (an HTTP Idempotency-Key): a retry
    # that sends another command under an id already applied is refused
    # (outputs.KEY_REUSED), not answered as the first. WebSocket commands keep the
    # protocol's rule: a known id gets its first ack, whatever it carries.
    same_command: bool = False
    # Its sender holds no session (an HTTP command): what it may do is kept
    # current from its first command on (a session's is from its welcome),
    # so that every answer carries the ops on it.
    sessionless: bool = False


class LogReader(Protocol):
    """What undo needs of the stored log, read synchronously: the host
    fetches it before the undo is evaluated (`RoomHost`), tests give it as
    data (`StaticLog`)."""

    def undo_target(self) -> UndoTarget | None:
        """The latest undoable version not yet undone, or None."""
        ...

    def next_undo_target(self) -> UndoTarget | None:
        """The one an undo reverts after `undo_target` is undone, or None."""
        ...


@attrs.frozen
class StaticLog:
    """A `LogReader` over values fetched beforehand."""

    target: UndoTarget | None = None
    after: UndoTarget | None = None

    def undo_target(self) -> UndoTarget | None:
        return self.target

    def next_undo_target(self) -> UndoTarget | None:
        return self.after


def undo_entry(target: UndoTarget | None) -> rules.UndoEntry | None:
    return None if target is None else rules.UndoEntry(target.v, target.op, target.user)
