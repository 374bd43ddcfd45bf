"""Offers: what each op's affordance says, worked out from its declaration.

An op declares its offer (`rules.op.Subject` or `rules.op.WholeRoom`) beside
its checks; this module turns the two into the op's affordance entries, by
running the op's own checks, never a copy of them:

- the checks that read the subject and the room only (a `Check` with no
  `of`), after D6's `check_alive`, decide whether the op can be sent at all
  (`why`, the first refusal);
- the checks of the argument the offer lists (`Check.of`) decide each of its
  values: a character argument is tried with each character (those passing
  the `alone` checks are found once for every subject), a choice argument
  with each of its values (`refused` keeps their reasons), a user argument
  with each user;
- `cost` says what sending it spends.

What the rules say is worked out once per room version as `JUDGE` and kept
in the `RuleTable`; each viewer then gets their own reading of it
(`_Scan.adapt`): choices among the characters they see, reasons that name
nobody they do not, no die roll to supply unless GM (X1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rules.context import Actor
from rules.engine import OPS, authorize, check_alive
from rules.errors import Refused
from rules.model import Character, Room
from rules.op import Args, Facts, Op, Subject, WholeRoom
from rules.rule_table import COMBAT_READS, READS, RuleTable
from rules.validate import Kind

# Reason values that name a character: read null for a viewer who does not see it.
CHAR_VALUES = ("char", "patient", "healer", "current")

Reason = dict[str, Any]
Entry = dict[str, Any]
Test = Callable[[Facts, Args], None]


class _Scan:
    """One viewer's inputs: the room, the acting user, what they see, and
    the rule table shared by every viewer of this room version. (A plain
    class: one is made per viewer asked, at every command.)"""

    __slots__ = ("actor", "room", "rules", "seen_ids")

    def __init__(
        self, room: Room, actor: Actor, seen_ids: frozenset[str], rules: RuleTable
    ) -> None:
        self.room = room
        self.actor = actor
        self.seen_ids = seen_ids  # the characters the viewer sees
        self.rules = rules

    @property
    def all_seeing(self) -> bool:
        return self.actor.is_gm  # the GM sees every character (views)

    def scrub(self, reason: Reason) -> Reason:
        """A reason without naming a character the viewer does not see."""
        out = reason
        for key in CHAR_VALUES:
            cid = reason.get(key)
            if cid is not None and cid not in self.seen_ids:
                out = {**out, key: None}
        return out

    def adapt(self, entry: Entry, op: str, cid: str | None) -> Entry:
        """The shared rule entry as this viewer gets it: choices among the
        characters they see, reasons that name nobody they do not, no die
        roll to supply unless GM (X1). The same object for the GM, and from
        one call to the next while nothing it depends on changed (the
        entry, and what the viewer sees: the same object while equal)."""
        if self.all_seeing:
            return entry
        key = (self.actor.user, op, cid)
        adapted = self.rules.adapted
        found = adapted.get(key)
        seen = self.seen_ids
        if found is not None:
            if found[0] is entry and found[1] is seen:
                return found[2]  # type: ignore[no-any-return]
            if found[3] is entry and found[4] is seen:  # the one before (T1: a turn back)
                adapted[key] = (entry, seen, found[5], found[0], found[1], found[2])
                return found[5]  # type: ignore[no-any-return]
            out = self._adapt(entry, op)
            adapted[key] = (entry, seen, out, found[0], found[1], found[2])
            return out
        out = self._adapt(entry, op)
        adapted[key] = (entry, seen, out, None, None, None)
        return out

    def _adapt(self, entry: Entry, op: str) -> Entry:
        out = dict(entry)
        if "why" in out:
            out["why"] = self.scrub(out["why"])
        if "free" in out and "roll" in out["free"]:
            out["free"] = [n for n in out["free"] if n != "roll"]
            if not out["free"]:
                del out["free"]
        choices = out.get("choices")
        if choices:
            kept = {
                name: [v for v in values if v in self.seen_ids] if name in CHAR_CHOICES else values
                for name, values in choices.items()
            }
            for values in kept.values():
                if not values:  # nobody this viewer sees
                    return {"args": out["args"], "why": {"key": f"{op}_nobody"}}
            out["choices"] = kept
        if "refused" in out:
            out["refused"] = {
                name: {value: self.scrub(r) for value, r in no.items()}
                for name, no in out["refused"].items()
            }
        return out


def _why(*checks: Callable[[], None]) -> Reason | None:
    """The first refusal among `checks` (run in order), as data, or None."""
    try:
        for check in checks:
            check()
    except Refused as refused:
        return refused.reason()
    return None


def _refusal(tests: tuple[Test, ...], facts: Facts, a: Args) -> Reason | None:
    """The first refusal of the checks `tests` on the args `a`, or None."""
    try:
        for test in tests:
            test(facts, a)
    except Refused as refused:
        return refused.reason()
    return None


def _entry(
    spec: Op,
    fixed: dict[str, Any],
    why: Reason | None = None,
    choices: dict[str, list[Any]] | None = None,
    refused: dict[str, dict[str, Reason]] | None = None,
    cost: dict[str, int] | None = None,
) -> Entry:
    out: Entry = {"args": fixed}
    if why is not None:
        out["why"] = why
        return out
    free = [n for n in spec.args if n not in fixed and n not in (choices or ())]
    if free:
        out["free"] = free
    if choices:
        out["choices"] = choices
    if refused:
        out["refused"] = refused
    if cost:
        out["cost"] = cost
    return out


class _Offer:
    """The parts of an op's declaration its offer reads, sorted once."""

    def __init__(self, op: Op) -> None:
        self.op = op
        self.name = op.name
        self.choose = op.offer.choose
        # Args as `check_args` cleans them: each at its default.
        self.defaults: Args = {name: arg.default for name, arg in op.args.items()}
        self.at_all: tuple[Test, ...] = tuple(c.test for c in op.checks if c.of is None)
        self.per_value = tuple(c.test for c in op.checks if c.of is not None and not c.alone)
        self.alone = tuple(c.test for c in op.checks if c.alone)
        stray = {c.of for c in op.checks if c.of is not None} - {self.choose}
        if stray:
            raise ValueError(f"{op.name}: its offer lists no values of {sorted(stray)}")
        if any(c.of is None for c in op.checks if c.alone):
            raise ValueError(f"{op.name}: an `alone` check must be of an argument (`of`)")
        self.char_values = self.choose in op.chars
        self.user_values = self.choose in op.users
        kind = op.args[self.choose].check if self.choose is not None else None
        # A list of characters (a combat's order) is tried one character at a time.
        self.listed = isinstance(kind, Kind) and kind.type == "list"
        self.options: tuple[str, ...] = ()
        if self.choose is not None and not (self.char_values or self.user_values):
            if not (isinstance(kind, Kind) and kind.type == "choice"):
                raise ValueError(f"{op.name}: {self.choose} is no character, user or choice")
            self.options = kind.options
        # D6: a character argument that may not name the dead.
        self.alive = self.char_values and not op.on_dead

    def value(self, cid: str) -> Any:
        """The argument's value naming one character."""
        return [cid] if self.listed else cid

    def accepts(self, facts: Facts, a: Args, c: Character, tests: tuple[Test, ...]) -> bool:
        """Is `c` an accepted value of the chosen argument (with `a` the rest)?"""
        try:
            if self.alive:
                check_alive(self.op, c)
            if tests:
                assert self.choose is not None
                b = {**a, self.choose: self.value(c.id)}
                for test in tests:
                    test(facts, b)
        except Refused:
            return False
        return True


class SubjectOffer(_Offer):
    """An op acting for one character (`Subject.arg`): offered under that
    character when the viewer may send it for them."""

    def __init__(self, op: Op) -> None:
        super().__init__(op)
        offer = op.offer
        assert isinstance(offer, Subject)
        self.arg = offer.arg
        self.cost = offer.cost
        self.reads = READS[offer.reads]
        self.reads_combat = self.reads in COMBAT_READS

    def rule(self, table: RuleTable, room: Room, c: Character) -> Entry:
        """What the rules say of this op for `c`, whoever asks."""
        op = self.op
        fixed = {self.arg: c.id}
        a = {**self.defaults, self.arg: c.id}
        facts = table.facts
        try:
            check_alive(op, c)
            for test in self.at_all:
                test(facts, a)
        except Refused as no_go:
            return _entry(op, fixed, no_go.reason())
        choices: dict[str, list[Any]] = {}
        refused: dict[str, dict[str, Reason]] = {}
        name = self.choose
        if self.options:
            assert name is not None
            ok, no = [], {}
            for value in self.options:
                reason = _refusal(self.per_value, facts, {**a, name: value})
                if reason is None:
                    ok.append(value)
                else:
                    no[value] = reason
            if not ok:  # refused whatever the choice: the first one's reason
                return _entry(op, fixed, no[self.options[0]])
            choices[name] = ok
            if no:
                refused[name] = no
        elif name is not None:
            # The candidates passing the checks that read them alone, found
            # once per generation of the table (not once per subject), so a
            # 200-character room tries each subject with the few of them.
            pool = table.pool(
                room, self.name, lambda o: self.accepts(facts, self.defaults, o, self.alone)
            )
            found = [o.id for o in pool if self.accepts(facts, a, o, self.per_value)]
            if not found:
                return _entry(op, fixed, {"key": f"{self.name}_nobody"})
            choices[name] = found
        cost = None if self.cost is None else self.cost(c)
        return _entry(op, fixed, None, choices, refused, cost)

    def one(self, scan: _Scan, c: Character) -> Entry | None:
        """This viewer's entry for `c`, or None when it is not theirs to send."""
        op = self.op
        room, actor = scan.room, scan.actor
        if not actor.is_gm:
            # authorize reads, of the op, its role; of the room, the owners
            # of the subject and of its healer (UNTEND): kept while they are.
            healer = room.characters.get(c.healer) if c.healer is not None else None
            owners = (c.owner, None if healer is None else healer.owner)
            who = (actor.user, op.role, self.arg, c.id)
            found = scan.rules.allowed.get(who)
            if found is not None and found[0] == owners:
                ok = found[1]
            else:
                a = {**self.defaults, self.arg: c.id}
                ok = not _why(lambda: authorize(room, op, a, actor, self.name))
                scan.rules.allowed[who] = (owners, ok)
            if not ok:
                return None  # not this viewer's to send: no button at all
        table = scan.rules
        entry = table.entry(
            (self.name, c.id), self.reads(table, c), lambda: self.rule(table, room, c)
        )
        return scan.adapt(entry, self.name, c.id)


class RoomOffer(_Offer):
    """An op about the room as a whole (the GM's tools), offered in `room`."""

    def rule(self, table: RuleTable, room: Room) -> Entry:
        op = self.op
        facts = table.facts
        a = self.defaults
        why = _refusal(self.at_all, facts, a)
        if op.bounds is not None and why is None:
            bounds = op.bounds
            why = _why(lambda: bounds(room, dict(a)))
        if why is not None:
            return _entry(op, {}, why)
        choices: dict[str, list[Any]] = {}
        name = self.choose
        if name is not None:
            if self.char_values:
                tests = self.alone + self.per_value
                values = [c.id for c in room.ordered() if self.accepts(facts, a, c, tests)]
            else:
                values = [
                    uid
                    for uid in room.users
                    if _refusal(self.per_value, facts, {**a, name: uid}) is None
                ]
            if not values:
                return _entry(op, {}, {"key": f"{self.name}_nobody"})
            choices[name] = values
        return _entry(op, {}, None, choices)

    def entry(self, scan: _Scan) -> Entry | None:
        """This viewer's entry, or None when it is not theirs to send."""
        room, actor = scan.room, scan.actor
        if _why(lambda: authorize(room, self.op, dict(self.defaults), actor, self.name)):
            return None
        table = scan.rules
        entry = table.entry((self.name, None), table.room_key(room), lambda: self.rule(table, room))
        return scan.adapt(entry, self.name, None)


def _offer(op: Op) -> SubjectOffer | RoomOffer:
    if isinstance(op.offer, WholeRoom):
        return RoomOffer(op)
    return SubjectOffer(op)


# Every op of the table and its offer, built from its declaration.
OFFERS: dict[str, SubjectOffer | RoomOffer] = {name: _offer(op) for name, op in OPS.items()}

# Choices that are character ids (filtered by what the viewer sees).
CHAR_CHOICES = frozenset(o.choose for o in OFFERS.values() if o.char_values)
