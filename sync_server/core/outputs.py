"""What the room core hands its host, as small immutable values (h11's
events; python-websockets' `events_received()` and `data_to_send()`).

Each call of the core's face returns a `Step`, what the host does next:
`Evaluate` (read the log's undo target first, or choose where the batch
is evaluated), `Store` (store these records on this head), or `Done`: the
`Output`s to carry out, in order: `RememberToken`, then per command its
`Publish`, its `Answer` and its `CloseUsers`, and last, if the room is no
longer this node's, `Lost`. They are made of each command's `Decision`.
What is stored, readers outside the room's queue get as one value
(`Committed`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

from sync_server.core.patch_view import PatchView
from sync_server.core.records import VersionRecord
from sync_server.wire import protocol

# The outcome of a command whose id (an HTTP Idempotency-Key) was applied
# to another command: a `conflict` error, 422 at the HTTP door.
KEY_REUSED = "key_reused"


@attrs.frozen
class Decision:
    """What one evaluated command produces. `reply` goes to the sender only
    (after `patch` reaches everyone); `record` is stored before either is
    sent; `closes` are users whose sessions end (4403) once it is stored.
    `pending`: the decision depends on the open batch's commit (an accepted
    command, or a retry of one accepted earlier in the same batch)."""

    reply: dict[str, Any]
    outcome: str  # "ok", "dup", or the error code
    record: VersionRecord | None = None
    patch: dict[str, Any] | None = None
    closes: tuple[str, ...] = ()
    pending: bool = False
    # How each viewer sees the patch (views, command ids: PatchView).
    view: PatchView | None = None


def refusal(cmd_id: str | None, code: str, message: str) -> Decision:
    return Decision(protocol.error(code, message, cmd_id), code)


def internal(
    cmd_id: str | None, message: str = "the server could not store this command; retry"
) -> Decision:
    return refusal(cmd_id, "internal", message)


# --- what the host carries out, in order ---------------------------------------


@attrs.frozen
class Publish:
    """Send a stored version's patch to every subscriber of the room (as
    each viewer may see it: `view`)."""

    patch: dict[str, Any]
    view: PatchView | None


@attrs.frozen
class Answer:
    """Reply to the batch's `index`-th command (ack or error) and count it."""

    index: int
    frame: dict[str, Any]
    outcome: str


@attrs.frozen
class CloseUsers:
    """End these users' sessions (4403): removed, or their token rotated."""

    users: tuple[str, ...]


@attrs.frozen
class RememberToken:
    """A token the batch minted, kept server-wide for a while so that a
    retry of its command gets it again (tokens are never stored)."""

    key: tuple[str, str, str]
    token: str


@attrs.frozen
class Lost:
    """This node no longer serves the room (fenced, or deleted elsewhere):
    stop at once, close its sessions with `code`."""

    why: str
    code: int


Output = Publish | Answer | CloseUsers | RememberToken | Lost


def outputs_of(decisions: list[Decision]) -> list[Output]:
    """Per command, in order: its patch to publish, its answer, the
    sessions it ends."""
    out: list[Output] = []
    for i, d in enumerate(decisions):
        if d.patch is not None:
            out.append(Publish(d.patch, d.view))
        out.append(Answer(i, d.reply, d.outcome))
        if d.closes:
            out.append(CloseUsers(d.closes))
    return out


# --- the steps of a batch: what the host does next -----------------------------
# Each says how many of the commands offered to `take` the batch holds
# (`taken`: the first ones, in queue order; an `Answer`'s index is into them).


@attrs.frozen
class Evaluate:
    """Evaluate the batch next (`RoomCore.evaluate_batch`), which the core
    did not do at once: the batch `reads_log` (an undo: read the log's
    undo target, and the one after it, and hand them in), or the room is
    `big` (`Limits.off_loop_min_characters` characters or more: the host
    measures what its ops cost and may evaluate it off the event loop)."""

    taken: int
    reads_log: bool
    big: bool


@attrs.frozen
class Store:
    """Store `records` (and `snapshot`) on the head `expected`, then call
    `stored()`, or `failed(error)`. `again`: the batch was taken again
    already, the log having refused it (see `keys`)."""

    taken: int
    records: list[VersionRecord]
    snapshot: tuple[int, dict[str, Any]] | None
    expected: int
    again: bool = False

    def keys(self) -> list[tuple[str, str]]:
        """When the log refuses the batch: the (user, id) it may hold
        already (older than the dedup window). The host looks them up, and
        `failed(error, known)` with those it holds takes the same commands
        again, those answered as duplicates; none for a batch taken again
        already (once is all)."""
        if self.again:
            return []
        return [(r.user, r.cmd_id) for r in self.records if r.cmd_id is not None]


@attrs.frozen
class Done:
    """The batch is over (stored, refused whole, or failed): carry out
    `outputs` in order, deciding nothing."""

    taken: int
    outputs: list[Output]


Step = Evaluate | Store | Done


class Committed(NamedTuple):
    """What is stored, as readers outside the room's queue see it (the
    sessions, the HTTP door, admin): never a version that a failed commit
    could still take back. `state` is the dict form (never changed in
    place), `epochs` each user's session epoch."""

    state: dict[str, Any]
    v: int
    epochs: dict[str, int]
