"""Long-term stability (L1-L5): hourly Constitution checks of a stable
character, the healer who tends it, and the wake-up after the eighth hour;
the ops `tend` and `untend` (`OPS`)."""

from __future__ import annotations

from rules.conditions import become
from rules.context import Ctx
from rules.errors import RuleBroken
from rules.model import STABILITY_CHECKS, Character, next_stability_check
from rules.op import OWNER_OR_GM, UNTEND, Args, Check, Doc, Facts, Op, Subject, edit
from rules.rest import recover
from rules.validate import ID, Arg

WAKE_AT = 20  # L1: total >= 20 regains 1 PV
DIE_BELOW = 10  # L1: total < 10 dies
HEALER_DC = 15  # L4
HEALER_BONUS = 2  # L4


def next_check(c: Character) -> int | None:
    """World second of the next hourly check (L1: the schedule is
    `rules.model.next_stability_check`, which the dict form shows too), or None."""
    found = next_stability_check(c.condition, c.stable_since, c.stability_checks)
    return None if found is None else found[0]


def stability_check(ctx: Ctx, c: Character) -> None:
    """L1 + L4 + L5, then L2 after the eighth."""
    bonus, floor = 0, None
    if c.healer is not None:
        healer = ctx.room.characters[c.healer]
        total = ctx.check(healer, "medicine", healer.medicine, dc=HEALER_DC, patient=c.id)
        if total >= HEALER_DC:
            bonus, floor = HEALER_BONUS, DIE_BELOW  # L4
    c.stability_checks += 1

    def outcome(total: int) -> str:
        if total >= WAKE_AT:
            return "wake"
        if total >= DIE_BELOW:
            return "stay"
        return "stay" if c.nonlethal else "die"  # L5

    total = ctx.check(
        c,
        "constitution",
        c.mod("con"),
        dc=None,
        bonus=bonus,
        floor=floor,
        outcome=outcome,
        hour=c.stability_checks,
    )
    result = outcome(total)
    if result == "wake":
        c.pv = min(c.pv_max, c.pv + 1)
        become(ctx, c, "conscious", "stability_check")
    elif result == "die":
        become(ctx, c, "dead", "stability_check")
    elif c.stability_checks >= STABILITY_CHECKS:
        # L2: still stable after the +8 h check: wakes as after a night's rest,
        # PV become `level` (from 0, capped).
        recover(ctx, c, pv=c.level, pp_full=True, abilities=1, cause="long_rest")
        become(ctx, c, "conscious", "long_rest")


def check_healer(healer: Character) -> None:
    """L4: who may tend: a conscious character that is not resting."""
    if healer.condition != "conscious":
        raise RuleBroken(
            f"{healer.name} is {healer.condition} and cannot tend anyone (L4)",
            "healer_not_conscious",
            char=healer.id,
            condition=healer.condition,
        )
    if healer.activity is not None:
        raise RuleBroken(
            f"{healer.name} is resting; stop the rest before tending (L4)",
            "healer_resting",
            char=healer.id,
        )


def check_tend_other(at: Facts, a: Args) -> None:
    """L4: a character does not tend itself."""
    if a["char"] == a["patient"]:
        raise RuleBroken("a character cannot tend itself (L4)", "tend_self")


def check_tend_patient(patient: Character) -> None:
    """L4: who may be tended: a stable character."""
    if patient.condition != "stable":
        raise RuleBroken(
            f"{patient.name} is {patient.condition}: only a stable character is tended (L4)",
            "patient_not_stable",
            patient=patient.id,
            condition=patient.condition,
        )


def check_untended(at: Facts, a: Args) -> None:
    """L4: one healer per patient: nobody tends it yet."""
    healer, patient = at.char(a), at.char(a, "patient")
    if patient.healer == healer.id:
        raise RuleBroken(
            f"{healer.name} already tends {patient.name}",
            "already_tending",
            char=healer.id,
            patient=patient.id,
        )
    if patient.healer is not None:
        other = at.room.characters[patient.healer]
        raise RuleBroken(
            f"{patient.name} is already tended by {at.actor.name_of(other)} (one healer per"
            " patient)",
            "tended_by_other",
            patient=patient.id,
            healer=other.id,
        )


def tend(ctx: Ctx, healer: Character, patient: Character) -> None:
    """L4: a conscious character tends a stable one (one healer per patient;
    the op's checks passed)."""
    patient.healer = healer.id
    ctx.emit("tend", char=healer.id, patient=patient.id, outcome="start")


def check_untend(patient: Character) -> None:
    if patient.healer is None:
        raise RuleBroken(f"nobody tends {patient.name}", "untend_nobody", patient=patient.id)


def untend(ctx: Ctx, patient: Character) -> None:
    """Nobody tends `patient` any more (the op's check passed: someone did)."""
    healer = patient.healer
    assert healer is not None
    patient.healer = None
    ctx.emit("tend", char=healer, patient=patient.id, outcome="end", cause="untend")


OPS = (
    Op(
        "tend",
        {"char": Arg(ID), "patient": Arg(ID)},
        OWNER_OR_GM,
        lambda ctx, a: tend(ctx, edit(ctx, a), edit(ctx, a, "patient")),
        Subject(choose="patient", reads="everyone"),
        Doc(
            summary="a conscious character tends a stable one",
            changes="The patient's `healer`: before each hourly check the healer rolls Medicine"
            " DC 15; a success gives +2 and no death on that check.",
            meaning={"char": "the healer", "patient": "the stable character"},
            example={"char": "c2", "patient": "c1"},
            errors=(
                (
                    "rule",
                    "the healer is the patient, not conscious, or resting; the patient is not "
                    "stable, or is tended already",
                ),
            ),
            rules="L4",
        ),
        events=("tend",),
        # L4, in the order apply reports: another character, the healer, the patient.
        checks=(
            Check(check_tend_other, of="patient"),
            Check(lambda at, a: check_healer(at.char(a))),
            Check(lambda at, a: check_tend_patient(at.char(a, "patient")), "patient", True),
            Check(check_untended, of="patient"),
        ),
        chars=("char", "patient"),
    ),
    Op(
        "untend",
        {"patient": Arg(ID)},
        UNTEND,
        lambda ctx, a: untend(ctx, edit(ctx, a, "patient")),
        Subject(arg="patient"),
        Doc(
            summary="stop tending a patient",
            changes="The patient has no healer.",
            meaning={"patient": "the tended character"},
            example={"patient": "c1"},
            errors=(("rule", "nobody tends this patient"),),
            rules="L4",
        ),
        events=("tend",),
        checks=(Check(lambda at, a: check_untend(at.char(a, "patient"))),),
        chars=("patient",),
    ),
)
