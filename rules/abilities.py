"""Temporary ability damage (A1-A3); the ops `ability_damage` and
`ability_restore` (`OPS`)."""

from __future__ import annotations

from rules.conditions import become
from rules.context import Ctx
from rules.model import Character
from rules.op import Doc, G, Op, Subject, edit
from rules.validate import ABILITY, AMOUNT, ID, Arg


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


OPS = (
    Op(
        "ability_damage",
        {"char": Arg(ID), "ability": Arg(ABILITY), "amount": Arg(AMOUNT)},
        G,
        lambda ctx, a: ability_damage(ctx, edit(ctx, a), a["ability"], a["amount"]),
        Subject(),
        Doc(
            summary="temporary damage to an ability",
            changes="The ability's damage grows (never above the score); Con damage lowers"
            " pe_max (PE capped to it) and kills when it equals the score.",
            meaning={
                "char": "the character",
                "ability": "str, dex, con, int, wis or cha",
                "amount": "points of damage",
            },
            example={"char": "c1", "ability": "con", "amount": 2},
            rules="A1, A2",
        ),
        # Con damage that kills ends a rest and the character's tending
        # (conditions.become: R4, L4), as any death does.
        events=("ability", "rest", "tend", "condition"),
        chars=("char",),
    ),
    Op(
        "ability_restore",
        {"char": Arg(ID), "ability": Arg(ABILITY), "amount": Arg(AMOUNT)},
        G,
        lambda ctx, a: ability_restore(ctx, edit(ctx, a), a["ability"], a["amount"]),
        Subject(),
        Doc(
            summary="restore points of ability damage",
            changes="The ability's damage shrinks (never below 0); a regained Con modifier"
            " raises pe_max, PE unchanged.",
            meaning={
                "char": "the character",
                "ability": "str, dex, con, int, wis or cha",
                "amount": "points restored",
            },
            example={"char": "c1", "ability": "con", "amount": 2},
            rules="A3",
        ),
        events=("ability",),
        chars=("char",),
    ),
)
