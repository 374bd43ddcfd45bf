"""Every event kind, as data: what it reports, its fields, an example.

The rules modules emit events (`Ctx.emit`) and each op declares the kinds it
may emit (`rules.op.Op.events`); this module says what each kind means. It
makes the events section of docs/operations.md and the client's sentences'
examples. Tests fail when the code emits a kind that has no entry here, or
an op emits one it does not declare, so the reference cannot fall behind.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class EventDoc:
    """One event kind: what it reports, its fields, an example."""

    meaning: str
    fields: dict[str, str]  # field -> meaning (besides `kind`, and `at`)
    example: dict[str, Any]
    by: str = "rules engine"  # who emits it


# The kinds the timed rules emit (an advance of the clock, a round's end):
# the ops that move time list them among their events.
TIMED_EVENTS = ("pp", "condition", "roll", "rest", "recover", "tend")

EVENTS: dict[str, EventDoc] = {
    "roll": EventDoc(
        "a check: d20 + modifier + bonus against a DC (X2)",
        {
            "char": "who rolls",
            "check": "medicine, constitution or initiative",
            "d20": "the natural die",
            "mod": "the modifier (medicine bonus, Con modifier, Dex modifier)",
            "bonus": "a bonus (+2 from a successful tending, L4; the GM's initiative bonus)",
            "total": "d20 + mod + bonus (raised to 10 after a successful tending, L4)",
            "raised_from": "only when L4 raised the total: d20 + mod + bonus, the sum it replaced",
            "dc": "the difficulty, or null for the hourly stability check",
            "outcome": "success, failure; for stability checks wake, stay or die; for "
            "initiative rolled",
            "source": "where the d20 came from: server, queued (X1) or gm (`roll`)",
            "patient": "first aid and tending: the character cared for",
            "hour": "stability checks: which hourly check (1-8)",
        },
        {
            "kind": "roll",
            "char": "c2",
            "check": "medicine",
            "d20": 13,
            "mod": 1,
            "bonus": 0,
            "total": 14,
            "dc": 15,
            "outcome": "failure",
            "source": "server",
            "patient": "c1",
        },
    ),
    "damage": EventDoc(
        "damage taken (D1)",
        {
            "char": "the character hit",
            "amount": "the damage dealt",
            "pe": "PE change (0 or negative)",
            "pv": "PV change (0 or negative)",
            "nonlethal": "nonlethal damage (N1)",
        },
        {"kind": "damage", "char": "c1", "amount": 18, "pe": -15, "pv": -3, "nonlethal": False},
    ),
    "heal": EventDoc(
        "healing (S2)",
        {
            "char": "the character healed",
            "amount": "the healing given",
            "pv": "PV gained (capped at pv_max)",
            "stabilize": "the heal also stabilises a dying character",
        },
        {"kind": "heal", "char": "c1", "amount": 5, "pv": 5, "stabilize": False},
    ),
    "condition": EventDoc(
        "a change of condition",
        {
            "char": "the character",
            "from": "conscious, dying, stable or dead",
            "to": "conscious, dying, stable or dead",
            "cause": "what did it: damage, first_aid, heal, stabilize, stay_in_fight, dying, "
            "stability_check, long_rest, nonlethal, constitution_damage, correction",
        },
        {"kind": "condition", "char": "c1", "from": "dying", "to": "stable", "cause": "first_aid"},
    ),
    "pp": EventDoc(
        "PP spent or lost",
        {
            "char": "the character",
            "delta": "PP change (negative)",
            "cause": "dying (D5), damage (D3), stabilize (S3), stay_in_fight (S4), short_rest (R1)",
            "rounds": "dying out of combat: the rounds of world time this loss covers (one "
            "event per clock advance, however long)",
            "at": "timed: the world second it happened (for a dying run, the last loss)",
        },
        {"kind": "pp", "char": "c1", "delta": -3, "cause": "dying", "rounds": 3, "at": 18},
    ),
    "clock": EventDoc(
        "the world clock moved (T2)",
        {"from": "world second before", "to": "world second after"},
        {"kind": "clock", "from": 0, "to": 3600},
    ),
    "combat": EventDoc(
        "a combat starts, ends, or its order changes (T1, set_order)",
        {
            "outcome": "start, end, or order",
            "order": "start, order: the combatants, in turn order",
            "joined": "order: the characters who joined",
            "left": "order: the characters who left",
        },
        {"kind": "combat", "outcome": "start", "order": ["c2", "c1"]},
    ),
    "turn": EventDoc(
        "a character's turn begins (T1)",
        {
            "char": "whose turn it is",
            "round": "the round",
            "turn": "its index in the combat order",
        },
        {"kind": "turn", "char": "c1", "round": 2, "turn": 1},
    ),
    "rest": EventDoc(
        "a rest starts, completes or is interrupted (R1-R4)",
        {
            "char": "the resting character",
            "rest": "short, night or bed",
            "outcome": "started, complete, interrupted or no_benefit",
            "ends": "started: the world second it completes",
            "cause": "interrupted: damage, combat, unconscious, dead, stopped; no_benefit: no_pp",
        },
        {"kind": "rest", "char": "c1", "rest": "night", "outcome": "started", "ends": 28800},
    ),
    "recover": EventDoc(
        "what a completed rest (or the L2 wake-up) gave back",
        {
            "char": "the character",
            "cause": "short_rest, night_rest, bed_rest or long_rest (L2)",
            "pv": "PV gained",
            "pe": "PE gained",
            "pp": "PP gained",
            "abilities": "points of damage the rest heals on each damaged ability",
            "restored": "the points of damage each damaged ability regained, by ability "
            "(absent when none was damaged)",
        },
        {
            "kind": "recover",
            "char": "c1",
            "cause": "night_rest",
            "pv": 3,
            "pe": 15,
            "pp": 2,
            "abilities": 1,
            "restored": {"con": 1},
        },
    ),
    "tend": EventDoc(
        "tending starts or ends (L4)",
        {
            "char": "the healer",
            "patient": "the tended character",
            "outcome": "start or end",
            "cause": "end: untend, not_stable, healer_down, removed",
        },
        {"kind": "tend", "char": "c2", "patient": "c1", "outcome": "start"},
    ),
    "ability": EventDoc(
        "ability damage or restoration (A1-A3)",
        {
            "char": "the character",
            "ability": "str, dex, con, int, wis or cha",
            "delta": "change of the damage (positive: damage, negative: restored)",
            "damage": "the ability's damage now",
            "mod": "the ability's modifier now",
        },
        {"kind": "ability", "char": "c1", "ability": "con", "delta": 2, "damage": 2, "mod": 1},
    ),
    "character": EventDoc(
        "a character added, corrected or removed",
        {
            "char": "the character",
            "change": "added, updated or removed",
            "name": "added, removed: its name",
            "fields": "updated: the fields changed",
        },
        {"kind": "character", "char": "c5", "change": "added", "name": "Aline"},
    ),
    "user": EventDoc(
        "a user added or removed, or their token replaced",
        {
            "user": "the user's id",
            "change": "added, removed or token_rotated",
            "name": "added, removed: their name (a removed user's is known by none after)",
            "role": "added: gm, player or observer",
        },
        {
            "kind": "user",
            "user": "u5",
            "change": "added",
            "name": "Chloe's player",
            "role": "player",
        },
    ),
    "room": EventDoc(
        "the room's settings changed",
        {
            "name": "the room's name now",
            "round_seconds": "seconds per round now",
            "skip_dead": "whether dead combatants are passed over now (T3)",
        },
        {"kind": "room", "name": "Thursday table", "round_seconds": 6, "skip_dead": True},
    ),
    "rolls_queued": EventDoc(
        "d20s added to the dice queue (X1)",
        {"rolls": "the d20s added", "queued": "how many wait in the queue now"},
        {"kind": "rolls_queued", "rolls": [15, 4], "queued": 2},
    ),
    "undo": EventDoc(
        "a command was undone",
        {
            "undone": "the version undone",
            "op": "that version's op",
            "by": "who had sent that command (user id)",
        },
        {"kind": "undo", "undone": 28, "op": "first_aid", "by": "u3"},
        by="server",
    ),
}

# Names the examples use (the demo table's), to show events as sentences.
EXAMPLE_NAMES: dict[str, dict[str, str]] = {
    "characters": {"c1": "Aline", "c2": "Bastien", "c3": "Chloe", "c4": "Gorgol", "c5": "Aline"},
    "users": {"u1": "Maya", "u2": "Aline's player", "u3": "Bastien's player",
              "u5": "Chloe's player"},
}  # fmt: skip

# Every event may carry `at` (the world second a timed rule fired at, during
# advance_clock or a round's end) besides its own fields.
COMMON_EVENT_FIELDS = {
    "kind": "the event kind",
    "at": "on the events of timed rules (fired by advance_clock or a round's end), "
    "the world second the rule fired at",
}
