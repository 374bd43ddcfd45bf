"""A batch: the commands a room takes from its queue together, from the
moment they are taken until they are stored or failed; and its phases, as
one table.

The phases and every legal move between them are `TRANSITIONS` (as h11's
`_state.py` holds the HTTP connection's, and core/session.py a
session's): a batch is TAKEN (its commands evaluated, at once or when the
host says so), then STORING (its records are the host's to store), and the
room is IDLE again once it is stored or failed. When the log refuses it
for ids it holds from before the dedup window, the same commands are
RETAKEN, those answered as duplicates, and RESTORING: once is all. Each
call of the room core's face (`take`, `evaluate_batch`, `stored`,
`failed`) and what its evaluation found are events; an event the table
does not allow in the current phase raises `BatchMisuse` at one place
(`move`), a bug of the host's.

`Batch` holds the room as it was before the batch (what a rollback
restores), what the commit keeps (the records, the patches to make
resumable, the ids to remember, the tokens minted), and the commands with
what each was decided. `batch_of` says which queued commands go together.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

import rules
from sync_server.core.inputs import CommandIn, LogReader
from sync_server.core.outputs import Decision
from sync_server.core.patch_view import PatchView
from sync_server.core.records import DedupEntry, VersionRecord


class Phase(enum.StrEnum):  # (str: a cheap key of the table, moved at every batch)
    IDLE = "idle"  # no batch open: reads, joins, and the next `take`
    TAKEN = "taken"  # commands taken: evaluated at once, or when the host says
    STORING = "storing"  # evaluated: its records are the host's to store
    RETAKEN = "retaken"  # the log holds some of its ids: the same commands again
    RESTORING = "restoring"  # evaluated again: stored now, or failed


P = Phase

# Every legal move: (phase, event) -> next phase. Anything else is a bug of
# the host's, caught at one place (`move`).
TRANSITIONS: dict[tuple[Phase, str], Phase] = {
    (P.IDLE, "take"): P.TAKEN,
    (P.TAKEN, "evaluate"): P.TAKEN,
    (P.TAKEN, "evaluated"): P.STORING,
    (P.TAKEN, "nothing_to_store"): P.IDLE,  # every command refused, or a duplicate
    (P.STORING, "stored"): P.IDLE,
    (P.STORING, "retry"): P.RETAKEN,
    (P.RETAKEN, "evaluate"): P.RETAKEN,
    (P.RETAKEN, "evaluated"): P.RESTORING,
    (P.RETAKEN, "nothing_to_store"): P.IDLE,
    (P.RESTORING, "stored"): P.IDLE,
}
# An open batch may fail in any phase (the log, the disk, the host's task
# cancelled): the room is put back as it was before it.
TRANSITIONS.update({(phase, "failed"): P.IDLE for phase in Phase if phase is not P.IDLE})


class BatchMisuse(RuntimeError):
    """The host called the room core in a phase the table does not allow."""


def move(phase: Phase, event: str) -> Phase:
    """The phase after `event` in `phase`, or BatchMisuse."""
    try:
        return TRANSITIONS[(phase, event)]
    except KeyError:
        raise BatchMisuse(f"{event!r} in phase {phase.value}") from None


def batch_of(commands: Iterable[CommandIn], limit: int) -> list[CommandIn]:
    """Which of the commands queued in a row (in queue order) go in the
    next batch: up to `limit`, and an undo alone (it reads the log, which
    the batch before it must have reached). Reads no further than one
    past the batch."""
    taken: list[CommandIn] = []
    for c in commands:
        if c.op == "undo":
            if not taken:
                taken.append(c)
            break
        taken.append(c)
        if len(taken) >= limit:
            break
    return taken


NONE_KNOWN: Mapping[tuple[str, str], DedupEntry] = MappingProxyType({})


@attrs.define(eq=False)
class Batch:
    """An open batch. The room before it (`room`, `state`, `v`, `epochs`,
    `undo`, and the affordances kept then: `afford`) is what `rollback`
    restores; `records`, `patches`, `dedup_keys` and `tokens` are what
    `commit` keeps. `commands` are those taken (none when the core's
    steps are driven one by one: its unit tests, the bench), `decisions`
    what each was decided, in order."""

    room: rules.Room
    state: dict[str, Any]
    v: int
    epochs: dict[str, int]
    undo: rules.UndoEntry | None = None
    afford: dict[Any, dict[str, Any]] | None = None
    commands: list[CommandIn] | tuple[()] = ()
    decisions: list[Decision] = attrs.Factory(list)
    # Commands the log holds but the dedup window no longer does (looked up
    # by the host after the log's unique index refused them), by (user,
    # id): answered as the duplicates they are.
    known: Mapping[tuple[str, str], DedupEntry] = NONE_KNOWN
    # What an undo reads of the log (the host fetched it: `Evaluate`).
    log: LogReader | None = None
    records: list[VersionRecord] = attrs.Factory(list)
    patches: list[tuple[dict[str, Any], PatchView]] = attrs.Factory(list)
    dedup_keys: list[tuple[str, str]] = attrs.Factory(list)
    tokens: list[tuple[tuple[str, str, str], str]] = attrs.Factory(list)
    phase: Phase = Phase.TAKEN
