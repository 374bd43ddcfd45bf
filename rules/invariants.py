"""The invariants of docs/rules.md's conditions table ("Conditions"), as a checkable list.

Used by corrections (a GM change that breaks one is refused) and by the
property and fuzz tests (no command may ever break one).
"""

from __future__ import annotations

from rules.model import ABILITIES, CONDITIONS, SHOWN, Character, Room


def character_violations(c: Character) -> list[str]:
    out: list[str] = []
    if c.condition not in CONDITIONS:
        out.append(f"unknown condition {c.condition!r}")
    if c.shown not in SHOWN:
        out.append(f"unknown shown {c.shown!r} (one of {', '.join(SHOWN)})")
    if c.level < 1:
        out.append("level must be at least 1")
    for name, cur, mx in (("pv", c.pv, c.pv_max), ("pe", c.pe, c.pe_max), ("pp", c.pp, c.pp_max)):
        if not 0 <= cur <= mx:
            out.append(f"{name} {cur} must be between 0 and {name}_max {mx}")
    if c.condition == "conscious" and c.pv < 1:
        out.append("a conscious character has pv of 1 or more")
    if c.condition in ("dying", "stable") and c.pv != 0:
        out.append(f"a {c.condition} character has pv 0")
    for a in ABILITIES:
        if not 0 <= c.ability_damage[a] <= c.abilities[a]:
            out.append(f"{a} damage must be between 0 and the score {c.abilities[a]}")
    if c.condition != "stable" and (c.stable_since is not None or c.healer is not None):
        out.append("only a stable character has a stability clock or a healer")
    if c.condition != "conscious" and c.activity is not None:
        out.append("only a conscious character rests")
    if c.nonlethal and c.condition != "stable":
        out.append("only a stable character is marked nonlethal")
    return out


def violations(room: Room) -> list[str]:
    """Every broken invariant of the room, prefixed by the character id."""
    out: list[str] = []
    for cid, c in room.characters.items():
        out += [f"{cid}: {p}" for p in character_violations(c)]
        if c.owner is not None and c.owner not in room.users:
            out.append(f"{cid}: owner {c.owner!r} is not a user")
        if c.healer is not None:
            h = room.characters.get(c.healer)
            if h is None or h.condition != "conscious":
                out.append(f"{cid}: healer {c.healer!r} is not a conscious character")
    if room.combat is not None:
        order = room.combat.order
        if not order or not 0 <= room.combat.turn < len(order):
            out.append("combat turn out of range")
        if any(cid not in room.characters for cid in order):
            out.append("combat order names a missing character")
    if any(cid not in (room.combat.order if room.combat else ()) for cid in room.initiative):
        out.append("initiative names a character outside the combat order")
    for r in room.queued_rolls:
        if not 1 <= r <= 20:
            out.append(f"queued roll {r} is not a d20")
    return out
