"""The state's plain-dict form (`Room.to_dict`), typed where it crosses
modules: the server stores, diffs, views and sends it, and the clients
mirror it (docs/protocol.md, "hello -> welcome"). These TypedDicts are that shape, key by
key; a state read back from storage may lack the keys added since it was
written (`Room.from_dict` fills their defaults), so readers of stored
dicts take a `Mapping`."""

from __future__ import annotations

from typing import TypedDict


class ActivityDict(TypedDict):
    kind: str
    ends: int


class NextCheckDict(TypedDict):
    """L1's next check: its world second, its number (1-based), of how many."""

    at: int
    n: int
    of: int


class CharacterDict(TypedDict):
    seq: int
    name: str
    owner: str | None
    shown: str
    level: int
    pv: int
    pv_max: int
    pe: int
    pe_max: int
    pp: int
    pp_max: int
    pe_max_base: int
    abilities: dict[str, int]
    ability_damage: dict[str, int]
    mods: dict[str, int]
    medicine: int
    condition: str
    nonlethal: bool
    stable_since: int | None
    stability_checks: int
    next_check: NextCheckDict | None
    healer: str | None
    activity: ActivityDict | None
    regained_this_turn: bool
    dying_next: int | None
    dying_fresh: bool
    regained_at: int | None


class CombatDict(TypedDict):
    order: list[str]
    turn: int
    round: int


class UserDict(TypedDict):
    name: str
    role: str


class StateDict(TypedDict):
    room: str
    name: str
    clock: int
    round_seconds: int
    combat: CombatDict | None
    skip_dead: bool
    initiative: dict[str, int]
    queued_rolls: list[int]
    users: dict[str, UserDict]
    characters: dict[str, CharacterDict]
    next_seq: int
    next_user: int


def user_of(state: StateDict, user: str | None) -> UserDict | None:
    """The room's entry for `user` (None: no such user, or no user)."""
    return None if user is None else state["users"].get(user)


def role_of(state: StateDict, user: str | None) -> str | None:
    """`user`'s role in the room, None if not one of its users."""
    found = user_of(state, user)
    return None if found is None else found["role"]
