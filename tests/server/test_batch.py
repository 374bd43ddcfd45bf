"""A batch's phases (core/batch.py), as h11 tests its state table: the
table as plain data, then the room core's face walked through it with
plain commands (no socket, no storage). A call the table does not allow in
the current phase raises `BatchMisuse`, from one place, and changes
nothing."""

from __future__ import annotations

import pytest

import rules
from rules.testing import SHEET
from sync_server.core.batch import TRANSITIONS, BatchMisuse, Phase, batch_of, move
from sync_server.core.inputs import StaticLog
from sync_server.core.limits import Limits
from sync_server.core.outputs import Answer, Done, Evaluate, Publish, Store
from sync_server.core.records import DedupEntry, StorageError, UndoTarget
from sync_server.testing.core import command, commit, new_core

P = Phase


def test_a_batch_is_taken_evaluated_and_stored() -> None:
    assert move(P.IDLE, "take") is P.TAKEN
    assert move(P.TAKEN, "evaluate") is P.TAKEN  # at once, or when the host says
    assert move(P.TAKEN, "evaluated") is P.STORING
    assert move(P.STORING, "stored") is P.IDLE
    assert move(P.TAKEN, "nothing_to_store") is P.IDLE  # all refused: nothing to store


def test_the_log_refusing_old_ids_takes_a_batch_again_once() -> None:
    assert move(P.STORING, "retry") is P.RETAKEN
    assert move(P.RETAKEN, "evaluate") is P.RETAKEN
    assert move(P.RETAKEN, "evaluated") is P.RESTORING
    assert move(P.RESTORING, "stored") is P.IDLE
    with pytest.raises(BatchMisuse, match="'retry' in phase restoring"):
        move(P.RESTORING, "retry")


def test_an_open_batch_may_fail_in_any_phase_and_idle_has_none_to_fail() -> None:
    assert {p for (p, event) in TRANSITIONS if event == "failed"} == set(Phase) - {P.IDLE}
    assert all(move(p, "failed") is P.IDLE for p in Phase if p is not P.IDLE)
    with pytest.raises(BatchMisuse):
        move(P.IDLE, "failed")


def test_only_an_idle_room_takes_and_only_a_taken_batch_is_evaluated() -> None:
    assert [p for p in Phase if (p, "take") in TRANSITIONS] == [P.IDLE]
    assert {p for p in Phase if (p, "evaluate") in TRANSITIONS} == {P.TAKEN, P.RETAKEN}
    assert {p for p in Phase if (p, "stored") in TRANSITIONS} == {P.STORING, P.RESTORING}
    with pytest.raises(BatchMisuse, match="'stored' in phase taken"):
        move(P.TAKEN, "stored")  # storing what was not evaluated


def test_a_batch_takes_up_to_its_limit_and_an_undo_alone() -> None:
    gm = rules.Actor("u1", "gm")

    def ops(names: list[str], limit: int = 128) -> list[str]:
        return [c.op for c in batch_of([command(gm, op) for op in names], limit)]

    assert ops(["damage", "heal", "undo", "heal"]) == ["damage", "heal"]
    assert ops(["undo", "heal"]) == ["undo"]
    assert ops(["heal"] * 10, limit=4) == ["heal"] * 4
    assert ops([]) == []


# --- the room core's face, through the table ---------------------------------


def test_the_face_refuses_calls_out_of_phase_and_they_change_nothing() -> None:
    core, gm = new_core()
    for call in (core.stored, core.evaluate_batch, lambda: core.failed(OSError("x"))):
        with pytest.raises(BatchMisuse, match="in phase idle"):
            call()
    step = core.take([command(gm, "update_room", name="A")])  # evaluated at once
    assert isinstance(step, Store) and step.taken == 1 and step.expected == 0
    with pytest.raises(BatchMisuse, match="'take' in phase storing"):
        core.take([command(gm, "update_room", name="B")])  # one batch at a time
    with pytest.raises(BatchMisuse, match="'evaluate' in phase storing"):
        core.evaluate_batch()  # evaluated already
    done = core.stored()
    assert isinstance(done, Done) and [type(o) for o in done.outputs] == [Publish, Answer]
    assert core.committed().v == 1 and core.committed().state["name"] == "A"
    with pytest.raises(BatchMisuse, match="'stored' in phase idle"):
        core.stored()  # once


def test_a_batch_that_stores_nothing_is_done_at_once() -> None:
    core, gm = new_core()
    step = core.take([command(gm, "damage", char="nobody", amount=1)])
    assert isinstance(step, Done) and step.outputs[0].outcome == "not_found"
    assert isinstance(core.take([command(gm, "update_room", name="A")]), Store)  # idle again


def test_an_undo_waits_for_the_log_its_host_reads() -> None:
    core, gm = new_core()
    hit = core.evaluate(command(gm, "update_room", name="A"))
    commit(core)
    step = core.take([command(gm, "undo"), command(gm, "update_room", name="B")])
    assert step == Evaluate(taken=1, reads_log=True, big=False)
    with pytest.raises(BatchMisuse, match="'stored' in phase taken"):
        core.stored()
    with pytest.raises(BatchMisuse, match="'retry' in phase taken"):  # nothing was stored
        core.failed(StorageError("x"), {(gm.user, "old"): DedupEntry(gm.user, "old", 1, {})})
    target = UndoTarget(1, "update_room", gm.user, hit.record.inverse)
    step = core.evaluate_batch(StaticLog(target))
    assert isinstance(step, Store) and [r.undoes for r in step.records] == [1]
    assert core.stored().outputs[-1].frame["result"] == {"undone": 1, "op": "update_room"}


def test_a_big_rooms_batch_waits_for_its_host_to_say_where() -> None:
    core, gm = new_core(limits=Limits(off_loop_min_characters=1))
    step = core.take([command(gm, "update_room", name="A")])
    assert isinstance(step, Store)  # no character yet: evaluated at once
    core.stored()
    core.evaluate(command(gm, "add_character", name="Aline", **SHEET))
    commit(core)
    clock = [command(gm, "advance_clock", seconds=6) for _ in range(2)]
    step = core.take(clock)
    assert step == Evaluate(taken=2, reads_log=False, big=True)
    step = core.evaluate_batch()
    assert isinstance(step, Store) and [r.v for r in step.records] == [3, 4]
    # Taken again (the log holds the first id): evaluated where the host says, again.
    known = {(gm.user, clock[0].cmd_id): DedupEntry(gm.user, clock[0].cmd_id, 1, {})}
    assert core.failed(StorageError("x"), known) == Evaluate(taken=2, reads_log=False, big=True)
    step = core.evaluate_batch()
    assert isinstance(step, Store) and step.again and [r.v for r in step.records] == [3]
    assert isinstance(core.stored(), Done) and core.committed().v == 3


def test_ids_the_log_holds_are_answered_as_duplicates_and_the_rest_stored() -> None:
    """docs/protocol.md, Retries: an id older than the dedup window, which
    the log's unique index refuses, gets its first ack; the others of its
    batch are taken again and stored, once."""
    core, gm = new_core()
    for name in ("A", "B"):
        core.evaluate(command(gm, "update_room", name=name))
    commit(core)
    batch = [
        command(gm, "update_room", cmd_id="old", name="C"),
        command(gm, "update_room", cmd_id="new", name="D"),
    ]
    step = core.take(batch)
    assert isinstance(step, Store) and [r.v for r in step.records] == [3, 4]
    assert step.keys() == [(gm.user, "old"), (gm.user, "new")]
    known = {(gm.user, "old"): DedupEntry(gm.user, "old", 1, {"first": True})}
    again = core.failed(StorageError("UNIQUE constraint failed"), known)
    assert isinstance(again, Store) and again.again and again.keys() == []  # once is all
    assert [(r.cmd_id, r.v) for r in again.records] == [("new", 3)] and again.expected == 2
    with pytest.raises(BatchMisuse, match="'retry' in phase restoring"):
        core.failed(StorageError("again"), known)
    outputs = core.stored().outputs
    answers = [o.frame for o in outputs if isinstance(o, Answer)]
    assert answers[0] == {"t": "ack", "id": "old", "v": 1, "result": {"first": True}, "dup": True}
    assert answers[1]["v"] == 3 and "dup" not in answers[1]
    assert core.committed().state["name"] == "D"


def test_a_retried_batch_that_fails_again_is_answered_internal_but_its_duplicates() -> None:
    core, gm = new_core()
    step = core.take([command(gm, "update_room", cmd_id="old", name="C")])
    assert isinstance(step, Store)
    known = {(gm.user, "old"): DedupEntry(gm.user, "old", 0, {})}
    done = core.failed(StorageError("x"), known)  # its only command a duplicate
    assert isinstance(done, Done) and done.outputs[0].frame["dup"] is True
    step = core.take([command(gm, "update_room", name="E"), command(gm, "update_room", name="F")])
    assert isinstance(step, Store)
    first = step.records[0].cmd_id
    known = {(gm.user, first): DedupEntry(gm.user, first, 0, {})}
    assert isinstance(core.failed(StorageError("x"), known), Store)
    done = core.failed(OSError("disk full"))
    answers = [o.frame for o in done.outputs if isinstance(o, Answer)]
    assert answers[0]["dup"] is True and answers[1]["code"] == "internal"
    assert core.committed().v == 0 and core.v == 0
