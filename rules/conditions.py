"""This module owns the condition state machine (conscious, dying, stable, dead).

Every change of condition goes through `become`, which checks the transition
against `TRANSITIONS` (data, not scattered ifs), runs the exit and entry
actions that the rules attach to each condition (stability clock L3, dying
clocks D5, rests R4, tending L4) and emits the `condition` event.
"""

from __future__ import annotations

from rules.context import Ctx
from rules.model import Character

# (from, to) -> the causes that may make that transition. A GM correction
# ("correction", update_character) may make any transition.
TRANSITIONS: dict[tuple[str, str], frozenset[str]] = {
    ("conscious", "dying"): frozenset({"damage"}),  # D2
    ("conscious", "stable"): frozenset({"nonlethal"}),  # N1
    ("conscious", "dead"): frozenset({"constitution_damage"}),  # A2
    ("dying", "stable"): frozenset({"first_aid", "heal", "stabilize"}),  # S1-S3
    ("dying", "conscious"): frozenset({"heal"}),  # S2
    ("dying", "dead"): frozenset({"dying", "damage", "constitution_damage"}),  # D3, D5, A2
    ("stable", "conscious"): frozenset({"heal", "stay_in_fight", "stability_check", "long_rest"}),
    ("stable", "dying"): frozenset({"damage"}),  # D3
    ("stable", "dead"): frozenset({"stability_check", "constitution_damage"}),  # L1, A2
}

UNCONSCIOUS = frozenset({"dying", "stable"})


def allowed(frm: str, to: str, cause: str) -> bool:
    if cause == "correction":
        return frm != to
    return cause in TRANSITIONS.get((frm, to), frozenset())


def become(ctx: Ctx, c: Character, to: str, cause: str) -> None:
    """Move `c` to condition `to` because of `cause`."""
    frm = c.condition
    if not allowed(frm, to, cause):
        raise AssertionError(f"engine bug: {frm} -> {to} by {cause} is not a transition")
    room = ctx.room
    # Exit actions.
    if frm == "conscious":
        from rules.rest import end_rest  # rest depends on conditions; import late

        end_rest(ctx, c, "unconscious" if to != "dead" else "dead")  # R4
        stop_tending_by(ctx, c, "healer_down")  # L4
    if frm == "stable":
        c.stable_since = None  # L3: the clock is discarded
        c.stability_checks = 0
        if c.healer is not None:
            healer = c.healer
            c.healer = None
            ctx.emit("tend", char=healer, patient=c.id, outcome="end", cause="not_stable")
    if frm == "dying":
        c.dying_next = None
        c.dying_fresh = False
    # Entry actions.
    c.condition = to
    c.nonlethal = False  # N1 sets it again after a nonlethal knock-out
    if to == "stable":
        c.stable_since = room.clock  # L3: a new clock from zero
        c.stability_checks = 0
    elif to == "dying":
        in_combat = room.in_combat(c.id)
        # D5: out of combat the PP loss counts full rounds from now; in combat
        # it happens at the end of the character's own turns, except the
        # turn during which it started dying.
        c.dying_next = None if in_combat else room.clock + room.round_seconds
        c.dying_fresh = in_combat and room.combat is not None and room.combat.current == c.id
    elif to == "dead":
        c.activity = None
        c.regained_this_turn = False
        c.regained_at = None
    ctx.emit("condition", char=c.id, **{"from": frm}, to=to, cause=cause)


def stop_tending_by(ctx: Ctx, healer: Character, cause: str) -> None:
    """L4: tending ends for every patient of `healer`."""
    for p in ctx.room.ordered():
        if p.healer == healer.id:
            p = ctx.edit(p.id)
            p.healer = None
            ctx.emit("tend", char=healer.id, patient=p.id, outcome="end", cause=cause)


def lose_pp(ctx: Ctx, c: Character, cause: str, rounds: int | None = None) -> None:
    """D5: a dying character loses 1 PP and dies when its PP fall to 0;
    one already at 0 PP dies the next time it would lose one (ruling).

    `rounds` is the scheduler's collapsed run of out-of-combat losses (T2):
    that many rounds' losses at once, reported as one `pp` event that says
    how many rounds it covers. The run never goes past the loss that kills
    (the clock computes it so), hence at most `max(pp, 1)` rounds."""
    n = 1 if rounds is None else rounds
    assert 1 <= n <= max(c.pp, 1), "engine bug: a run of losses past the one that kills"
    if c.pp > 0:
        c.pp -= n
        extra = {} if rounds is None else {"rounds": rounds}
        ctx.emit("pp", char=c.id, delta=-n, cause=cause, **extra)
        if c.pp > 0:
            return
    become(ctx, c, "dead", "damage" if cause == "damage" else "dying")
