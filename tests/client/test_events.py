"""Events read as sentences (client_stub/web/events.json, client_stub/events.py):
every event kind the engine and the server emit, every undoable op's phrase
for undo, with names and never raw `key=value` or ids. The page reads the
same table: tests/client/test_browser.py checks it says the same."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from client_stub.events import TEXTS, EventText, Names
from rules import Viewer, catalog, view_events
from tests.helpers.tour import tour

REPO = Path(__file__).resolve().parents[2]
HOUR = 3600

RAW = re.compile(r"\w=\S|\{|\}|\bNone\b|\bu\d+\b|\?|\w_\w")  # key=value, placeholders, ids


def example_names() -> Names:
    names = Names()
    names.update(
        {
            "characters": {k: {"name": v} for k, v in catalog.EXAMPLE_NAMES["characters"].items()},
            "users": {k: {"name": v} for k, v in catalog.EXAMPLE_NAMES["users"].items()},
        }
    )
    return names


def test_every_event_kind_has_a_text_and_no_text_is_for_an_unknown_kind() -> None:
    assert set(TEXTS["events"]) == set(catalog.EVENTS)


@pytest.mark.parametrize("kind", sorted(catalog.EVENTS))
def test_every_event_kind_reads_as_a_sentence(kind: str) -> None:
    text = EventText(example_names())
    said = text.sentence(catalog.EVENTS[kind].example)
    assert not RAW.search(said), said
    assert said[0].isupper() or said.startswith("d20"), said


def test_the_tours_events_read_as_sentences_with_names() -> None:
    """Real events from every op, with the names of the room they happened in."""
    names = Names()
    text = EventText(names)
    kinds = set()
    for step in tour():
        names.update(step.state)
        for ev in step.events:
            said = text.sentence(ev)
            kinds.add(ev["kind"])
            assert not RAW.search(said.replace(f"id {ev.get('char')}", "")), (step.op, said)
            for field in ("char", "patient"):
                if ev.get(field):
                    assert names.char(ev[field]) in said, said
    assert kinds | {"undo"} == set(catalog.EVENTS)


def test_status_view_events_without_numbers_still_read() -> None:
    """A viewer who may see a character's status only gets events without their
    numbers: the sentence drops them instead of showing holes."""
    text = EventText(example_names())
    bare = {
        "damage": "Aline is hit",
        "heal": "Aline is healed",
        "roll": "Aline makes a check",
        "pp": "Aline loses PP",
        "recover": "Aline recovers",
        "ability": "Aline: ability damage changes",
    }
    for kind, said in bare.items():
        assert text.sentence({"kind": kind, "char": "c1"}) == said
    cond = {"kind": "condition", "char": "c1", "from": "dying", "to": "dead", "cause": "dying"}
    assert text.sentence(cond) == "Aline: dying → dead (dying)"


def test_undo_says_what_it_undid_for_every_undoable_op() -> None:
    names = Names()
    for step in tour():
        names.update(step.state)
        doc = catalog.OPS[step.op]
        if not doc.undoable:
            continue
        phrase = EventText(names).command(step.op, step.events)
        assert phrase, f"{step.op}: its events do not fill its phrase"
        assert not RAW.search(phrase), phrase
        undo = {"kind": "undo", "undone": 7, "op": step.op, "by": "u1"}
        said = EventText(names, history={7: step.events}.get).sentence(undo)
        assert said == f"Undid: {phrase}"
    # without the undone version's events: op, author and version
    assert (
        EventText(example_names()).sentence(
            {"kind": "undo", "undone": 28, "op": "first_aid", "by": "u3"}
        )
        == "Undid: first aid by Bastien's player (v28)"
    )


def test_every_op_has_a_label_and_every_undoable_op_a_phrase() -> None:
    assert set(TEXTS["labels"]["op"]) == set(catalog.OPS)
    undoable = {op for op, doc in catalog.OPS.items() if doc.undoable}
    assert set(TEXTS["commands"]) - {"fallback"} == undoable


def test_names_outlive_their_owners_and_unknown_kinds_still_read() -> None:
    names = Names()
    names.update({"users": {"u7": {"name": "Dana"}}, "characters": {}})
    names.update({"users": {}, "characters": {}})  # Dana was removed
    text = EventText(names)
    assert text.sentence({"kind": "user", "user": "u7", "change": "removed"}) == (
        "Dana is removed: their link no longer works"
    )
    assert text.sentence({"kind": "new_thing", "x": 1}) == "new thing"


def test_the_table_is_valid_json_with_the_documented_rule_shapes() -> None:
    def walk(rule: object) -> None:
        if isinstance(rule, str):
            return
        if isinstance(rule, list):
            for r in rule:
                walk(r)
            return
        assert isinstance(rule, dict), rule
        assert len({"if", "has", "case", "each", "join"} & set(rule)) == 1, rule
        for key in ("then", "else", "none"):
            if key in rule:
                walk(rule[key])
        for r in [*(rule.get("of") or {}).values(), *rule.get("join", [])]:
            walk(r)

    for rule in [*TEXTS["events"].values(), TEXTS["unknown"]]:
        walk(rule)
    json.dumps(TEXTS)


VECTORS = json.loads((REPO / "tests/vectors/event_sentences.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["about"])
def test_the_shared_cases_read_as_the_page_reads_them(case: dict[str, Any]) -> None:
    """tests/js/event-text.test.mjs checks the page's interpreter says the same."""
    names = Names()
    names.update(VECTORS["names"])
    history = case.get("history") or {}
    said = EventText(names, history=lambda v: history.get(str(v))).sentence(case["event"])
    assert said == case["said"]


def test_a_tended_check_says_tending_raised_it_to_10() -> None:
    """L4, as the rules emit it: d20 1 + Con 2 + tending 2 = 5, raised to 10."""
    from tests.helpers.table import Table

    t = Table()
    a, h = t.add("Aria"), t.add("Hugo")
    t.stabilised(a)
    t.do("tend", char=h, patient=a)
    t.dice.push(15, 1)  # Hugo's Medicine succeeds, Aria's d20 is a 1
    done = t.do("advance_clock", seconds=HOUR)
    names = Names()
    names.update(done.room.to_dict())
    said = [EventText(names).sentence(e) for e in done.events if e["kind"] == "roll"]
    assert said[1] == (
        "Aria rolls Constitution (hour 1): d20 1 +2 +2 = 5, raised to 10 by tending"
        " — stays stable (20 would wake)"
    )


def test_a_rest_names_only_the_abilities_it_restored() -> None:
    """R2, as the rules emit it: no ability damaged, none named; Str damaged,
    only Str named."""
    from tests.helpers.table import Table

    t = Table()
    a = t.add("Aria")
    t.do("damage", char=a, amount=25)
    names = Names()
    said = []
    for hurt in (None, "str"):
        if hurt:
            t.do("ability_damage", char=a, ability=hurt, amount=2)
        t.do("rest", char=a, kind="night")
        done = t.do("advance_clock", seconds=8 * HOUR)
        names.update(done.room.to_dict())
        (recover,) = [e for e in done.events if e["kind"] == "recover"]
        said.append(EventText(names).sentence(recover))
    assert said[0].startswith("Aria recovers ") and "Str" not in said[0], said
    assert not re.search(r"\b(Dex|Con|Int|Wis|Cha)\b|point", said[0] + said[1]), said
    assert said[1].endswith(" and 1 Str (night's rest)"), said


def _as_status(state: dict[str, Any]) -> dict[str, Any]:
    chars = {cid: {**c, "shown": "status"} for cid, c in state["characters"].items()}
    return {**state, "characters": chars}


def status_tour() -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The tour's steps as an observer gets their events when every character
    is `status` (rules.view: kind and char only, plus from/to/cause for a
    condition): (the state after the step, its events about a character)."""
    viewer = Viewer(user=None, role="observer")
    steps = tour()
    out = []
    for prev, step in zip([steps[0], *steps], steps, strict=False):
        before, after = _as_status(prev.state), _as_status(step.state)
        seen = view_events(step.events, before, after, viewer)
        out.append((step.state, [ev for ev in seen if ev.get("char") is not None]))
    return out


def test_every_event_about_a_status_character_reads_with_its_name() -> None:
    """Each stripped event still reads as a sentence naming its character,
    with no hole ("?") where a number was."""
    names = Names()
    text = EventText(names)
    kinds = set()
    for state, events in status_tour():
        names.update(state)
        for ev in events:
            # stripped indeed (a character's arrival or departure keeps its name:
            # its status shows it)
            assert set(ev) <= {"kind", "char", "from", "to", "cause", "change", "name"}, ev
            said = text.sentence(ev)
            kinds.add(ev["kind"])
            assert not RAW.search(said), (ev, said)
            assert names.char(ev["char"]) in said, said
    assert {"roll", "damage", "heal", "pp", "tend", "turn", "condition", "character"} <= kinds


def test_a_stripped_tend_event_does_not_name_a_patient_it_lacks() -> None:
    text = EventText(example_names())
    assert text.sentence({"kind": "tend", "char": "c1"}) == "Aline's tending changes"
    assert text.sentence({"kind": "turn", "char": "c1"}) == "Aline's turn"
    assert text.sentence({"kind": "character", "char": "c1"}) == "Aline's sheet changes"


def status_npc_patches() -> list[tuple[list, list, dict]]:
    """A GM's NPC (status for players: views) added, then removed, as a
    player's patches: (ops, events, state after) each."""
    from rules import diff, view_patch, view_state
    from tests.helpers.table import SHEET, Table

    t = Table()
    player = Viewer(t.p1.user, "player")
    out = []
    for op, args in (
        ("add_character", {**SHEET, "name": "Goblin chief"}),
        ("remove_character", {"char": "c1"}),
    ):
        before = t.room.to_dict()
        done = t.do(op, **args)
        after = done.room.to_dict()
        ops, events = view_patch(before, after, diff(before, after), done.events, player)
        out.append((ops, events, view_state(after, player)))
    return out


def test_a_status_npc_joins_and_leaves_the_table_for_players() -> None:
    """The NPC's arrival and departure say so, with its name, for a player
    (issue 33: its status shows the name); an event stripped to kind and
    char (a server before it) still reads "joins" and "leaves": the patch's
    ops show it."""
    names = Names()
    text = EventText(names)
    said, stripped = [], []
    for ops, events, state in status_npc_patches():
        names.update(state)
        (ev,) = [e for e in events if e["kind"] == "character"]
        assert set(ev) == {"kind", "char", "change", "name"}
        said.append(text.sentence(text.complete(ev, ops)))
        old = {"kind": ev["kind"], "char": ev["char"]}
        stripped.append(text.sentence(text.complete(old, ops)))
    assert said == ["Goblin chief joins the table (id c1)", "Goblin chief leaves the table"]
    assert stripped == said


@pytest.mark.parametrize(
    "event,said",
    [
        ({"amount": 2, "pv": 0}, "Aline: healing 2 restores nothing (PV already full; "
         "healing restores PV only)"),
        ({"amount": 5, "pv": 3}, "Aline regains 3 PV (healing 5)"),
        ({"amount": 5, "pv": 0, "stabilize": True}, "Aline: healing 5 restores nothing (PV "
         "already full; healing restores PV only), but stabilizes"),
    ],
)  # fmt: skip
def test_healing_says_what_it_restored(event: dict, said: str) -> None:
    text = EventText(example_names())
    assert text.sentence({"kind": "heal", "char": "c1", **event}) == said


@pytest.mark.parametrize(
    "outcome,total,said",
    [("die", 9, "dies (under 10)"), ("stay", 14, "stays stable (20 would wake)"),
     ("wake", 21, "wakes up (20 or more)")],
)  # fmt: skip
def test_a_stability_check_says_why(outcome: str, total: int, said: str) -> None:
    ev = {"kind": "roll", "char": "c1", "check": "constitution", "d20": total, "mod": 0}
    ev |= {"bonus": 0, "total": total, "dc": None, "outcome": outcome, "hour": 3}
    sentence = EventText(example_names()).sentence(ev)
    assert sentence == f"Aline rolls Constitution (hour 3): d20 {total} +0 = {total} — {said}"


# Values both clients format: each note of the shared table (`notes`) and
# the durations in it, for the same inputs.
NOTE_CASES: list[tuple[str, dict[str, Any]]] = [
    ("no_numbers", {}),
    ("resting", {"kind": "short", "left": 600}),
    ("resting", {"kind": "night", "left": 3_725}),
    ("resting", {"kind": "bed", "left": 59}),
    ("dying", {"next": 6, "fresh": False}),
    ("dying", {"next": None, "fresh": True}),
    ("dying", {"next": None, "fresh": False}),
    ("tended", {"healer": "c1"}),
    ("tended", {"healer": None}),
]


def test_the_page_and_the_python_client_word_values_alike() -> None:
    """The Python client's notes (client_stub/view.py) and the page's
    (app.js) come from one table: the same inputs read the same in both."""
    import pathlib
    import subprocess

    from tests.test_js import node

    root = pathlib.Path(__file__).resolve().parents[2]
    names = {"characters": {"c1": {"name": "Aline"}}, "users": {}}
    script = f"""
import {{ readFileSync }} from "node:fs";
import {{ EventText, Names, formatDuration }} from "{root / "client_stub/web/event-text.js"}";
const texts = JSON.parse(readFileSync("{root / "client_stub/web/events.json"}", "utf8"));
const names = new Names();
names.update({json.dumps(names)});
const text = new EventText(texts, names);
const cases = {json.dumps(NOTE_CASES)};
const out = cases.map(([key, values]) => text.note(key, values));
out.push(...[0, 59, 60, 61, 3599, 3600, 3725, 90000].map(formatDuration));
console.log(JSON.stringify(out));
"""
    done = subprocess.run(
        [node(), "--input-type=module", "-e", script], capture_output=True, text=True, check=True
    )
    js = json.loads(done.stdout)
    py_names = Names()
    py_names.update(names)
    text = EventText(py_names)
    from client_stub.events import format_duration

    py = [text.note(key, values) for key, values in NOTE_CASES]
    py += [format_duration(s) for s in (0, 59, 60, 61, 3599, 3600, 3725, 90000)]
    assert js == py
    assert py[1] == "short rest, 10m left" and py[7] == "tended by Aline"
    assert py[5] == "loses 1 PP at the end of its next turn (not this one)"
