"""Stabilising: first aid (S1), healing (S2), spending PP (S3), continuing
the fight (S4), and the S3/S4 allowance shared by one turn."""

from __future__ import annotations

from rules.conditions import become
from rules.context import Ctx
from rules.errors import RuleBroken
from rules.model import Character

FIRST_AID_DC = 15  # S1
STABILIZE_COST_MAX = 3  # S3: a quarter of pp_max, minimum 1, maximum 3


def check_first_aid_medic(medic: Character) -> None:
    """S1: who may give first aid (apply and the affordances both ask this)."""
    if medic.condition != "conscious":
        raise RuleBroken(
            f"{medic.name} is {medic.condition} and cannot give first aid (S1)",
            "first_aid_medic",
            char=medic.id,
            condition=medic.condition,
        )


def check_first_aid_patient(patient: Character) -> None:
    """S1: who may receive it."""
    if patient.condition != "dying":
        raise RuleBroken(
            f"{patient.name} is {patient.condition}, not dying: no first aid needed",
            "first_aid_patient",
            patient=patient.id,
            condition=patient.condition,
        )


def check_first_aid(medic: Character, patient: Character) -> None:
    """S1, in the order apply reports: another character, the medic, the patient."""
    if medic.id == patient.id:
        raise RuleBroken("first aid must come from another character (S1)", "first_aid_self")
    check_first_aid_medic(medic)
    check_first_aid_patient(patient)


def first_aid(ctx: Ctx, medic: Character, patient: Character, roll: int | None) -> None:
    """S1: a Medicine check DC 15 by another conscious character on a dying one."""
    check_first_aid(medic, patient)
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
    """S3: what a stabilise costs this character, in PP (its affordance shows it)."""
    return min(STABILIZE_COST_MAX, max(1, c.pp_max // 4))


def check_stabilize(c: Character) -> None:
    """S3's conditions: dying, the allowance unused, enough PP."""
    if c.condition != "dying":
        raise RuleBroken(
            f"{c.name} is {c.condition}: only a dying character can spend PP to stabilise (S3)",
            "stabilize_not_dying",
            char=c.id,
            condition=c.condition,
        )
    check_allowance(c)
    cost = stabilize_cost(c)
    if c.pp < cost:
        raise RuleBroken(
            f"{c.name} needs {cost} PP to stabilise and has {c.pp} (S3)",
            "stabilize_pp",
            char=c.id,
            cost=cost,
            pp=c.pp,
        )


def stabilize(ctx: Ctx, c: Character) -> None:
    """S3: spend a quarter of pp_max (1..3) PP to become stable."""
    check_stabilize(c)
    cost = stabilize_cost(c)
    c.pp -= cost
    ctx.emit("pp", char=c.id, delta=-cost, cause="stabilize")
    become(ctx, c, "stable", "stabilize")
    _use_allowance(ctx, c)


STAY_IN_FIGHT_COST = 1  # S4: one PP


def check_stay_in_fight(c: Character) -> None:
    """S4's conditions: stable, the allowance unused, a PP left."""
    if c.condition != "stable":
        raise RuleBroken(
            f"{c.name} is {c.condition}: only a stable character can continue the fight (S4)",
            "stay_not_stable",
            char=c.id,
            condition=c.condition,
        )
    check_allowance(c)
    if c.pp < STAY_IN_FIGHT_COST:
        raise RuleBroken(
            f"{c.name} has no PP left to continue the fight (S4)", "stay_no_pp", char=c.id
        )


def stay_in_fight(ctx: Ctx, c: Character) -> None:
    """S4: a stable character spends 1 PP to regain 1 PV and wake."""
    check_stay_in_fight(c)
    c.pp -= STAY_IN_FIGHT_COST
    ctx.emit("pp", char=c.id, delta=-STAY_IN_FIGHT_COST, cause="stay_in_fight")
    c.pv = min(c.pv_max, c.pv + 1)
    become(ctx, c, "conscious", "stay_in_fight")
    _use_allowance(ctx, c)


def check_allowance(c: Character) -> None:
    if c.regained_this_turn:
        raise RuleBroken(
            f"{c.name} already spent PP to stabilise or continue the fight this turn (S3/S4)",
            "allowance_used",
            char=c.id,
        )


def _use_allowance(ctx: Ctx, c: Character) -> None:
    """S4: the allowance resets at the end of the character's own turn in
    combat; outside combat a full round of world time after its use."""
    c.regained_this_turn = True
    c.regained_at = None if ctx.room.in_combat(c.id) else ctx.room.clock


def reset_allowance(c: Character) -> None:
    c.regained_this_turn = False
    c.regained_at = None
