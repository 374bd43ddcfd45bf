"""Views: what each viewer may see of a room (per-role secrets).

The server holds one state; every frame it sends a viewer (welcome, patch,
sync reply) must carry only that viewer's *view* of it. Like boardgame.io's
`playerView`, the view is a pure function of the state dict:

    view_state(state, viewer) -> dict

and everything else here follows from it, so that a viewer's mirror built
from their patches always equals a fresh welcome for them:

- `view_patch(before, after, ops, events, viewer)`: the viewer's patch is the
  diff of their two views (`view_ops`, equal to `rules.patch.diff` of the
  whole views but computed from what the patch touches) plus their events
  (`view_events`);
- `restricted(ops, events, before, after)`: False when the patch touches
  nothing any viewer sees differently from the GM, so that the server can
  encode the plain patch once and send it to everyone (the property tests
  check that it then equals every viewer's own patch);
- `view_class(state, viewer)` / `patch_class(before, after, viewer)`:
  viewers with equal keys get equal views (and patches), so one encoding
  serves each class.

Each character has `shown` ("full", "status" or "hidden"). The GM and admin
see everything; a player sees their own characters in full and the others
as `shown` says; an observer sees every character as `shown` says. A
`status` character shows only `STATUS_FIELDS`; a `hidden` one is absent:
from `characters`, from the `combat.order` shown (whose `turn` is then an
index into that shorter order, or None while a hidden character acts), from
the events, and from other characters' `healer`. `queued_rolls` (the GM's
pre-rolled dice), the room's id counter `next_seq` (which would count
hidden characters) and the initiative totals are the GM's only. A character
seen in full whose healer is hidden shows `healer: null` and `tended: true`:
someone tends it, unseen.

Pure: no input is ever mutated; a view shares the unchanged parts (a full
character's dict, the users map) with the state, so diffing two views costs
what changed, like diffing two states.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from rules.model import SHOWN, default_shown
from rules.patch import Op, diff

FULL, STATUS, HIDDEN = SHOWN
# Lower is more secret; an event about two characters follows the lower one.
_RANK = {HIDDEN: 0, STATUS: 1, FULL: 2}
_BY_RANK = {r: level for level, r in _RANK.items()}

# What a `status` character shows (docs/protocol.md, "Views": its id is the map key;
# its place in combat.order is kept). No number but the level.
STATUS_FIELDS = ("name", "owner", "shown", "level", "condition")
# Top-level state keys only the GM and admin see: the queued physical dice
# (X1), the seq counter (it grows with every character, hidden ones too), and
# the initiative totals (T4: numbers of every combatant's sheet and dice; the
# order shows the ranks, and each player gets their own roll's event).
GM_ONLY_KEYS = frozenset({"queued_rolls", "next_seq", "initiative"})
# Event kinds only the GM and admin receive.
GM_ONLY_EVENTS = frozenset({"rolls_queued"})
# Event fields that name a character: the actor (roller, healer...) and the
# target (first aid's and tending's patient).
CHAR_KEYS = ("char", "patient")
# What an event about a `status` character keeps (docs/protocol.md, "Views"): its
# kind and character, and for a change of condition, what changed and why.
STATUS_EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "condition": ("kind", "char", "from", "to", "cause"),
    "character": ("kind", "char", "change", "name", "fields"),
}
STATUS_EVENT_DEFAULT = ("kind", "char")
# The fields of a `combat` event that list character ids (combat_start's and
# set_order's `order`, set_order's `joined` and `left`): hidden ids leave them.
COMBAT_ID_LISTS = ("order", "joined", "left")

# A field only views have: on a character seen in full whose healer is hidden
# from the viewer (its `healer` then shows null): "someone you cannot see
# tends it".
TENDED_UNSEEN = "tended"

VIEWER_ROLES = ("gm", "admin", "player", "observer")
ALL_SEEING = frozenset({"gm", "admin"})
# view_class keys: the GM's and admin's class, and the class of every viewer
# whose view is the plain public one (observers, players owning no character
# that others see less of).
CLASS_ALL = "all"
CLASS_PUBLIC = "public"


@attrs.frozen
class Viewer:
    """Who receives a frame: a user id (None for the admin, or a viewer with
    no user) and a role: "gm", "admin", "player" or "observer"."""

    user: str | None
    role: str

    def __attrs_post_init__(self) -> None:
        if self.role not in VIEWER_ROLES:
            raise ValueError(f"unknown viewer role {self.role!r}")

    @property
    def sees_all(self) -> bool:
        return self.role in ALL_SEEING


def level_for(role: str, user: str | None, owner: str | None, shown: str) -> str:
    """How a viewer of `role` and `user` sees a character owned by `owner`
    with setting `shown`: the GM and admin see all; a player sees their own
    characters in full; anyone else sees what `shown` says. An unknown
    `shown` (never written by the engine) counts as hidden."""
    if role in ALL_SEEING:
        return FULL
    if role == "player" and user is not None and owner == user:
        return FULL
    return shown if shown in _RANK else HIDDEN


def shown_of(char: dict[str, Any], users: dict[str, Any]) -> str:
    """A character dict's `shown`. A state written before `shown` existed has
    none: it then gets the default of its owner's role, as `from_dict` does."""
    shown = char.get("shown")
    if isinstance(shown, str):
        return shown
    owner = char.get("owner")
    user = users.get(owner) if isinstance(owner, str) else None
    return default_shown(None if user is None else user.get("role"))


def _level(char: dict[str, Any], viewer: Viewer, users: dict[str, Any]) -> str:
    return level_for(viewer.role, viewer.user, char.get("owner"), shown_of(char, users))


class _Levels:
    """One viewer's levels of one state's characters, computed on demand
    (a patch needs only the few it touches); HIDDEN for an unknown id."""

    __slots__ = ("chars", "memo", "status", "users", "viewer")

    def __init__(self, state: dict[str, Any], viewer: Viewer, status: Memo | None = None) -> None:
        self.chars: dict[str, Any] = state.get("characters") or {}
        self.users: dict[str, Any] = state.get("users") or {}
        self.viewer = viewer
        self.memo: dict[str, str] = {}
        self.status = status  # status views to share (new_memo), or None

    def get(self, cid: Any) -> str:
        level = self.memo.get(cid)
        if level is None:
            c = self.chars.get(cid)
            level = HIDDEN if c is None else _level(c, self.viewer, self.users)
            self.memo[cid] = level
        return level


# A memo of status views (`Memo`): character dict id -> (that dict, its view).
Memo = dict[int, tuple[dict[str, Any], dict[str, Any]]]


def new_memo() -> Memo:
    """A memo for `view_state`/`view_patch` calls over states that do not
    change while it lives (the server's: a change makes new dicts). One
    status dict then serves every view of a character, and diffing two
    views skips an unchanged one by identity. A client's mirror, changed in
    place, must not use one."""
    return {}


def _status(char: dict[str, Any], memo: Memo | None = None) -> dict[str, Any]:
    if memo is not None:
        cached = memo.get(id(char))
        if cached is not None and cached[0] is char:
            return cached[1]
    out = {k: char[k] for k in STATUS_FIELDS if k in char}
    out["shown"] = STATUS  # also for an old state without the field
    if memo is not None:
        memo[id(char)] = (char, out)
    return out


def _view_char(c: dict[str, Any], level: str, levels: _Levels) -> dict[str, Any] | None:
    """One character as seen at `level` (None: not seen at all)."""
    if level == FULL:
        healer = c.get("healer")
        if healer is not None and levels.get(healer) == HIDDEN:
            # That someone tends it is known (its Constitution rolls carry the
            # bonus, `tend` is refused); who, is not (docs/views.md).
            return {**c, "healer": None, TENDED_UNSEEN: True}
        return c
    if level == STATUS:
        return _status(c, levels.status)
    return None


def _view_combat(combat: dict[str, Any], levels: _Levels) -> dict[str, Any]:
    """The combat without hidden characters: `turn` indexes the shorter
    order, None while a hidden character's turn runs. Unchanged (the same
    object) when nobody in the order is hidden."""
    order = combat.get("order") or []
    if all(levels.get(cid) != HIDDEN for cid in order):
        return combat
    turn = combat.get("turn")
    shown = [cid for cid in order if levels.get(cid) != HIDDEN]
    current = order[turn] if isinstance(turn, int) and 0 <= turn < len(order) else None
    return {**combat, "order": shown, "turn": shown.index(current) if current in shown else None}


def _view(
    state: dict[str, Any],
    levels: _Levels,
    keys: Iterable[str] | None = None,
    cids: set[str] | None = None,
) -> dict[str, Any]:
    """The view of `state`; with `keys` and `cids`, only those top-level
    keys and those characters (in the state's own order, so that diffing
    two such partial views gives the very ops of diffing the whole ones)."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        if key in GM_ONLY_KEYS:
            continue
        if key == "characters":
            if cids is not None and not cids:
                continue
            chars: dict[str, Any] = {}
            for cid, c in value.items():
                if cids is None or cid in cids:
                    seen = _view_char(c, levels.get(cid), levels)
                    if seen is not None:
                        chars[cid] = seen
            value = chars
        elif keys is not None and key not in keys:
            continue
        elif key == "combat" and value is not None:
            value = _view_combat(value, levels)
        out[key] = value
    return out


def view_state(state: dict[str, Any], viewer: Viewer, memo: Memo | None = None) -> dict[str, Any]:
    """The state as `viewer` may see it. The GM and admin get `state` itself
    (no copy); anyone else a new dict sharing every unchanged part with
    `state`, which is never mutated (`memo`: see `new_memo`)."""
    if viewer.sees_all:
        return state
    return _view(state, _Levels(state, viewer, memo))


def _event_levels(
    before: dict[str, Any], after: dict[str, Any], viewer: Viewer
) -> Callable[[str], str]:
    """A character's level for the events of one patch: the lower of its
    levels before and after (a character hidden, or shown, by this very
    patch leaks nothing of the time it was hidden); HIDDEN if it is in
    neither state."""
    b, a = _Levels(before, viewer), _Levels(after, viewer)

    def level(cid: str) -> str:
        if cid not in b.chars:
            return a.get(cid)
        if cid not in a.chars:
            return b.get(cid)
        return _BY_RANK[min(_RANK[b.get(cid)], _RANK[a.get(cid)])]

    return level


def view_events(
    events: list[dict[str, Any]],
    before: dict[str, Any],
    after: dict[str, Any],
    viewer: Viewer,
) -> list[dict[str, Any]]:
    """The events of the patch `before` -> `after` that `viewer` may see
    (docs/views.md has the table). The GM and admin get `events` itself; an
    event kept unchanged is the same object."""
    if viewer.sees_all:
        return events
    level = _event_levels(before, after, viewer)
    out: list[dict[str, Any]] = []
    for e in events:
        kind = e.get("kind", "")
        if kind in GM_ONLY_EVENTS:
            continue
        refs = [e[k] for k in CHAR_KEYS if e.get(k) is not None]
        if refs:
            lowest = min(_RANK[level(cid)] for cid in refs)
            if lowest == _RANK[HIDDEN]:
                continue
            if lowest == _RANK[STATUS]:
                keep = STATUS_EVENT_FIELDS.get(kind, STATUS_EVENT_DEFAULT)
                if any(k not in keep for k in e):  # else kept whole: the same object
                    e = {k: e[k] for k in keep if k in e}
                if isinstance(e.get("fields"), list):
                    shown = [f for f in e["fields"] if f in STATUS_FIELDS]
                    if not shown:
                        continue  # a correction of what its status does not show
                    if shown != e["fields"]:
                        e = {**e, "fields": shown}
            elif kind == "turn" and "turn" in e and after.get("combat") is not None:
                # The turn index of the viewer's shorter order (as in their state).
                seen = _view_combat(after["combat"], _Levels(after, viewer))
                if seen is not after["combat"]:
                    e = {**e, "turn": seen["turn"]}
        elif kind == "combat":
            # `order`, and set_order's `joined` and `left`: ids only.
            lists = {
                k: e[k]
                for k in COMBAT_ID_LISTS
                if isinstance(e.get(k), list) and any(level(cid) == HIDDEN for cid in e[k])
            }
            if lists:
                e = {**e, **{k: [c for c in ids if level(c) != HIDDEN] for k, ids in lists.items()}}
        out.append(e)
    return out


def view_patch(
    before: dict[str, Any],
    after: dict[str, Any],
    ops: list[Op],
    events: list[dict[str, Any]],
    viewer: Viewer,
    memo: Memo | None = None,
) -> tuple[list[Op], list[dict[str, Any]]]:
    """`viewer`'s (ops, events) for the patch `ops`/`events` that turned the
    state `before` into `after`: the ops of diffing their two views, and
    their events. The plain patch itself (the same objects) for the GM and
    admin, and for anyone when the patch is not `restricted`. May be empty:
    the frame still carries its version."""
    if viewer.sees_all or not restricted(ops, events, before, after):
        return ops, events
    seen_ops = view_ops(before, after, ops, viewer, memo)
    seen_events = view_events(events, before, after, viewer)
    if not seen_ops:
        seen_events = [unnamed_undo(e) for e in seen_events]
    return seen_ops, seen_events


def unnamed_undo(event: dict[str, Any]) -> dict[str, Any]:
    """An undo the viewer saw nothing of (its ops, for them, are none: it
    reverted the GM's queued dice, or what a hidden character did) names no
    op: "Undid: queued dice by Maya" told players of the GM's secret queue.
    It keeps the version it undid and who sent that, as every version's
    sender is public. Any other event comes back as it is."""
    if event.get("kind") != "undo" or "op" not in event:
        return event
    return {k: x for k, x in event.items() if k != "op"}


def view_ops(
    before: dict[str, Any],
    after: dict[str, Any],
    ops: list[Op],
    viewer: Viewer,
    memo: Memo | None = None,
) -> list[Op]:
    """`diff(view_state(before), view_state(after))`, in time that follows
    the patch rather than the table: only what `ops` touch can look
    different, plus what depends on a character whose level changed (the
    characters it tends, the combat order it is in)."""
    if viewer.sees_all:
        return ops
    keys: set[str] = set()
    cids: set[str] = set()
    for op in ops:
        path = op[1]
        if path[0] != "characters":
            keys.add(path[0])
        elif len(path) < 2:
            return diff(view_state(before, viewer, memo), view_state(after, viewer, memo))
        else:
            cids.add(path[1])
    b, a = _Levels(before, viewer, memo), _Levels(after, viewer, memo)
    moved = {cid for cid in cids if b.get(cid) != a.get(cid)}
    if moved:
        for chars in (b.chars, a.chars):
            cids.update(cid for cid, c in chars.items() if c.get("healer") in moved)
        for st in (before, after):
            combat = st.get("combat")
            if combat is not None and not moved.isdisjoint(combat.get("order") or ()):
                keys.add("combat")
    return diff(_view(before, b, keys, cids), _view(after, a, keys, cids))


def restricted(
    ops: list[Op],
    events: list[dict[str, Any]],
    before: dict[str, Any],
    after: dict[str, Any],
) -> bool:
    """Might some viewer's patch differ from this plain one? False only when
    provably not: every op and event concerns characters that everyone sees
    in full (before and after), and touches no GM-only key, no combat with a
    hidden character in it, and no `healer` naming a hidden character.
    Costs a few lookups per op and event, whatever the table's size."""
    bchars = before.get("characters") or {}
    achars = after.get("characters") or {}
    busers = before.get("users") or {}
    ausers = after.get("users") or {}
    order_hides: bool | None = None
    for op in ops:
        path = op[1]
        head = path[0]
        if head == "characters":
            if len(path) < 2:
                return True
            cid = path[1]
            b, a = bchars.get(cid), achars.get(cid)
            if (b is not None and shown_of(b, busers) != FULL) or (
                a is not None and shown_of(a, ausers) != FULL
            ):
                return True
            if len(path) == 2 or path[2] == "healer":
                for c in (b, a):
                    healer = None if c is None else c.get("healer")
                    if healer is not None and _hidden_somewhere(healer, before, after):
                        return True
        elif head in GM_ONLY_KEYS:
            return True
        elif head == "combat":
            if order_hides is None:
                order_hides = _order_hides(before, after)
            if order_hides:
                return True
    for e in events:
        kind = e.get("kind")
        if kind in GM_ONLY_EVENTS:
            return True
        for key in CHAR_KEYS:
            cid = e.get(key)
            if cid is None:
                continue
            b, a = bchars.get(cid), achars.get(cid)
            if (
                (b is None and a is None)
                or (b is not None and shown_of(b, busers) != FULL)
                or (a is not None and shown_of(a, ausers) != FULL)
            ):
                return True
        if kind == "turn" or kind == "combat":
            if order_hides is None:
                order_hides = _order_hides(before, after)
            if order_hides:
                return True
            if kind == "combat" and any(
                _hidden_somewhere(cid, before, after)
                for key in COMBAT_ID_LISTS
                for cid in e.get(key) or ()
            ):
                return True
    return False


def _hidden_somewhere(cid: Any, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Is `cid` hidden (from non-owners) in either state, or in neither?"""
    found = False
    for st in (before, after):
        c = (st.get("characters") or {}).get(cid)
        if c is not None:
            found = True
            if shown_of(c, st.get("users") or {}) == HIDDEN:
                return True
    return not found


def _order_hides(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Is a hidden character in the combat order, before or after?"""
    for st in (before, after):
        combat = st.get("combat")
        if combat is not None:
            for cid in combat.get("order") or ():
                if _hidden_somewhere(cid, before, after):
                    return True
    return False


def private_owners(state: dict[str, Any]) -> frozenset[str]:
    """The players who own a character that is not `full`: each of them has
    a view (and a view class) of their own; every other player and every
    observer has the public view."""
    users = state.get("users") or {}
    return frozenset(
        c["owner"]
        for c in (state.get("characters") or {}).values()
        if c.get("owner") is not None
        and (users.get(c["owner"]) or {}).get("role") == "player"
        and shown_of(c, users) != FULL
    )


def view_class(state: dict[str, Any], viewer: Viewer) -> Any:
    """A hashable key: viewers with equal keys have equal views of `state`.
    The GM and admin share one; a player owning a character that is not
    `full` has their own; every other player and every observer share the
    public one."""
    if viewer.sees_all:
        return CLASS_ALL
    if viewer.role == "player" and viewer.user is not None:
        users = state.get("users") or {}
        for c in (state.get("characters") or {}).values():
            if c.get("owner") == viewer.user and shown_of(c, users) != FULL:
                return ("player", viewer.user)
    return CLASS_PUBLIC


def patch_class(before: dict[str, Any], after: dict[str, Any], viewer: Viewer) -> Any:
    """A hashable key: viewers with equal keys get equal `view_patch`es for
    the patch `before` -> `after` (equal views of both states)."""
    b, a = view_class(before, viewer), view_class(after, viewer)
    return b if b == a else (b, a)


class PatchClasses:
    """`patch_class`, made exact for one patch: a player with a view of
    their own (owning a character that is not `full`) whom this patch does
    not concern gets the public view's patch, so shares its class.

    A room where every player owns a `status` patient has one view class
    per player; without this, every restricted patch (a hit on a status NPC)
    was rendered and encoded once per player, all but a few identical. What
    the patch concerns is gathered once (the characters its ops touch and
    their healers, the characters its events name, the combat order when it
    touches the combat); each viewer then costs a set intersection with the
    characters that viewer sees differently from the public (their own that
    are not `full`)."""

    __slots__ = ("_concerned", "_order", "_private", "after", "before")

    def __init__(
        self,
        before: dict[str, Any],
        after: dict[str, Any],
        ops: list[Op],
        events: list[dict[str, Any]],
    ) -> None:
        self.before, self.after = before, after
        self._private: tuple[dict[str, set[str]], dict[str, set[str]]] | None = None
        touched: set[Any] = set()
        whole_map = False
        combat = False
        for op in ops:
            path = op[1]
            if path[0] == "characters":
                if len(path) < 2:
                    whole_map = True  # the whole map: everyone's own
                    break
                cid = path[1]
                touched.add(cid)
                for st in (before, after):
                    c = (st.get("characters") or {}).get(cid)
                    if c is not None and c.get("healer") is not None:
                        touched.add(c["healer"])
            elif path[0] == "combat":
                combat = True
        concerned: set[Any] | None = None if whole_map else touched
        if concerned is not None:
            for e in events:
                for key in CHAR_KEYS:
                    if e.get(key) is not None:
                        concerned.add(e[key])
                kind = e.get("kind")
                if kind == "combat" or kind == "turn":
                    combat = True
                    for key in COMBAT_ID_LISTS:
                        if isinstance(e.get(key), list):
                            concerned.update(e[key])
        if concerned:
            # A character whose healer is touched shows it (or not) too.
            touched = set(concerned)
            for st in (before, after):
                for cid, c in (st.get("characters") or {}).items():
                    if c.get("healer") in touched:
                        concerned.add(cid)
        self._concerned = concerned
        if not combat:
            # A touched character in the combat order changes how viewers
            # see the order too (revealed or hidden there): as if the patch
            # touched the combat.
            for st in (before, after):
                fight = st.get("combat")
                if fight is not None and (
                    concerned is None or not concerned.isdisjoint(fight.get("order") or ())
                ):
                    combat = True
        order: set[Any] = set()
        if combat:
            for st in (before, after):
                if st.get("combat") is not None:
                    order.update(st["combat"].get("order") or ())
        self._order = order

    def _own_private(self) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """Owner -> their characters that are not `full`, in `before` and in
        `after` (one pass over each state, whatever the number of viewers)."""
        if self._private is None:
            maps: list[dict[str, set[str]]] = []
            for st in (self.before, self.after):
                found: dict[str, set[str]] = {}
                users = st.get("users") or {}
                for cid, c in (st.get("characters") or {}).items():
                    owner = c.get("owner")
                    if owner is not None and shown_of(c, users) != FULL:
                        found.setdefault(owner, set()).add(cid)
                maps.append(found)
            self._private = (maps[0], maps[1])
        return self._private

    def key(self, viewer: Viewer) -> Any:
        """`patch_class(before, after, viewer)` (computed from one pass over
        the states, not one per viewer), or CLASS_PUBLIC for a player whose
        own characters this patch does not concern: equal keys, equal
        `view_patch`es."""
        if viewer.sees_all:
            return CLASS_ALL
        user = viewer.user
        if viewer.role != "player" or user is None:
            return CLASS_PUBLIC
        in_b, in_a = self._own_private()
        b = ("player", user) if user in in_b else CLASS_PUBLIC
        a = ("player", user) if user in in_a else CLASS_PUBLIC
        cls = b if b == a else (b, a)
        if cls == CLASS_PUBLIC or self._concerned is None:
            return cls
        own = in_b.get(user, set()) | in_a.get(user, set())
        if own.isdisjoint(self._concerned) and own.isdisjoint(self._order):
            return CLASS_PUBLIC
        return cls
