"""An op, declared once.

Like a boardgame.io game's `moves` (src/types.ts, `LongFormMove`: a move
declared once with its options; src/core/game.ts, `ProcessGameConfig`: the
framework reads that one declaration), each rules module declares the ops it
handles as `Op` values, next to the rules they apply (stabilizing.py):

    Op(
        "stabilize",
        {"char": Arg(ID)},                            # the spec: what it accepts
        OWNER_OR_GM,                                  # who may send it
        lambda ctx, a: stabilize(ctx, edit(ctx, a)),  # what it changes
        Subject(cost=lambda c: {"pp": stabilize_cost(c)}),  # what the affordances say
        Doc(summary=..., changes=..., ...),           # what it means, in words
        events=("pp", "condition"),                   # the kinds it may emit
        checks=(Check(lambda at, a: check_stabilize(at.char(a))),),  # what must hold first
        chars=("char",),                              # the arguments naming characters
    )

and everything else is built from those declarations: the op table `apply`
reads (`rules.engine.OPS`), the affordances (rules/offers.py: an offer runs
the op's own `checks`, never a copy of them) and the reference
(rules/catalog.py: docs/operations.md, the CLI's help, the API documents).
The modules that declare ops: roster.py, users.py, clock.py, tracker.py,
initiative.py, damage.py, stabilizing.py, stability.py, rest.py, abilities.py.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import attrs

from rules.context import Actor, Ctx
from rules.model import Character, Room
from rules.validate import Arg

# Roles (docs/protocol.md, Operations): G the GM; OWNER_OR_GM the GM or the
# owner of the acting character (the `char` argument); UNTEND the GM or the
# owner of the patient or of its healer.
G, OWNER_OR_GM, UNTEND = "G", "O", "UNTEND"

Args = dict[str, Any]


@attrs.frozen
class Facts:
    """What a check reads besides the command's arguments: the room, who
    sends the command (a refusal names no character hidden from them), and,
    when the caller keeps it, who tends someone (the affordances ask the
    rest check of every character: one set instead of a scan each)."""

    room: Room
    actor: Actor
    healers: Collection[str] | None = None

    def char(self, a: Args, key: str = "char") -> Character:
        """The character the argument `key` names (checked to exist)."""
        return self.room.characters[a[key]]

    def tends(self, cid: str) -> bool:
        """Is `cid` tending someone (L4)?"""
        if self.healers is not None:
            return cid in self.healers
        return any(p.healer == cid for p in self.room.characters.values())


@attrs.frozen
class Check:
    """One precondition of an op: `test(facts, args)` raises a `Refused`
    when the command may not be applied now. `apply` runs an op's checks in
    their order, after the arguments, the sender and D6, and before the op
    changes anything; the affordances run the very same ones.

    `of`: the argument each of whose values it checks, the one the
    affordance lists the accepted values of (first aid's patient, a rest's
    kind, a combat's order); None: it reads the subject and the room only,
    and decides whether the op can be sent at all. The affordance calls it
    with that argument left at its default (None, for a required one), so
    such a check reads a default as "whatever the sender gives".
    `alone`: it reads that value alone, never the subject (first aid's
    patient must be dying): the affordance finds the values passing it once
    for every subject (and these checks may read of a character only what
    `rules.rule_table.RuleTable.generation` follows: its condition and
    healer)."""

    test: Callable[[Facts, Args], None]
    of: str | None = None
    alone: bool = False


@attrs.frozen
class Subject:
    """The op acts for one character, the argument `arg`: the affordances
    offer it under each character the viewer may act for.

    `choose`: an argument whose accepted values the affordance lists (a
    character argument: the other characters, first aid's patient; a choice
    argument: its values, a rest's kind).
    `cost(c)`: what sending it would spend (S3's PP), shown with the offer.
    `reads`: what its checks read beyond the subject, the key its entries
    are kept under between versions (rules/rule_table.py): "subject",
    "combat" (T1: is it their turn), "rest" (R4, L4: in the combat, tending
    someone) or "everyone" (the other characters' conditions and healers)."""

    arg: str = "char"
    choose: str | None = None
    cost: Callable[[Character], dict[str, int]] | None = None
    reads: str = "subject"


@attrs.frozen
class WholeRoom:
    """The op is about the room as a whole (the GM's tools): the affordances
    offer it under `room`. `choose`: an argument whose accepted values the
    affordance lists (a combat's order: characters; a user)."""

    choose: str | None = None


Offer = Subject | WholeRoom


@attrs.frozen
class Doc:
    """What an op means, in words, for the reference (docs/operations.md,
    `vtt-sync client cmd OP --help`, the API documents)."""

    summary: str  # one line, for `vtt-sync client ops`
    changes: str  # what it changes in the room (or on the server)
    meaning: dict[str, str]  # argument -> what it is (every argument of the op)
    example: dict[str, Any]  # the args of one valid command
    errors: tuple[tuple[str, str], ...] = ()  # its own refusals: (code, when)
    result: str = "{}"  # the ack's result
    rules: str = ""  # the rules' ids it applies (docs/rules.md)


@attrs.frozen
class OpDoc:
    """An op's entry in the reference (rules/catalog.py): its words, with,
    for an op of the table, its events and whether undo reverts it (read
    from its `Op`); for an op the server handles itself (undo, the admin
    ops, rules/server_ops.py), its arguments and role too."""

    summary: str
    changes: str
    meaning: dict[str, str]
    example: dict[str, Any]
    events: tuple[str, ...] = ()  # the event kinds it may emit, in their usual order
    errors: tuple[tuple[str, str], ...] = ()
    result: str = "{}"
    rules: str = ""
    undoable: bool = True
    # Server-handled ops only (not in the op table): their arguments and role.
    args: dict[str, Arg] | None = None
    role: str | None = None


@attrs.frozen
class Op:
    """One op, declared once (see the module docstring)."""

    name: str
    args: dict[str, Arg]
    role: str
    # What it changes, once every check passed: the handler works on the
    # command's own copy of the room (`Ctx`).
    apply: Callable[[Ctx, Args], None]
    offer: Offer
    doc: Doc
    # The event kinds it may emit, in their usual order (rules/events.py).
    events: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()
    chars: tuple[str, ...] = ()  # arguments that name characters (an id or a list of ids)
    users: tuple[str, ...] = ()  # arguments that name users ("set.owner" looks inside `set`)
    # Argument checks that need several arguments at once (still invalid_args).
    check: Callable[[Args], None] | None = None
    # The room's bounds (v1.1, Bounds): checks that need the room's state
    # but are still `invalid_args`, so they run with the argument checks.
    bounds: Callable[[Room, Args], None] | None = None
    # D6: may this op target a dead character (the `chars` arguments)?
    on_dead: bool = False
    # May `undo` revert it? User and token commands cannot be undone: a
    # token, once issued or revoked, is not brought back (docs/protocol.md, undo).
    undoable: bool = True

    def entry(self) -> OpDoc:
        """Its entry in the reference."""
        d = self.doc
        return OpDoc(
            d.summary,
            d.changes,
            d.meaning,
            d.example,
            self.events,
            d.errors,
            d.result,
            d.rules,
            self.undoable,
        )


def edit(ctx: Ctx, a: Args, key: str = "char") -> Character:
    """The command's own copy of the character the argument `key` names."""
    return ctx.edit(a[key])
