"""Rest and recovery (R1-R5), and the recovery shared with L2; the ops
`rest` and `stop_rest` (`OPS`)."""

from __future__ import annotations

from rules.context import Ctx
from rules.errors import RuleBroken
from rules.model import ABILITIES, HOUR, Activity, Character
from rules.op import OWNER_OR_GM, Args, Check, Doc, Facts, Op, Subject, edit
from rules.validate import ID, REST, Arg

# R1-R3: how long each rest lasts, in world seconds.
REST_SECONDS = {"short": 10 * 60, "night": 8 * HOUR, "bed": 24 * HOUR}


def check_may_rest(at: Facts, a: Args) -> None:
    """R1-R4: who may start a rest now, of whatever kind."""
    c = at.char(a)
    if c.condition != "conscious":
        raise RuleBroken(
            f"{c.name} is {c.condition}: only a conscious character can rest",
            "rest_not_conscious",
            char=c.id,
            condition=c.condition,
        )
    if at.room.in_combat(c.id):
        raise RuleBroken(
            f"{c.name} is in a running combat and cannot rest (R4)", "rest_in_combat", char=c.id
        )
    if c.activity is not None:
        raise RuleBroken(
            f"{c.name} is already taking a {c.activity.kind} rest (one at a time)",
            "rest_already",
            char=c.id,
            rest=c.activity.kind,
        )
    if at.tends(c.id):
        raise RuleBroken(
            f"{c.name} is tending a patient and cannot rest (L4)", "rest_tending", char=c.id
        )


def check_rest_kind(at: Facts, a: Args) -> None:
    """R1: a short rest costs a PP."""
    c = at.char(a)
    if a["kind"] == "short" and c.pp < 1:
        raise RuleBroken(
            f"{c.name} has no PP left for a short rest (R1)", "rest_short_no_pp", char=c.id
        )


def start_rest(ctx: Ctx, c: Character, kind: str) -> None:
    """The rest's `activity` (the op's checks passed)."""
    room = ctx.room
    c.activity = Activity(kind, room.clock + REST_SECONDS[kind])
    ctx.emit("rest", char=c.id, rest=kind, outcome="started", ends=c.activity.ends)


def check_stop_rest(c: Character) -> None:
    if c.activity is None:
        raise RuleBroken(f"{c.name} is not resting", "not_resting", char=c.id)


def end_rest(ctx: Ctx, c: Character, cause: str) -> None:
    """R4: a rest in progress ends without benefit."""
    if c.activity is None:
        return
    kind = c.activity.kind
    c.activity = None
    ctx.emit("rest", char=c.id, rest=kind, outcome="interrupted", cause=cause)


def complete_rest(ctx: Ctx, c: Character) -> None:
    """The rest's end is reached: its benefits apply (R1-R3)."""
    assert c.activity is not None
    kind = c.activity.kind
    c.activity = None
    if kind == "short":
        # R1 ruling: the PP is paid on completion; none left -> no benefit.
        if c.pp < 1:
            ctx.emit("rest", char=c.id, rest=kind, outcome="no_benefit", cause="no_pp")
            return
        c.pp -= 1
        ctx.emit("pp", char=c.id, delta=-1, cause="short_rest")
        recover(ctx, c, pv=0, pp_full=False, abilities=0, cause="short_rest")
    elif kind == "night":
        recover(ctx, c, pv=c.level, pp_full=True, abilities=1, cause="night_rest")  # R2
    else:
        recover(ctx, c, pv=2 * c.level, pp_full=True, abilities=2, cause="bed_rest")  # R3
    ctx.emit("rest", char=c.id, rest=kind, outcome="complete")


def recover(ctx: Ctx, c: Character, *, pv: int, pp_full: bool, abilities: int, cause: str) -> None:
    """PV + `pv` (capped, R5), abilities heal `abilities` points each, PE to
    the (possibly raised) maximum, PP to maximum if `pp_full`. The event
    names what came back: `restored`, the points each damaged ability
    regained (absent when none was damaged)."""
    restored: dict[str, int] = {}
    for a in ABILITIES:
        healed = min(abilities, c.ability_damage[a])
        if healed > 0:
            c.ability_damage[a] -= healed
            restored[a] = healed
    before = (c.pv, c.pe, c.pp)
    c.pv = min(c.pv_max, c.pv + pv)
    c.pe = c.pe_max
    if pp_full:
        c.pp = c.pp_max
    ctx.emit(
        "recover",
        char=c.id,
        cause=cause,
        pv=c.pv - before[0],
        pe=c.pe - before[1],
        pp=c.pp - before[2],
        abilities=abilities,
        **({"restored": restored} if restored else {}),
    )


OPS = (
    Op(
        "rest",
        {"char": Arg(ID), "kind": Arg(REST)},
        OWNER_OR_GM,
        lambda ctx, a: start_rest(ctx, edit(ctx, a), a["kind"]),
        Subject(choose="kind", reads="rest"),
        Doc(
            summary="start a short rest (10 min), a night (8 h) or bed rest (24 h)",
            changes="The character's `activity`; the benefits apply when the clock reaches its"
            " end (R1-R3); damage, combat or falling unconscious interrupt it (R4).",
            meaning={"char": "the resting character", "kind": "short, night or bed"},
            example={"char": "c1", "kind": "night"},
            errors=(
                (
                    "rule",
                    "not conscious; in a running combat; resting already; tending someone; "
                    "a short rest with 0 PP",
                ),
            ),
            rules="R1-R4",
        ),
        events=("rest",),
        checks=(Check(check_may_rest), Check(check_rest_kind, of="kind")),
        chars=("char",),
    ),
    Op(
        "stop_rest",
        {"char": Arg(ID)},
        OWNER_OR_GM,
        lambda ctx, a: end_rest(ctx, edit(ctx, a), "stopped"),
        Subject(),
        Doc(
            summary="stop a rest early, without its benefit",
            changes="The rest ends with no benefit.",
            meaning={"char": "the resting character"},
            example={"char": "c1"},
            errors=(("rule", "the character is not resting"),),
            rules="R4",
        ),
        events=("rest",),
        checks=(Check(lambda at, a: check_stop_rest(at.char(a))),),
        chars=("char",),
    ),
)
