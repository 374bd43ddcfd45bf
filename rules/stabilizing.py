"""Stabilising: first aid (S1), healing (S2), spending PP (S3), continuing
the fight (S4), and the S3/S4 allowance shared by one turn."""

from __future__ import annotations

from rules.conditions import become
from rules.context import Ctx
from rules.errors import RuleBroken
from rules.model import Character

FIRST_AID_DC = 15  # S1
STABILIZE_COST_MAX = 3  # S3: a quarter of pp_max, minimum 1, maximum 3


def first_aid(ctx: Ctx, medic: Character, patient: Character, roll: int | None) -> None:
    """S1: a Medicine check DC 15 by another conscious character on a dying one."""
    if medic.id == patient.id:
        raise RuleBroken("first aid must come from another character (S1)")
    if medic.condition != "conscious":
        raise RuleBroken(f"{medic.name} is {medic.condition} and cannot give first aid (S1)")
    if patient.condition != "dying":
        raise RuleBroken(f"{patient.name} is {patient.condition}, not dying: no first aid needed")
    total = ctx.check(
        medic, "medicine", medic.medicine, dc=FIRST_AID_DC, roll=roll, patient=patient.id
    )
    if total >= FIRST_AID_DC:
        become(ctx, patient, "stable", "first_aid")


def heal(ctx: Ctx, c: Character, amount: int, stabilize: bool) -> None:
    """S2: PV up (capped, R5); 1 PV or more wakes; `stabilize` stabilises a
    dying character even at 0 PV."""
    gain = min(c.pv_max - c.pv, amount)
    c.pv += gain
    ctx.emit("heal", char=c.id, amount=amount, pv=gain, stabilize=stabilize)
    if c.condition in ("dying", "stable") and c.pv >= 1:
        become(ctx, c, "conscious", "heal")
    elif c.condition == "dying" and stabilize:
        become(ctx, c, "stable", "heal")


def stabilize_cost(c: Character) -> int:
    return min(STABILIZE_COST_MAX, max(1, c.pp_max // 4))


def stabilize(ctx: Ctx, c: Character) -> None:
    """S3: spend a quarter of pp_max (1..3) PP to become stable."""
    if c.condition != "dying":
        raise RuleBroken(
            f"{c.name} is {c.condition}: only a dying character can spend PP to stabilise (S3)"
        )
    _check_allowance(c)
    cost = stabilize_cost(c)
    if c.pp < cost:
        raise RuleBroken(f"{c.name} needs {cost} PP to stabilise and has {c.pp} (S3)")
    c.pp -= cost
    ctx.emit("pp", char=c.id, delta=-cost, cause="stabilize")
    become(ctx, c, "stable", "stabilize")
    _use_allowance(ctx, c)


def stay_in_fight(ctx: Ctx, c: Character) -> None:
    """S4: a stable character spends 1 PP to regain 1 PV and wake."""
    if c.condition != "stable":
        raise RuleBroken(
            f"{c.name} is {c.condition}: only a stable character can continue the fight (S4)"
        )
    _check_allowance(c)
    if c.pp < 1:
        raise RuleBroken(f"{c.name} has no PP left to continue the fight (S4)")
    c.pp -= 1
    ctx.emit("pp", char=c.id, delta=-1, cause="stay_in_fight")
    c.pv = min(c.pv_max, c.pv + 1)
    become(ctx, c, "conscious", "stay_in_fight")
    _use_allowance(ctx, c)


def _check_allowance(c: Character) -> None:
    if c.regained_this_turn:
        raise RuleBroken(
            f"{c.name} already spent PP to stabilise or continue the fight this turn (S3/S4)"
        )


def _use_allowance(ctx: Ctx, c: Character) -> None:
    """S4: the allowance resets at the end of the character's own turn in
    combat; outside combat a full round of world time after its use."""
    c.regained_this_turn = True
    c.regained_at = None if ctx.room.in_combat(c.id) else ctx.room.clock


def reset_allowance(c: Character) -> None:
    c.regained_this_turn = False
    c.regained_at = None
