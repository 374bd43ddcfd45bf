"""The model: a room's state as attrs classes, and its plain-dict form.

The dict form (`to_dict` / `from_dict`) is exactly the state the protocol
sends (docs/protocol.md, "hello -> welcome") plus the few fields the rules
must remember (marked "memory" below):
the server diffs it, stores it and sends it, and clients mirror it. Derived
values (`mods`, the effective `pe_max`, `next_check`: when L1's next check
falls) are written into the dict so that every client shows the same
numbers and none works a rule out again, and are recomputed, never read, by
`from_dict`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import attrs

ABILITIES = ("str", "dex", "con", "int", "wis", "cha")
CONDITIONS = ("conscious", "dying", "stable", "dead")
ROLES = ("gm", "player", "observer")
# What other viewers see of a character (views, rules/view.py): everything,
# a status line (name, level, owner, condition) or nothing at all.
SHOWN = ("full", "status", "hidden")
REST_KINDS = ("short", "night", "bed")

HOUR = 3600
# docs/rules.md, "Time and turns": a round lasts 6 s of world time by default.
DEFAULT_ROUND_SECONDS = 6
STABILITY_CHECKS = 8  # L1/L2: a stable character's checks at +1 h ... +8 h

# From this many characters up, `Room.to_dict(since=..., touched=...)` copies
# the old characters map and redoes only the touched ones, instead of
# walking every character; below, the walk is as cheap (measured with
# bench/rules_bench.py: the two meet around a dozen characters).
TOUCHED_CUTOVER = 16


def default_shown(owner_role: str | None) -> str:
    """The `shown` a character gets when the GM does not choose: a player's
    character is on the table for all to see (`full`); the GM's NPCs, and a
    character nobody owns, show only their status line, so that a GM who
    forgets the setting leaks no NPC's numbers."""
    return "full" if owner_role == "player" else "status"


def ability_mod(score: int, damage: int) -> int:
    """A1: (score - 10) // 2 - damage // 2."""
    return (score - 10) // 2 - damage // 2


def next_stability_check(
    condition: str, stable_since: int | None, checks: int
) -> tuple[int, int] | None:
    """L1: the next hourly Constitution check of a character (its condition,
    when it became stable, the checks it made since) as (its world second,
    its 1-based number), or None: not stable, or its STABILITY_CHECKS made."""
    if condition != "stable" or stable_since is None or checks >= STABILITY_CHECKS:
        return None
    return stable_since + HOUR * (checks + 1), checks + 1


@attrs.frozen
class Activity:
    """A rest in progress (R1-R3): what kind, and the world second it completes."""

    kind: str
    ends: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ends": self.ends}


@attrs.define
class Character:
    id: str
    seq: int
    name: str
    owner: str | None
    level: int
    pv: int
    pv_max: int
    pe: int
    pe_max_base: int
    pp: int
    pp_max: int
    abilities: dict[str, int]
    ability_damage: dict[str, int]
    medicine: int
    condition: str = "conscious"
    nonlethal: bool = False
    stable_since: int | None = None
    stability_checks: int = 0
    healer: str | None = None
    activity: Activity | None = None
    regained_this_turn: bool = False
    # memory: the world second of the next out-of-combat PP loss (D5); None
    # while not dying, or while dying inside a running combat's order.
    dying_next: int | None = None
    # memory: started dying during its own current turn, so that turn's end
    # costs no PP (D5 ruling).
    dying_fresh: bool = False
    # memory: the world second from which the S3/S4 allowance counts a full
    # round outside combat (S4); None when the allowance is unused or runs
    # on turns.
    regained_at: int | None = None
    # Views: what viewers who do not own it see (SHOWN). Keyword-only and
    # required: its default depends on the owner's role (`default_shown`),
    # which only the caller knows.
    shown: str = attrs.field(kw_only=True)

    def mod(self, ability: str) -> int:
        return ability_mod(self.abilities[ability], self.ability_damage[ability])

    @property
    def con_mod_lost(self) -> int:
        """A2: points of Constitution modifier lost to Constitution damage."""
        return self.ability_damage["con"] // 2

    @property
    def pe_max(self) -> int:
        """A2: the sheet's pe_max less `level` per point of Con modifier lost."""
        return max(0, self.pe_max_base - self.level * self.con_mod_lost)

    def next_check_dict(self) -> dict[str, int] | None:
        """The dict form's `next_check`: L1's next check, derived (so that no
        client works the schedule out again), or None."""
        if self.condition != "stable":  # most characters: no call
            return None
        found = next_stability_check(self.condition, self.stable_since, self.stability_checks)
        if found is None:
            return None
        return {"at": found[0], "n": found[1], "of": STABILITY_CHECKS}

    def copy(self) -> Character:
        """A copy the engine may change (`Ctx.edit`). Built from the field
        list rather than `attrs.evolve`, which introspects the class on every
        call (half again slower, and this runs for each character a command
        touches); the two dicts are the only mutable parts (Activity is frozen)."""
        c = Character(**{name: getattr(self, name) for name in _CHARACTER_FIELDS})
        c.abilities = dict(self.abilities)
        c.ability_damage = dict(self.ability_damage)
        return c

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "name": self.name,
            "owner": self.owner,
            "shown": self.shown,
            "level": self.level,
            "pv": self.pv,
            "pv_max": self.pv_max,
            "pe": self.pe,
            "pe_max": self.pe_max,
            "pp": self.pp,
            "pp_max": self.pp_max,
            "pe_max_base": self.pe_max_base,
            "abilities": dict(self.abilities),
            "ability_damage": dict(self.ability_damage),
            "mods": {a: self.mod(a) for a in ABILITIES},
            "medicine": self.medicine,
            "condition": self.condition,
            "nonlethal": self.nonlethal,
            "stable_since": self.stable_since,
            "stability_checks": self.stability_checks,
            "next_check": self.next_check_dict(),
            "healer": self.healer,
            "activity": None if self.activity is None else self.activity.to_dict(),
            "regained_this_turn": self.regained_this_turn,
            "dying_next": self.dying_next,
            "dying_fresh": self.dying_fresh,
            "regained_at": self.regained_at,
        }

    @classmethod
    def from_dict(cls, cid: str, d: dict[str, Any], owner_role: str | None = None) -> Character:
        """`owner_role` is the owner's role in the room: a state stored before
        `shown` existed gets the default that role gives (`default_shown`)."""
        act = d.get("activity")
        return cls(
            id=cid,
            seq=d["seq"],
            name=d["name"],
            owner=d.get("owner"),
            level=d["level"],
            pv=d["pv"],
            pv_max=d["pv_max"],
            pe=d["pe"],
            pe_max_base=d.get("pe_max_base", d["pe_max"]),
            pp=d["pp"],
            pp_max=d["pp_max"],
            abilities=dict(d["abilities"]),
            ability_damage=dict(d.get("ability_damage") or dict.fromkeys(ABILITIES, 0)),
            medicine=d["medicine"],
            condition=d.get("condition", "conscious"),
            nonlethal=d.get("nonlethal", False),
            stable_since=d.get("stable_since"),
            stability_checks=d.get("stability_checks", 0),
            healer=d.get("healer"),
            activity=None if act is None else Activity(act["kind"], act["ends"]),
            regained_this_turn=d.get("regained_this_turn", False),
            dying_next=d.get("dying_next"),
            dying_fresh=d.get("dying_fresh", False),
            regained_at=d.get("regained_at"),
            shown=d.get("shown") or default_shown(owner_role),
        )


_CHARACTER_FIELDS = tuple(f.name for f in attrs.fields(Character))


@attrs.define
class Combat:
    order: list[str]
    turn: int = 0
    round: int = 1

    @property
    def current(self) -> str:
        return self.order[self.turn]

    def to_dict(self) -> dict[str, Any]:
        return {"order": list(self.order), "turn": self.turn, "round": self.round}


@attrs.define
class User:
    name: str
    role: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role}


@attrs.define
class Room:
    room: str
    name: str
    clock: int = 0
    round_seconds: int = DEFAULT_ROUND_SECONDS
    combat: Combat | None = None
    # T3: are dead combatants passed over (Foundry's "skip defeated")? A room
    # setting (update_room), on by default.
    skip_dead: bool = True
    # T4: the running combat's initiative totals by combatant (only those
    # rolled); empty without a combat. GM-only in views (a total is a number
    # of the sheet; the order itself shows the ranks).
    initiative: dict[str, int] = attrs.Factory(dict)
    queued_rolls: list[int] = attrs.Factory(list)
    users: dict[str, User] = attrs.Factory(dict)
    characters: dict[str, Character] = attrs.Factory(dict)
    # memory: counters for the next character seq and user id, so ids are
    # never reused within a room (a reused id would confuse retries and logs).
    next_seq: int = 1
    next_user: int = 1
    # Ids of the characters that may have a timed rule pending (clock.py's
    # scheduler asks only these): a superset, kept by `Ctx.edit` (a changed
    # character joins it) and pruned by the scheduler. None: not known yet
    # (a room read from a dict), the first advance asks every character.
    # Not part of the state: no equality, no dict form.
    timed: set[str] | None = attrs.field(default=None, eq=False, repr=False)

    def copy(self) -> Room:
        """A copy-on-write copy for one command: the characters map is new
        but holds the same Character objects, which the engine copies one
        by one the first time it changes them (`Ctx.edit`); the users map is
        shared until a user command replaces it. Copying only what a command
        touches keeps its cost independent of the table's size."""
        return Room(
            self.room,
            self.name,
            self.clock,
            self.round_seconds,
            None
            if self.combat is None
            else Combat(list(self.combat.order), self.combat.turn, self.combat.round),
            self.skip_dead,
            dict(self.initiative),
            list(self.queued_rolls),
            self.users,
            dict(self.characters),
            self.next_seq,
            self.next_user,
            None if self.timed is None else set(self.timed),
        )

    def in_combat(self, cid: str) -> bool:
        """Is this character in the running combat's order?"""
        return self.combat is not None and cid in self.combat.order

    def ordered(self) -> list[Character]:
        """Characters in character order (seq), which breaks every tie."""
        return sorted(self.characters.values(), key=lambda c: c.seq)

    def to_dict(
        self,
        since: tuple[Room, dict[str, Any]] | None = None,
        touched: Collection[str] | None = None,
    ) -> dict[str, Any]:
        """The dict form. With `since=(old_room, old_dict)`, a character equal
        to its old self reuses its old dict object, so that `diff` skips it
        at once (`is`): the server's per-command cost then follows what
        changed, not the size of the table. With `touched` too (the ids of
        the characters a command may have changed, added or removed:
        `Outcome.touched`; every other one is the very object of
        `old_room`), a big table's map is the old one copied and only those
        redone, with no walk over the others."""
        old = since[0] if since is not None else None
        old_dict: dict[str, Any] = since[1] if since is not None else {}
        old_chars = old.characters if old is not None else {}
        old_dicts = old_dict.get("characters", {})
        if (
            touched is not None
            and len(old_chars) >= TOUCHED_CUTOVER
            and len(old_dicts) == len(old_chars)
        ):
            chars = dict(old_dicts)
            for cid in touched:
                c = self.characters.get(cid)
                if c is None:
                    chars.pop(cid, None)
                    continue
                before = old_chars.get(cid)
                if before is None or not (before is c or before == c) or cid not in old_dicts:
                    chars[cid] = c.to_dict()
        else:
            chars = {}
            for cid, c in self.characters.items():
                before = old_chars.get(cid)
                if before is not None and (before is c or before == c) and cid in old_dicts:
                    chars[cid] = old_dicts[cid]
                else:
                    chars[cid] = c.to_dict()
        combat = None if self.combat is None else self.combat.to_dict()
        if combat is not None and combat == old_dict.get("combat"):
            combat = old_dict["combat"]
        if old is not None and old.users is self.users and "users" in old_dict:
            users = old_dict["users"]
        else:
            users = {uid: u.to_dict() for uid, u in self.users.items()}
        # Equal to the old ones (nearly every command): the very objects,
        # which `diff` skips at once.
        initiative = old_dict.get("initiative")
        if initiative is None or initiative != self.initiative:
            initiative = dict(self.initiative)
        queued = old_dict.get("queued_rolls")
        if queued is None or queued != self.queued_rolls:
            queued = list(self.queued_rolls)
        return {
            "room": self.room,
            "name": self.name,
            "clock": self.clock,
            "round_seconds": self.round_seconds,
            "combat": combat,
            "skip_dead": self.skip_dead,
            "initiative": initiative,
            "queued_rolls": queued,
            "users": users,
            "characters": chars,
            "next_seq": self.next_seq,
            "next_user": self.next_user,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Room:
        combat = d.get("combat")
        users = {uid: User(u["name"], u["role"]) for uid, u in d.get("users", {}).items()}
        return cls(
            room=d["room"],
            name=d["name"],
            clock=d.get("clock", 0),
            round_seconds=d.get("round_seconds", DEFAULT_ROUND_SECONDS),
            combat=None
            if combat is None
            else Combat(list(combat["order"]), combat["turn"], combat["round"]),
            skip_dead=d.get("skip_dead", True),
            initiative=dict(d.get("initiative") or {}),
            queued_rolls=list(d.get("queued_rolls", [])),
            users=users,
            characters={
                cid: Character.from_dict(cid, c, _role(users, c.get("owner")))
                for cid, c in d.get("characters", {}).items()
            },
            next_seq=d.get("next_seq", 1),
            next_user=d.get("next_user", 1),
        )


def _role(users: dict[str, User], uid: str | None) -> str | None:
    user = users.get(uid) if uid is not None else None
    return None if user is None else user.role


def to_dict(room: Room) -> dict[str, Any]:
    return room.to_dict()


def from_dict(d: dict[str, Any]) -> Room:
    return Room.from_dict(d)
