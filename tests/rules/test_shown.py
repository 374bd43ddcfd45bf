"""The `shown` setting of a character (views, docs/protocol.md, "Views"): its default
from the owner's role, the GM's choice at add_character and by
update_character, its dict form (and a state stored before it existed), and
what the engine tells a player about a character hidden from them."""

from __future__ import annotations

import pytest

from rules import (
    Conflict,
    Forbidden,
    InvalidArgs,
    NotFound,
    Room,
    RuleBroken,
    diff,
    revert,
    violations,
)
from rules.context import UNSEEN_NAME
from tests.helpers.table import SHEET, Table
from tests.rules.rulekit import ch, ok, refused


def test_views_shown_defaults_by_the_owners_role():
    """A player's character is `full`; the GM's and nobody's `status`."""
    t = Table()
    assert ch(t, t.add("P", owner=t.p1))["shown"] == "full"
    assert ch(t, t.add("G", owner=t.gm))["shown"] == "status"
    assert ch(t, t.add("N"))["shown"] == "status"


@pytest.mark.parametrize("shown", ["full", "status", "hidden"])
def test_views_add_character_takes_shown(shown):
    t = Table()
    assert ch(t, t.add("N", owner=t.p1, shown=shown))["shown"] == shown
    ok(t)


def test_views_update_character_sets_shown_and_says_so():
    t = Table()
    a = t.add("A")
    t.do("update_character", char=a, set={"shown": "hidden"})
    assert ch(t, a)["shown"] == "hidden"
    assert t.events == [{"kind": "character", "char": a, "change": "updated", "fields": ["shown"]}]


def test_views_shown_does_not_follow_a_change_of_owner():
    """The default applies when the character is added; afterwards `shown`
    changes only when the GM sets it (a new owner keeps the setting)."""
    t = Table()
    a = t.add("A")
    t.do("update_character", char=a, set={"owner": t.p1.user})
    assert ch(t, a)["shown"] == "status"
    t.do("remove_user", user=t.p1.user)
    assert ch(t, a)["shown"] == "status"


@pytest.mark.parametrize("bad", ["secret", "FULL", None, True, 1, ["full"]])
def test_views_shown_must_be_one_of_three(bad):
    t = Table()
    a = t.add("A")
    if bad is not None:  # null is "absent" for the optional add_character argument
        refused(t, InvalidArgs, "add_character", **SHEET, name="N", shown=bad)
    refused(t, InvalidArgs, "update_character", char=a, set={"shown": bad})


@pytest.mark.parametrize("who", ["p1", "p2", "obs"])
def test_views_only_the_gm_sets_shown(who):
    t = Table()
    a = t.add("A", owner=t.p1)
    refused(t, Forbidden, "update_character", by=getattr(t, who), char=a, set={"shown": "hidden"})


def test_views_shown_round_trips_and_an_old_state_gets_the_default():
    """A state stored before `shown` existed gets the default of each owner's role."""
    t = Table()
    p = t.add("P", owner=t.p1)
    g = t.add("G", owner=t.gm)
    n = t.add("N")
    h = t.add("H", owner=t.p1, shown="hidden")
    d = t.room.to_dict()
    assert Room.from_dict(d).to_dict() == d
    for c in d["characters"].values():
        del c["shown"]
    old = Room.from_dict(d)
    assert {c: old.characters[c].shown for c in (p, g, n, h)} == {
        p: "full",
        g: "status",
        n: "status",
        h: "full",  # the setting was lost with the field: the default again
    }


def test_views_undo_restores_shown():
    t = Table()
    a = t.add("A", owner=t.p1)
    before = t.room.to_dict()
    t.do("update_character", char=a, set={"shown": "hidden"})
    restored = revert(t.room, t.room.to_dict(), diff(t.room.to_dict(), before), 9)
    assert restored.characters[a].shown == "full"


def test_views_an_unknown_shown_breaks_an_invariant():
    t = Table()
    a = t.add("A")
    d = t.room.to_dict()
    d["characters"][a]["shown"] = "secret"
    assert violations(Room.from_dict(d)) == [
        f"{a}: unknown shown 'secret' (one of full, status, hidden)"
    ]


# ---------------------------------------------------------------- what refusals tell a player


def test_views_a_hidden_character_is_not_found_for_others():
    """Naming a character hidden from you is the same refusal as a wrong id
    (not_found, before forbidden), so guessing ids reveals nothing; its
    owner and the GM still reach it."""
    t = Table()
    medic = t.add("Medic", owner=t.p1)
    secret = t.add("Secret-NPC", shown="hidden")
    mine = t.add("Mine", owner=t.p2, shown="hidden")
    t.down(secret)
    for who, op, args in [
        (t.p1, "first_aid", {"char": medic, "patient": secret}),
        (t.p1, "stabilize", {"char": secret}),
        (t.obs, "stabilize", {"char": secret}),
        (t.p1, "rest", {"char": mine, "kind": "short"}),
    ]:
        err = refused(t, NotFound, op, by=who, **args)
        assert "Secret-NPC" not in str(err) and "Mine" not in str(err)
    t.do("rest", by=t.p2, char=mine, kind="short")  # its owner sees it
    t.dice.push(15)
    t.do("first_aid", char=medic, patient=secret)  # the GM sees everything


def test_views_a_status_character_is_found():
    t = Table()
    medic = t.add("Medic", owner=t.p1)
    npc = t.add("Gobelin")
    t.down(npc)
    t.dice.push(15)
    t.do("first_aid", by=t.p1, char=medic, patient=npc)
    assert t.char(npc).condition == "stable"


def test_views_end_turn_refusal_does_not_name_a_hidden_current_combatant():
    t = Table()
    a = t.add("Aline", owner=t.p1)
    s = t.add("Secret-Liche", shown="hidden")
    t.do("combat_start", order=[s, a])
    err = refused(t, Conflict, "end_turn", by=t.p1, char=a)
    assert "Secret-Liche" not in str(err) and UNSEEN_NAME in str(err)
    err = refused(t, Conflict, "end_turn", char=a)  # the GM gets the name
    assert "Secret-Liche" in str(err)


def test_views_tend_refusal_does_not_name_a_hidden_healer():
    t = Table()
    mine = t.add("Aline", owner=t.p1)
    patient = t.add("Bruno", owner=t.p1)
    secret = t.add("Secret-Druide", shown="hidden")
    t.stabilised(patient)
    t.do("tend", char=secret, patient=patient)
    err = refused(t, RuleBroken, "tend", by=t.p1, char=mine, patient=patient)
    assert "Secret-Druide" not in str(err) and UNSEEN_NAME in str(err)
