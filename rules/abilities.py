"""Temporary ability damage (A1-A3)."""

from __future__ import annotations

from rules.conditions import become
from rules.context import Ctx
from rules.model import Character


def ability_damage(ctx: Ctx, c: Character, ability: str, amount: int) -> None:
    """A1: damage accumulates, never above the score. A2: Con damage lowers
    pe_max (PE capped to it) and kills when it equals the score."""
    before = c.ability_damage[ability]
    c.ability_damage[ability] = min(c.abilities[ability], before + amount)
    c.pe = min(c.pe, c.pe_max)
    ctx.emit(
        "ability",
        char=c.id,
        ability=ability,
        delta=c.ability_damage[ability] - before,
        damage=c.ability_damage[ability],
        mod=c.mod(ability),
    )
    if ability == "con" and c.ability_damage["con"] >= c.abilities["con"]:
        become(ctx, c, "dead", "constitution_damage")


def ability_restore(ctx: Ctx, c: Character, ability: str, amount: int) -> None:
    """A3: a GM restore; a regained Con modifier raises pe_max, PE unchanged."""
    before = c.ability_damage[ability]
    c.ability_damage[ability] = max(0, before - amount)
    ctx.emit(
        "ability",
        char=c.id,
        ability=ability,
        delta=c.ability_damage[ability] - before,
        damage=c.ability_damage[ability],
        mod=c.mod(ability),
    )
