"""Affordances (rules/affordances.py): what a viewer may do now.

Examples first (S3's cost, S1's patients, R1's short rest, T1's turn, undo,
views), then the property (hypothesis) over random reachable states and
every viewer: each action offered, sent with the offered arguments, is
accepted by `apply`; each one offered as unavailable, each choice not
offered and each op not offered at all is refused, and an unavailable one
with the very reason given.
"""

from __future__ import annotations

import ast
import pathlib
import random
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import rules
from client_stub.events import TEXTS, EventText
from rules import OPS, Actor, Refused, RuleTable, SeededDice, UndoEntry, Viewer, apply
from rules import affordances_begin as begin
from rules import affordances_of as asked
from rules.affordances import OFFERS, affordances, affordances_for
from rules.engine import authorize_undo
from rules.errors import Conflict, Forbidden, InvalidArgs, NotFound, RuleBroken, UnknownOp
from tests.helpers.table import SHEET, Table
from tests.rules.test_views import (
    ACTORS,
    VIEW_COMMANDS,
    aim,
    all_viewers,
    assert_no_secret,
    secret_table,
)

REFUSALS = (Conflict, Forbidden, InvalidArgs, NotFound, RuleBroken, UnknownOp)


def viewer(actor: Actor) -> Viewer:
    return Viewer(actor.user, actor.role)


def test_every_op_has_its_affordance():
    """A new op needs one entry in OFFERS (and no entry outlives its op)."""
    assert set(OFFERS) == set(OPS)


def test_S3_stabilize_is_offered_with_its_cost():
    t = Table()
    a = t.add("Aline", owner=t.p1, pp_max=8)
    t.down(a)
    mine = affordances(t.room, viewer(t.p1))["chars"][a]
    assert mine["stabilize"] == {"args": {"char": a}, "cost": {"pp": 2}}
    assert mine["stay_in_fight"]["why"] == {
        "key": "stay_not_stable",
        "char": a,
        "condition": "dying",
    }
    t.do("stabilize", by=t.p1, char=a)
    t.do("damage", char=a, amount=1)  # dying again (D3), the S3/S4 allowance spent
    why = affordances(t.room, viewer(t.p1))["chars"][a]["stabilize"]["why"]
    assert why == {"key": "allowance_used", "char": a}


def test_S1_first_aid_lists_the_dying_patients():
    t = Table()
    a = t.add("Aline", owner=t.p1)
    b = t.add("Bruno", owner=t.p2)
    c = t.add("Chloé", owner=t.p2)
    assert affordances(t.room, viewer(t.p1))["chars"][a]["first_aid"] == {
        "args": {"char": a},
        "why": {"key": "first_aid_nobody"},
    }
    t.down(b)
    t.down(c)
    offered = affordances(t.room, viewer(t.p1))["chars"][a]["first_aid"]
    assert offered == {"args": {"char": a}, "choices": {"patient": [b, c]}}
    gm = affordances(t.room, viewer(t.gm))["chars"][a]["first_aid"]
    assert gm["free"] == ["roll"]  # X1: only the GM supplies a die
    # p1 acts for Aline only: nothing of Bruno's is theirs to send.
    assert b not in affordances(t.room, viewer(t.p1))["chars"]


def test_R1_a_short_rest_needs_a_PP():
    t = Table()
    a = t.add("Aline", owner=t.p1, pp=0)
    rest = affordances(t.room, viewer(t.p1))["chars"][a]["rest"]
    assert rest["choices"] == {"kind": ["night", "bed"]}
    assert rest["refused"] == {"kind": {"short": {"key": "rest_short_no_pp", "char": a}}}


def test_T1_end_turn_for_the_current_combatant_only():
    t = Table()
    a = t.add("Aline", owner=t.p1)
    b = t.add("Bruno", owner=t.p1)
    t.do("combat_start", order=[a, b])
    mine = affordances(t.room, viewer(t.p1))["chars"]
    assert mine[a]["end_turn"] == {"args": {"char": a}, "free": ["round"]}
    assert mine[b]["end_turn"]["why"] == {"key": "not_the_turn"}
    room = affordances(t.room, viewer(t.gm))["room"]
    assert room["combat_start"]["why"] == {"key": "combat_running"}
    assert "why" not in room["combat_end"]


def test_D6_set_order_offers_the_combatants_and_who_may_join():
    """D6 (set_order ruling): the order's choices are the combatants, the
    dead among them (they may stay), and the living who may join; a dead
    character outside the combat is not offered. A client (the Foundry
    module) reads them instead of working D6 out again."""
    t = Table()
    a, b, c, d = (t.add(name) for name in ("Aline", "Bruno", "Chloé", "Dana"))
    t.do("combat_start", order=[a, b])
    t.do("damage", char=b, amount=1000)
    t.do("update_character", char=b, set={"condition": "dead"})
    t.do("update_character", char=c, set={"condition": "dead"})
    room = affordances(t.room, viewer(t.gm))["room"]
    assert room["set_order"] == {"args": {}, "free": ["turn"], "choices": {"order": [a, b, d]}}
    t.do("combat_end")
    room = affordances(t.room, viewer(t.gm))["room"]
    assert room["combat_start"]["choices"] == {"order": [a, d]}
    assert room["set_order"]["why"] == {"key": "no_combat"}


def test_a_reason_never_names_a_character_the_viewer_cannot_see():
    """L4: tending a patient whose healer is hidden reads `healer: null`."""
    t = Table()
    a = t.add("Aline", owner=t.p1)
    b = t.add("Bruno", owner=t.p1)
    liche = t.add("Liche", shown="hidden")
    t.stabilised(b)
    t.do("tend", char=liche, patient=b)
    t.do("rest", by=t.p1, char=a, kind="night")
    why = affordances(t.room, viewer(t.p1))["chars"][a]["rest"]["why"]
    assert why == {"key": "rest_already", "char": a, "rest": "night"}
    try:
        t.do("stop_rest", by=t.p1, char=a)
        t.do("tend", by=t.p1, char=a, patient=b)
    except Refused as refused:
        mine = affordances(t.room, viewer(t.p1))
        assert scrubbed(refused, t.room, t.p1) == {
            "key": "tended_by_other",
            "patient": b,
            "healer": None,
        }
        assert liche not in str(mine)
    else:
        raise AssertionError("tending a tended patient was accepted")
    assert liche in affordances(t.room, viewer(t.gm))["chars"]


def test_an_observer_may_send_nothing():
    """Even owning a character: from before the ruling that refuses it (an
    older room, an import), which is why it is set here on the room."""
    t = Table()
    a = t.add("Aline")
    t.room.characters[a].owner = t.obs.user
    assert affordances(t.room, viewer(t.obs)) == {
        "chars": {},
        "room": {},
        "undo": {"why": {"key": "undo_gm_only"}},
    }


def test_undo_shows_what_it_would_revert_to_the_GM_only():
    t = Table()
    entry = UndoEntry(7, "damage", t.gm.user, 1700000000.5)
    assert affordances(t.room, viewer(t.gm), entry)["undo"] == {
        "v": 7,
        "op": "damage",
        "by": t.gm.user,
        "ts": 1700000000.5,
    }
    assert affordances(t.room, viewer(t.gm))["undo"] == {"why": {"key": "undo_nothing"}}
    assert affordances(t.room, viewer(t.p1), entry)["undo"] == {"why": {"key": "undo_gm_only"}}
    try:
        authorize_undo(t.p1)
    except Refused as refused:
        assert refused.reason() == {"key": "undo_gm_only"}


# ---------------------------------------------------------------- property

# A value for each argument an affordance leaves to the sender ("free"),
# always acceptable: the property is about what the rules allow now.
FILL: dict[str, Any] = {
    "amount": 1,
    "ability": "str",
    "set": {"name": "Renamed"},
    "seconds": 1,
    "name": "Someone",
    "role": "observer",
    "rolls": [7],
    "kind": "night",
    "user": "u2",
}


def filled(op: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's fixed args plus a value for each required one it leaves open."""
    args = dict(entry["args"])
    spec = OPS[op]
    if op == "add_character":
        return {**SHEET, "name": "Someone"}
    if op == "update_room":
        return {"name": "Renamed"}
    for name in spec.args:  # also for an unavailable entry (which lists no free ones)
        if spec.args[name].required and name not in args and name in FILL:
            args[name] = FILL[name]
    return args


def refusal(room, op: str, args: dict[str, Any], actor: Actor) -> Refused | None:
    try:
        apply(room, op, args, actor, SeededDice(1))
    except Refused as refused:
        return refused
    return None


def scrubbed(refused: Refused, room, actor: Actor) -> dict[str, Any]:
    """The refusal's reason as the viewer's affordance would word it."""
    out = refused.reason()
    for key in ("char", "patient", "healer", "current"):
        cid = out.get(key)
        if cid is not None and not actor.sees(room.characters[cid]):
            out[key] = None
    return out


def sends(op: str, entry: dict[str, Any], room, seen: list[str]):
    """(args, must be accepted, the reason it must be refused with or None)
    for every command the entry stands for."""
    base = filled(op, entry)
    why = entry.get("why")
    if why is not None:
        # Refused, whatever the choice: for a reason about the subject, with
        # that very reason (with a choice for which nothing else comes first).
        subject = next(iter(entry["args"].values()), None)
        if op in ("first_aid", "tend"):
            others = [c for c in seen if c != subject and room.characters[c].condition != "dead"]
            nobody = why["key"].endswith("_nobody")
            for other in others if nobody else others[:1]:
                yield {**base, "patient": other}, False, None if nobody else why
            return
        if op == "rest":
            yield {**base, "kind": "short"}, False, why
            return
        if op in ("combat_start", "set_order"):
            # A living one: D6 (`dead`) is checked before the op's own reason.
            alive = [c for c in seen if room.characters[c].condition != "dead"]
            if alive:
                yield {**base, "order": alive[:1]}, False, why
            return
        if op == "roll_initiative" and why["key"].endswith("_nobody"):
            return
        if op in ("remove_user", "rotate_token"):
            return
        yield base, False, why
        return
    choices = entry.get("choices", {})
    for name in ("order", "chars"):  # a list of characters: all of them
        if name in choices:
            yield {**base, name: choices[name]}, True, None
            return
    if not choices:
        yield base, True, None
    for name, values in choices.items():
        for value in values:
            yield {**base, name: value}, True, None
        if name == "patient":
            for other in seen:
                if other not in values:
                    yield {**base, name: other}, False, None
    for name, refused in entry.get("refused", {}).items():
        for value, reason in refused.items():
            yield {**base, name: value}, False, reason


def check_viewer(room, v: Viewer) -> int:
    """The property for one viewer; returns how many commands it sent."""
    aff = affordances(room, v)
    actor = Actor(v.user, v.role)
    seen = [c.id for c in room.ordered() if actor.sees(c)]
    sent = 0
    offered: list[tuple[str, str | None, dict[str, Any]]] = [
        (op, cid, entry) for cid, ops in aff["chars"].items() for op, entry in ops.items()
    ] + [(op, None, entry) for op, entry in aff["room"].items()]
    for op, _cid, entry in offered:
        for args, accepted, reason in sends(op, entry, room, seen):
            sent += 1
            got = refusal(room, op, args, actor)
            if accepted:
                assert got is None, (v, op, args, got and got.reason())
            else:
                assert got is not None, (v, op, args, "accepted, not offered")
                if reason is not None:
                    assert scrubbed(got, room, actor) == reason, (v, op, args)
    # Ops not offered at all: refused for every character (seen or not).
    for op, spec in OPS.items():
        if spec.chars and spec.chars[0] in ("char", "patient") and op not in aff["room"]:
            subject = spec.chars[0]
            for c in room.ordered():
                if op in aff["chars"].get(c.id, {}):
                    continue
                args = filled(op, {"args": {subject: c.id}, "free": list(spec.args)})
                if "patient" in spec.args and subject == "char":
                    args["patient"] = next((o for o in seen if o != c.id), c.id)
                sent += 1
                assert refusal(room, op, args, actor) is not None, (v, op, args)
        elif (not spec.chars or spec.chars[0] in ("order", "chars")) and op not in aff["room"]:
            args = filled(op, {"args": {}, "free": list(spec.args)})
            if op in ("combat_start", "set_order"):
                args["order"] = seen[:1] or ["c9"]
            if op == "roll_initiative":
                args["chars"] = seen[:1] or ["c9"]
            sent += 1
            assert refusal(room, op, args, actor) is not None, (v, op, args)
    # Undo: the GM's only (its target is the server's: tests/server).
    try:
        authorize_undo(actor)
        assert v.role == "gm" and aff["undo"] == {"why": {"key": "undo_nothing"}}
    except Refused as refused:
        assert aff["undo"] == {"why": refused.reason()}
    return sent


def random_games(test: Any) -> Any:
    """A property test over random games (`played`): the commands, whether
    the table's patients are tended, the dice's seed."""
    return settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])(
        given(
            st.lists(st.tuples(VIEW_COMMANDS, ACTORS, st.booleans()), max_size=40),
            st.booleans(),
            st.integers(0, 2**32),
        )(test)
    )


def played(t: Table, commands: list[Any], seed: int) -> Iterator[tuple[str, Actor, Any]]:
    """A random game on `t`: each drawn command (undo left out), aimed at
    the room's characters when drawn so, that the rules accept: (op, who
    sent it, the rules' outcome). The caller moves `t.room` on."""
    dice = SeededDice(seed)
    rng = random.Random(seed)
    actor_of = {"gm": t.gm, "p1": t.p1, "p2": t.p2, "obs": t.obs}

    def pick(items: list[str]) -> str:
        return rng.choice(items) if items else "c9"

    for (op, args), who, aimed in commands:
        if op == "undo":
            continue
        if aimed:
            args = aim(op, args, t.room, pick)
        if op == "add_character":
            args = {**SHEET, **args, "name": "Nouveau"}
        try:
            out = apply(t.room, op, args, actor_of[who], dice)
        except Refused:
            continue
        yield op, actor_of[who], out


@random_games
def test_offered_actions_are_accepted_and_the_others_refused_with_their_reason(
    commands, tended, seed
):
    """S1-S4, L4, R1-R4, T1, D6, X1 and the roles, as the affordances say them:
    every viewer, over a random reachable state."""
    t = secret_table(tended)
    table = RuleTable()
    for i, (_, _, out) in enumerate(played(t, commands, seed)):
        t.room = out.room
        if i % 4 == 0:
            check_all(t, table)
    check_all(t, table)


def check_all(t: Table, table: RuleTable) -> None:
    viewers = list(all_viewers(t).values())
    # The server keeps a RuleTable from one version to the next: a cache
    # only, it gives what a fresh call gives.
    kept = affordances_for(t.room, viewers, None, table)
    assert kept == [affordances(t.room, v) for v in viewers]
    for v in viewers:
        if v.role == "admin":  # an admin session sends no room command (the server says so)
            assert affordances(t.room, v)["chars"] == affordances(t.room, v)["room"] == {}
            continue
        sent = check_viewer(t.room, v)
        event(f"{v.role}: {'>100' if sent > 100 else '>20' if sent > 20 else '<=20'} commands")
        if not v.sees_all:
            state = t.room.to_dict()
            assert_no_secret({"affordances": affordances(t.room, v)}, None, state, v)


@random_games
def test_the_table_told_what_each_command_touched_equals_a_fresh_one(commands, tended, seed):
    """The server's path (AffordanceCache.after): after each command the
    table is told the characters it touched (`Outcome.touched`) and works
    out again only those and the ones whose room-level inputs changed (T1's
    turn, R4's combat, L4's healers, S1's patients, the users): every
    viewer's affordances equal a fresh call's, whatever the command; and
    the characters it says it redid (`RuleTable.redone`) hold every change."""
    t = secret_table(tended)
    table = RuleTable()
    viewers = [v for v in all_viewers(t).values() if v.role in ("gm", "player")]
    undo = None
    before = affordances_for(t.room, viewers, undo, table)
    for op, actor, out in played(t, commands, seed):
        undo = UndoEntry(len(commands), op, actor.user)
        after = affordances_for(out.room, viewers, undo, table, (t.room, out.touched))
        t.room = out.room
        assert after == [affordances(t.room, v, undo) for v in viewers], op
        for v, old, new in zip(viewers, before, after, strict=True):
            redone = table.redone[v.user]
            if redone is not None:
                changed = {c for c in old["chars"].keys() | new["chars"].keys()}
                changed = {c for c in changed if old["chars"].get(c) != new["chars"].get(c)}
                assert changed <= redone, (op, v)
        before = after


@random_games
def test_only_the_concerned_players_are_asked_and_every_answer_equals_a_fresh_one(
    commands, tended, seed
):
    """The server's shortcut (AffordanceCache.after): after each command
    `affordances_begin` names the players whose answers may change (or
    None: anyone's), and only they and the GMs are asked; every other
    player keeps their last answer, the very same object. Every viewer's
    answer, asked or kept, equals a fresh call's."""
    t = secret_table(tended)
    table = RuleTable()
    viewers = [v for v in all_viewers(t).values() if v.role in ("gm", "player")]
    undo = None
    answers = affordances_for(t.room, viewers, undo, table)
    kept = {v.user: a for v, a in zip(viewers, answers, strict=True)}
    for op, actor, out in played(t, commands, seed):
        undo = UndoEntry(len(commands), op, actor.user)
        concerned = begin(out.room, table, (t.room, out.touched))
        t.room = out.room
        for v in viewers:
            if concerned is None or v.role == "gm" or v.user in concerned:
                kept[v.user] = asked(t.room, v, undo, table)
            else:
                assert table.last[v.user] is kept[v.user]
            assert kept[v.user] == affordances(t.room, v, undo), (op, v, concerned)
        event("anyone's" if concerned is None else f"{len(concerned)} owners concerned")


def test_T1_an_end_of_turn_redoes_the_two_combatants_only():
    """A 200-character room: ending a turn works out again the affordances
    of whose turn it was and whose it is, not the bystanders'."""
    t = Table()
    a = t.add("Aline", owner=t.p1)
    b = t.add("Bruno")
    for i in range(30):
        t.add(f"B{i}")
    t.do("combat_start", order=[a, b])
    table = RuleTable()
    gm = viewer(t.gm)
    first = affordances_for(t.room, [gm], None, table)[0]
    out = apply(t.room, "end_turn", {"char": a}, t.gm, SeededDice(1))
    now = affordances_for(out.room, [gm], None, table, (t.room, out.touched))[0]
    assert table.redone["u1"] == {a, b}
    assert now["chars"][a]["end_turn"]["why"] == {"key": "not_the_turn"}
    assert "why" not in now["chars"][b]["end_turn"]
    bystanders = [cid for cid in now["chars"] if cid not in (a, b)]
    assert all(now["chars"][cid] is first["chars"][cid] for cid in bystanders)


def test_nothing_to_undo_is_a_conflict():
    err = affordances(Table().room, Viewer("u1", "gm"))["undo"]["why"]
    assert err == Conflict("nothing to undo", "undo_nothing").reason()


def reason_keys() -> set[str]:
    """Every reason key the rules can give: the keys their refusals are
    raised with (read from the source), and the affordances' own "nobody"."""
    keys = {"first_aid_nobody", "tend_nobody"}
    keys |= {
        f"{op}_nobody"
        for op in ("combat_start", "set_order", "remove_user", "rotate_token", "roll_initiative")
    }
    for path in pathlib.Path(rules.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {cls.__name__ for cls in REFUSALS}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
            ):
                keys.add(node.args[1].value)
    return keys


def test_one_table_of_texts_has_every_reason_and_action():
    """client_stub/web/events.json words each reason the rules give and
    labels every op: the page and the Python client read it."""
    assert set(TEXTS["reasons"]) == reason_keys()
    assert set(TEXTS["actions"]) == set(OPS) | {"undo"}
    text = EventText()
    t = Table()
    a = t.add("Aline", owner=t.p1)
    t.do("combat_start", order=[a])
    text.names.update(t.room.to_dict())
    assert text.reason({"key": "tended_by_other", "patient": a, "healer": None}) == (
        "Aline is already tended by a character you cannot see (one healer per patient)"
    )
    assert text.reason({"key": "stabilize_pp", "char": a, "cost": 2, "pp": 1}) == (
        "Aline needs 2 PP to stabilize and has 1 (S3)"
    )
    for key in TEXTS["reasons"]:  # every one renders, even without its values
        assert text.reason({"key": key})
