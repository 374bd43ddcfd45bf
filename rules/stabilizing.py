"""Stabilising: first aid (S1), healing (S2), spending PP (S3), continuing
the fight (S4), and the S3/S4 allowance shared by one turn; the ops `heal`,
`first_aid`, `stabilize` and `stay_in_fight` (`OPS`)."""

from __future__ import annotations

from rules.conditions import become
from rules.context import Ctx
from rules.errors import RuleBroken
from rules.model import Character
from rules.op import OWNER_OR_GM, Args, Check, Doc, Facts, G, Op, Subject, edit
from rules.validate import AMOUNT, BOOL, D20, ID, Arg, optional

FIRST_AID_DC = 15  # S1
STABILIZE_COST_MAX = 3  # S3: a quarter of pp_max, minimum 1, maximum 3


def check_first_aid_medic(medic: Character) -> None:
    """S1: who may give first aid."""
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


def check_first_aid_other(at: Facts, a: Args) -> None:
    """S1: first aid comes from another character."""
    if a["char"] == a["patient"]:
        raise RuleBroken("first aid must come from another character (S1)", "first_aid_self")


def first_aid(ctx: Ctx, medic: Character, patient: Character, roll: int | None) -> None:
    """S1: a Medicine check DC 15 by another conscious character on a dying
    one (the op's checks passed: another character, the medic, the patient)."""
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
    """S3: spend a quarter of pp_max (1..3) PP to become stable (the op's
    check passed: `check_stabilize`)."""
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
    """S4: a stable character spends 1 PP to regain 1 PV and wake (the op's
    check passed: `check_stay_in_fight`)."""
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


OPS = (
    Op(
        "heal",
        {"char": Arg(ID), "amount": Arg(AMOUNT), "stabilize": optional(BOOL, False)},
        G,
        lambda ctx, a: heal(ctx, edit(ctx, a), a["amount"], a["stabilize"]),
        Subject(),
        Doc(
            summary="heal PV; 1 PV or more wakes",
            changes="PV up to pv_max; a dying or stable character with 1 PV or more is conscious; "
            "`stabilize` makes a dying one stable even at 0 PV.",
            meaning={
                "char": "the character healed",
                "amount": "PV to give",
                "stabilize": "also stabilise a dying character",
            },
            example={"char": "c1", "amount": 5},
            rules="S2",
        ),
        events=("heal", "condition", "tend"),
        chars=("char",),
    ),
    Op(
        "first_aid",
        {"char": Arg(ID), "patient": Arg(ID), "roll": optional(D20)},
        OWNER_OR_GM,
        lambda ctx, a: first_aid(ctx, edit(ctx, a), edit(ctx, a, "patient"), a["roll"]),
        Subject(choose="patient", reads="everyone"),
        Doc(
            summary="a Medicine check DC 15 on a dying character",
            changes="The medic rolls d20 + medicine against DC 15; success makes the patient "
            "stable. A failure is still a version, with its roll.",
            meaning={
                "char": "the medic (the GM or its owner sends it)",
                "patient": "the dying character",
                "roll": "a natural d20 the GM rolled at the table (GM only, X1)",
            },
            example={"char": "c2", "patient": "c1"},
            errors=(
                ("rule", "the medic is the patient, or is not conscious; the patient is not dying"),
                ("forbidden", "a player sends `roll`"),
            ),
            rules="S1, X1, X2",
        ),
        events=("roll", "condition"),
        # S1, in the order apply reports: another character, the medic, the patient.
        checks=(
            Check(check_first_aid_other, of="patient"),
            Check(lambda at, a: check_first_aid_medic(at.char(a))),
            Check(lambda at, a: check_first_aid_patient(at.char(a, "patient")), "patient", True),
        ),
        chars=("char", "patient"),
    ),
    Op(
        "stabilize",
        {"char": Arg(ID)},
        OWNER_OR_GM,
        lambda ctx, a: stabilize(ctx, edit(ctx, a)),
        Subject(cost=lambda c: {"pp": stabilize_cost(c)}),
        Doc(
            summary="a dying character spends PP to become stable",
            changes="Spends pp_max // 4 PP (1 to 3); the character is stable.",
            meaning={"char": "the dying character"},
            example={"char": "c1"},
            errors=(("rule", "not dying; not enough PP; S3 or S4 used already this turn"),),
            rules="S3",
        ),
        events=("pp", "condition"),
        checks=(Check(lambda at, a: check_stabilize(at.char(a))),),
        chars=("char",),
    ),
    Op(
        "stay_in_fight",
        {"char": Arg(ID)},
        OWNER_OR_GM,
        lambda ctx, a: stay_in_fight(ctx, edit(ctx, a)),
        Subject(cost=lambda c: {"pp": STAY_IN_FIGHT_COST}),
        Doc(
            summary="a stable character spends 1 PP to wake with 1 PV",
            changes="1 PP for 1 PV; the character is conscious.",
            meaning={"char": "the stable character"},
            example={"char": "c1"},
            errors=(("rule", "not stable; no PP; S3 or S4 used already this turn"),),
            rules="S4",
        ),
        events=("pp", "condition"),
        checks=(Check(lambda at, a: check_stay_in_fight(at.char(a))),),
        chars=("char",),
    ),
)
