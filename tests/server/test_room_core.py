"""The room core, sans-I/O: plain commands in, decisions out, transactions
(commit, rollback) with no socket, storage or event loop."""

from __future__ import annotations

import copy

import pytest

import rules
from rules.testing import SHEET
from sync_server.core.auth import hash_token
from sync_server.core.inputs import StaticLog
from sync_server.core.limits import Limits
from sync_server.core.outputs import (
    Answer,
    CloseUsers,
    Evaluate,
    Lost,
    Publish,
    RememberToken,
    Store,
)
from sync_server.core.reads import JoinRefused
from sync_server.storage import RoomDeleted, UndoTarget, VersionConflict
from sync_server.testing.core import command, commit, new_core, run_batch


def _char(core, gm, name="Aline", **extra):
    d = core.evaluate(command(gm, "add_character", name=name, **SHEET, **extra))
    assert d.outcome == "ok", d.reply
    return d.reply["result"]["char"]


def test_an_accepted_command_makes_the_next_version() -> None:
    core, gm = new_core()
    d = core.evaluate(command(gm, "update_room", cmd_id="c-1", name="Jeudi"))
    assert d.outcome == "ok" and d.pending
    assert d.reply == {"t": "ack", "id": "c-1", "v": 1, "result": {}}
    assert d.patch == {
        "t": "patch",
        "v": 1,
        "ops": [["set", ["name"], "Jeudi"]],
        "events": [{"kind": "room", "name": "Jeudi", "round_seconds": 6, "skip_dead": True}],
        "by": gm.user,
        "id": "c-1",
    }
    assert (
        d.record is not None
        and d.record.v == 1
        and d.record.inverse == [["set", ["name"], "Table du jeudi"]]
    )
    assert core.v == 1 and core.state["name"] == "Jeudi"
    assert core.base_v == 0 and core.pending == [d.record]
    core.commit()
    assert core.base_v == 1 and core.pending == [] and core.patches_after(0) == [d.patch]


def test_a_batch_builds_version_on_version_and_rolls_back_whole() -> None:
    core, gm = new_core()
    cid = _char(core, gm)
    core.commit()
    before = (copy.deepcopy(core.state), core.v, dict(core.dedup))
    ds = [core.evaluate(command(gm, "damage", char=cid, amount=5)) for _ in range(3)]
    assert [d.reply["v"] for d in ds] == [2, 3, 4]
    assert core.state["characters"][cid]["pe"] == 0  # 15 PE - 15
    out = core.rollback(ds)
    assert [d.outcome for d in out] == ["internal"] * 3
    assert [d.reply["id"] for d in out] == [d.reply["id"] for d in ds]
    assert (core.state, core.v, dict(core.dedup)) == before
    assert core.pending == [] and len(core.recent) == 1  # nothing of the batch kept
    # The retry of a rolled-back command runs again (it was never stored).
    again = core.evaluate(command(gm, "damage", cmd_id=ds[0].reply["id"], char=cid, amount=5))
    assert again.outcome == "ok" and again.reply["v"] == 2


def test_a_refusal_changes_nothing_and_records_nothing() -> None:
    core, gm = new_core()
    state = copy.deepcopy(core.state)
    d = core.evaluate(command(gm, "damage", char="nobody", amount=1))
    assert d.outcome == "not_found" and d.record is None and d.patch is None
    assert not d.pending and core.state == state and core.v == 0
    assert core.pending == []


def test_dedup_answers_the_first_ack_also_within_the_batch() -> None:
    core, gm = new_core()
    first = core.evaluate(command(gm, "update_room", cmd_id="same", name="A"))
    dup = core.evaluate(command(gm, "update_room", cmd_id="same", name="B"))
    assert dup.outcome == "dup" and dup.pending  # depends on the batch's commit
    assert dup.reply == {**first.reply, "dup": True}
    assert core.state["name"] == "A" and core.v == 1
    core.commit()
    later = core.evaluate(command(gm, "update_room", cmd_id="same", name="C"))
    assert later.outcome == "dup" and not later.pending and later.reply["v"] == 1


def test_expect_is_checked_after_the_id() -> None:
    core, gm = new_core()
    core.evaluate(command(gm, "update_room", cmd_id="x", name="A"))
    assert core.evaluate(command(gm, "update_room", cmd_id="x", name="A", expect=99)).outcome == (
        "dup"
    )
    stale = core.evaluate(command(gm, "update_room", name="B", expect=0))
    assert stale.outcome == "conflict" and "version 1" in stale.reply["message"]
    bad = core.evaluate(command(gm, "update_room", name="B", expect="1"))
    assert bad.outcome == "invalid_args"
    ok = core.evaluate(command(gm, "update_room", name="B", expect=1))
    assert ok.outcome == "ok" and ok.reply["v"] == 2


def test_effects_issue_tokens_without_storing_them() -> None:
    core, gm = new_core()
    d = core.evaluate(command(gm, "add_user", cmd_id="add", name="Paul", role="player"))
    uid = d.reply["result"]["user"]
    assert d.reply["result"] == {"user": uid, "token": "token-1"}
    assert d.record.result == {"user": uid}  # the log never holds a token
    assert d.record.token_set == ((uid, hash_token("token-1")),)
    assert not d.record.undoable and d.closes == ()
    retry = core.evaluate(command(gm, "add_user", cmd_id="add", name="Paul", role="player"))
    assert retry.reply["result"]["token"] == "token-1"  # a retry within the batch
    commit(core)  # the host keeps the minted token server-wide (RememberToken)
    retry = core.evaluate(command(gm, "add_user", cmd_id="add", name="Paul", role="player"))
    assert retry.reply["dup"] and retry.reply["result"]["token"] == "token-1"


def test_rotating_a_token_ends_that_users_sessions() -> None:
    core, gm = new_core()
    uid = core.evaluate(command(gm, "add_user", name="Paul", role="player")).reply["result"]["user"]
    paul = rules.Actor(uid, "player")
    core.commit()
    d = core.evaluate(command(gm, "rotate_token", user=uid))
    assert d.closes == (uid,) and d.reply["result"]["token"] == "token-2"
    assert d.record.token_set == ((uid, hash_token("token-2")),)
    old_session = core.evaluate(command(paul, "stabilize", char="c1", epoch=0))
    assert old_session.outcome == "forbidden" and "rotated" in old_session.reply["message"]
    core.rollback([d])  # not stored: the old token (and its sessions) still hold
    assert core.epochs.get(uid, 0) == 0


def test_removing_a_user_revokes_its_token() -> None:
    core, gm = new_core()
    uid = core.evaluate(command(gm, "add_user", name="Olga", role="observer")).reply["result"][
        "user"
    ]
    d = core.evaluate(command(gm, "remove_user", user=uid))
    assert d.record.token_del == (uid,) and d.closes == (uid,)
    assert uid not in core.state["users"]


def test_admin_ops_need_an_admin_session() -> None:
    core, gm = new_core()
    d = core.evaluate(command(gm, "create_room", room="r2", name="x"))
    assert d.outcome == "forbidden"


def test_undo_reads_the_log_through_its_reader() -> None:
    core, gm = new_core()
    cid = _char(core, gm)
    hit = core.evaluate(command(gm, "damage", char=cid, amount=20))
    core.commit()
    target = UndoTarget(hit.record.v, "damage", gm.user, hit.record.inverse)
    d = core.evaluate(command(gm, "undo"), StaticLog(target))
    assert d.outcome == "ok" and d.reply["result"] == {"undone": 2, "op": "damage"}
    assert d.record.undoes == 2 and not d.record.undoable
    assert core.state["characters"][cid]["pe"] == 15
    core.commit()
    assert core.evaluate(command(gm, "undo"), StaticLog(None)).outcome == "conflict"


def test_undo_goes_alone_and_only_for_the_gm() -> None:
    core, gm = new_core()
    core.evaluate(command(gm, "update_room", name="A"))
    d = core.evaluate(command(gm, "undo"), StaticLog(None))
    assert d.outcome == "internal"  # the log does not hold this batch yet
    core.commit()
    player = rules.Actor("u9", "player")
    assert core.evaluate(command(player, "undo"), StaticLog(None)).outcome == "forbidden"
    assert core.evaluate(command(gm, "undo", x=1), StaticLog(None)).outcome == "invalid_args"


class BrokenDice:
    def d20(self) -> int:
        raise RuntimeError("the dice server is on fire")


def test_an_unexpected_failure_is_internal_and_changes_nothing() -> None:
    core, gm = new_core(dice=BrokenDice())
    a, b = _char(core, gm, "Aline"), _char(core, gm, "Bruno")
    core.evaluate(command(gm, "damage", char=a, amount=35))  # dying
    state, v = copy.deepcopy(core.state), core.v
    d = core.evaluate(command(gm, "first_aid", char=b, patient=a))  # rolls: raises
    assert d.outcome == "internal" and not d.pending and d.record is None
    assert core.state == state and core.v == v
    assert core.evaluate(command(gm, "update_room", name="still fine")).reply["v"] == v + 1


def test_a_snapshot_is_due_every_n_versions() -> None:
    core, gm = new_core(limits=Limits(snapshot_every_versions=3))
    seen = []
    for _ in range(7):
        core.evaluate(command(gm, "advance_clock", seconds=1))
        due = core.snapshot_due()
        seen.append(None if due is None else due[0])
        core.commit()
    assert seen == [None, None, 3, None, None, 6, None]


def test_join_gives_state_or_the_patches_after_since() -> None:
    core, gm = new_core()
    for name in ("A", "B", "C"):
        core.evaluate(command(gm, "update_room", name=name))
    core.commit()
    welcome, role, epoch = core.join(gm.user, None)
    assert (role, epoch) == ("gm", 0) and welcome["v"] == 3
    # The state itself (no copy), beside what the GM may do now.
    state = welcome["state"]
    assert set(state) == {*core.state, "affordances"}
    assert all(state[k] is core.state[k] for k in core.state)
    assert state["affordances"]["undo"] == {"v": 3, "op": "update_room", "by": gm.user}
    welcome, _, _ = core.join(gm.user, 1)
    assert [p["v"] for p in welcome["patches"]] == [2, 3] and "state" not in welcome
    welcome, _, _ = core.join(gm.user, 3)
    assert welcome["patches"] == []
    assert "state" in core.join(gm.user, 99)[0]  # ahead of the room
    with pytest.raises(JoinRefused) as refused:
        core.join("u404", None)
    assert refused.value.close == 4401


def test_sync_answers_from_memory_or_with_a_snapshot_and_echoes_its_id() -> None:
    core, gm = new_core(limits=Limits(recent_patches_in_memory=2))
    made = []
    for name in ("A", "B", "C"):
        made.append(core.evaluate(command(gm, "update_room", name=name)).patch)
        core.commit()
    assert core.sync_reply(1, "q1") == {
        "t": "patches",
        "patches": made[1:],
        "id": "q1",
    }
    snap = core.sync_reply(0)  # older than memory holds: one snapshot, no replay
    assert snap["t"] == "snapshot" and snap["v"] == 3 and "id" not in snap


# --- the batch as the host drives it: ordered outputs ---------------------------


def test_a_stored_batch_says_what_to_send_in_order() -> None:
    core, gm = new_core()
    add = command(gm, "add_user", cmd_id="add", name="Paul", role="player")
    outputs = run_batch(core, [add])
    uid = outputs[2].frame["result"]["user"]
    assert [type(o) for o in outputs] == [RememberToken, Publish, Answer]
    assert outputs[0] == RememberToken((core.room_id, gm.user, "add"), "token-1")
    assert outputs[2].index == 0 and outputs[2].frame["result"]["token"] == "token-1"
    rotate = command(gm, "rotate_token", user=uid)
    damage = command(gm, "update_room", name="Jeudi")
    outputs = run_batch(core, [rotate, damage])
    kinds = [type(o) for o in outputs]
    assert kinds == [RememberToken, Publish, Answer, CloseUsers, Publish, Answer]
    assert outputs[3] == CloseUsers((uid,))
    assert [o.index for o in outputs if isinstance(o, Answer)] == [0, 1]


def test_a_failed_batch_answers_everyone_internal_and_moves_nothing() -> None:
    core, gm = new_core()
    step = core.take([command(gm, "update_room", name=f"n{i}") for i in range(3)])
    assert isinstance(step, Store)
    assert [r.v for r in step.records] == [1, 2, 3] and step.expected == 0
    assert core.committed().v == 0  # readers outside the queue: only what is stored
    outputs = core.failed(OSError("disk full")).outputs
    assert [type(o) for o in outputs] == [Answer, Answer, Answer]
    assert all(o.frame["code"] == "internal" for o in outputs if isinstance(o, Answer))
    assert core.v == 0 and core.committed().v == 0


def test_a_fenced_batch_says_the_room_is_lost() -> None:
    core, gm = new_core()
    core.take([command(gm, "update_room", name="x")])
    lost = core.failed(VersionConflict("head moved")).outputs[-1]
    assert isinstance(lost, Lost) and lost.code == 1012
    core.take([command(gm, "update_room", name="y")])
    deleted = core.failed(RoomDeleted("gone")).outputs[-1]
    assert isinstance(deleted, Lost) and deleted.code == 4404


def _taken(ops: list[str], limit: int = 128) -> int:
    """How many of `ops`, queued in a row, the next batch takes."""
    core, gm = new_core(limits=Limits(max_command_batch=limit))
    return core.take([command(gm, op) for op in ops]).taken


def test_an_undo_goes_alone_and_reads_the_log() -> None:
    assert _taken(["damage", "heal", "undo", "heal"]) == 2
    assert _taken(["undo", "heal"]) == 1
    assert _taken(["heal"] * 10, limit=4) == 4
    core, _gm = new_core()
    step = core.take([command(_gm, "undo")])
    assert isinstance(step, Evaluate) and step.reads_log


def test_patch_view_keys_name_their_parts_and_only_the_gms_affordances_are_exempt() -> None:
    """PatchView groups viewers by a `ViewKey` (what they see, whether the
    patch is their own, their affordance class if it changed): the cap of
    views exempts the GM's own frame by that class, not by a key's shape."""
    from rules.view import CLASS_PUBLIC
    from sync_server.core.patch_view import PatchView, ViewKey

    patch = {"by": "u2", "id": "c1", "ops": [], "events": []}
    gm, admin = rules.Viewer("u1", "gm"), rules.Viewer(None, "admin")
    author, other = rules.Viewer("u2", "player"), rules.Viewer("u3", "player")
    plain = PatchView(patch, None)
    assert plain.key(gm) is None and plain.key(admin) is None  # the plain patch
    assert plain.key(author) == ViewKey(CLASS_PUBLIC, own=True)
    assert plain.key(other) == ViewKey(CLASS_PUBLIC)
    afford = PatchView(patch, None, {"gm": [["set", ["x"], 1]], ("player", "u3"): []})
    assert afford.key(gm) == ViewKey(None, afford="gm") and afford.exempt(afford.key(gm))
    assert afford.key(other) == ViewKey(CLASS_PUBLIC, afford=("player", "u3"))
    assert not afford.exempt(afford.key(other)) and not afford.exempt(afford.key(author))
    assert not afford.exempt((None, "gm"))  # a bare tuple is no key
