"""Damage (D1-D5) and nonlethal damage (N1); the op `damage` (`OPS`)."""

from __future__ import annotations

from rules.conditions import become, lose_pp
from rules.context import Ctx
from rules.model import Character
from rules.op import Doc, G, Op, Subject, edit
from rules.rest import end_rest
from rules.validate import AMOUNT, BOOL, ID, Arg, optional


def damage(ctx: Ctx, c: Character, amount: int, nonlethal: bool, pv_only: bool) -> None:
    """D1: PE first (unless `pv_only`), then PV, never below 0."""
    if amount > 0:
        end_rest(ctx, c, "damage")  # D4 / R4
    pe_loss = 0 if pv_only else min(c.pe, amount)
    c.pe -= pe_loss
    to_pv = amount - pe_loss
    pv_loss = min(c.pv, to_pv)
    c.pv -= pv_loss
    ctx.emit(
        "damage",
        char=c.id,
        amount=amount,
        pe=-pe_loss,
        pv=-pv_loss,
        nonlethal=nonlethal,
    )
    if to_pv <= 0:
        return
    if nonlethal:
        if c.condition == "conscious" and c.pv == 0:
            become(ctx, c, "stable", "nonlethal")  # N1
            c.nonlethal = True
        return  # N1: nonlethal damage reaching PV already at 0 changes nothing
    if c.condition == "conscious":
        if c.pv == 0:
            become(ctx, c, "dying", "damage")  # D2
    elif c.condition == "dying":
        lose_pp(ctx, c, "damage")  # D3, then D5's death rule
    elif c.condition == "stable":
        become(ctx, c, "dying", "damage")  # D3: no PP cost, clock discarded


OPS = (
    Op(
        "damage",
        {
            "char": Arg(ID),
            "amount": Arg(AMOUNT),
            "nonlethal": optional(BOOL, False),
            "pv_only": optional(BOOL, False),
        },
        G,
        lambda ctx, a: damage(ctx, edit(ctx, a), a["amount"], a["nonlethal"], a["pv_only"]),
        Subject(),
        Doc(
            summary="deal damage: PE first, then PV",
            changes="PE then PV (D1); 0 PV makes a conscious character dying (D2); damage"
            " reaching the PV of a dying one costs 1 PP (D3); a rest ends (D4). Nonlethal damage"
            " knocks out instead (N1).",
            meaning={
                "char": "the character hit",
                "amount": "points of damage",
                "nonlethal": "nonlethal damage (N1)",
                "pv_only": "skip PE: the damage goes to PV",
            },
            example={"char": "c1", "amount": 8},
            rules="D1-D5, N1",
        ),
        events=("rest", "damage", "condition", "pp", "tend"),
        chars=("char",),
    ),
)
