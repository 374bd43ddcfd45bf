"""Undo's rule (docs/protocol.md, "undo"): `rules.revert` restores the room as it
was before a command, keeps the users as they are now, and refuses rather
than repairs a result that breaks an invariant."""

from __future__ import annotations

import pytest

from rules import Conflict, RuleBroken, diff, revert
from tests.helpers.table import Table


def step(t: Table, op: str, **args):
    """Apply a command; return (room before, dict before, inverse ops)."""
    before, before_d = t.room, t.room.to_dict()
    t.do(op, **args)
    return before, before_d, diff(t.room.to_dict(), before_d)


def test_revert_restores_the_state_before_the_command_dice_queue_included():
    t = Table()
    a = t.add(owner=t.p1)
    t.do("queue_rolls", rolls=[3, 19])
    t.down(a)
    _, before_d, inverse = step(t, "first_aid", char=t.add("Medic"), patient=a)  # consumes the 3
    assert t.room.queued_rolls == [19]
    restored = revert(t.room, t.room.to_dict(), inverse, 9)
    assert restored.to_dict() == before_d


def test_revert_keeps_users_added_since_and_nulls_owners_removed_since():
    t = Table()
    a = t.add(owner=t.p1)
    _, _, inverse = step(t, "remove_character", char=a)
    t.do("remove_user", user=t.p1.user)  # not undoable: stays removed
    t.do("add_user", name="New", role="player")
    now = t.room.to_dict()
    restored = revert(t.room, now, inverse, 7)
    assert a in restored.characters
    assert restored.characters[a].owner is None  # its owner is gone
    assert restored.users.keys() == t.room.users.keys()
    assert restored.next_user == t.room.next_user


def test_revert_of_ops_that_no_longer_apply_is_a_conflict():
    t = Table()
    a = t.add()
    _, _, inverse = step(t, "damage", char=a, amount=3)
    t.do("remove_character", char=a)
    with pytest.raises(Conflict):
        revert(t.room, t.room.to_dict(), inverse, 5)


def test_revert_that_would_break_an_invariant_is_refused_not_repaired():
    t = Table()
    a = t.add()
    h = t.add("Healer")
    t.stabilised(a)
    t.do("heal", char=a, amount=5)  # awake: no longer tended (L4)
    # Ops that would give the conscious character a healer again (L4 invariant).
    bad = [["set", ["characters", a, "healer"], h]]
    with pytest.raises(RuleBroken):
        revert(t.room, t.room.to_dict(), bad, 6)


def test_L1_an_inverse_stored_before_next_check_existed_still_undoes():
    """An undo after an upgrade: the stored inverse of a stabilisation
    restores the fields L1's `next_check` follows, not the derived field
    itself (an older server wrote none). The undo still applies, and the
    room's dict form derives `next_check` again from what it restored."""
    t = Table()
    a = t.add()
    t.down(a)
    _, before_d, inverse = step(t, "heal", char=a, amount=0, stabilize=True)
    assert any(op[1][-1] == "next_check" for op in inverse)  # the inverse of today's
    older = [op for op in inverse if "next_check" not in op[1]]
    restored = revert(t.room, t.room.to_dict(), older, 9)
    assert restored.to_dict() == before_d
    assert before_d["characters"][a]["next_check"] is None
