"""How one patch looks to each viewer: `PatchView` groups a patch's
viewers by a `ViewKey` (what they may see of it, whether it is their own
command's, whether it changes what they may do), so that the bus renders
and encodes one frame per group, never one per viewer. The room core
builds one with each version (core/room.py); the bus (hosting/bus.py)
and the HTTP door (hosting/api.py) render it; the room keeps its parts
for resumes and the history (`RecentPatch`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

import rules
from rules.view import ALL_SEEING, CLASS_PUBLIC
from sync_server.core.afford import afford_class
from sync_server.core.views import Views, needs_snapshot, view_key, view_ops_events


class ViewKey(NamedTuple):
    """The group of viewers who get one frame of a patch (`PatchView.key`):
    `seen`, the class of what they may see of it (None: all of it, the GM
    and admin); `own`, whether it is their own command's (their frame keeps
    its id); `afford`, their affordance class when the patch changes what
    they may do (else None). Viewers with equal keys get equal frames."""

    seen: Any
    own: bool = False
    afford: Any = None


# The key of the viewers who get the public view of someone else's patch
# that changes nothing they may do.
PUBLIC_KEY = ViewKey(CLASS_PUBLIC)


@attrs.define(eq=False)
class PatchView:
    """How one patch looks to each viewer (per-role views, rules/view.py,
    command ids and affordances): viewers are grouped by `key`, each
    group's frame built once; None for those who get the plain patch.

    `views` is what the version stores for its viewers (core/views.py's
    `Views`: the public view and the players whose own differs from it),
    None when the rules say every viewer may see it whole; so a patch loaded
    from the log after a restart or an import gives each viewer the same
    view as it did live.

    A command's `id` is its sender's (docs/protocol.md, "cmd -> patch": the sender's patch
    carries it, and the ack too); every other viewer but the GM and admin
    gets `"id": null`, since a client's ids may say what its command was
    about (the Foundry module's name the actor). So a patch that is the
    same for all costs one more encoding (the one without the id), and a
    restricted one one more per view class the sender's own patch adds:
    never one per viewer.

    `afford`: the ops of each affordance class whose affordances the patch
    changes (see `afford_class`); affordance ops are not stored (see
    `patches_after`)."""

    patch: dict[str, Any]
    views: Views | None
    afford: dict[Any, list[Any]] = attrs.Factory(dict)
    # The players among `afford`'s classes (`key`: made once, at its first
    # player; most patches change the GM's alone, by its undo).
    _players: frozenset[Any] | None = attrs.field(default=None, init=False)

    def _own(self, viewer: rules.Viewer) -> bool:
        return viewer.user is not None and viewer.user == self.patch["by"]

    def _afford_players(self) -> frozenset[Any]:
        players = self._players
        if players is None:
            players = self._players = frozenset(
                cls[1] for cls in self.afford if isinstance(cls, tuple) and cls[0] == "player"
            )
        return players

    def key(self, viewer: rules.Viewer) -> ViewKey | None:
        """None: the plain patch (a viewer who sees everything, with no
        affordance of theirs changed). Asked for every viewer of every
        patch: no call it can do without (`afford_class` and `sees_all`
        written out: no class made per viewer)."""
        role, user = viewer.role, viewer.user
        afford: Any = None
        if self.afford:
            if role == "gm":
                afford = "gm" if "gm" in self.afford else None
            elif role == "player" and user in self._afford_players():
                afford = ("player", user)
        if role in ALL_SEEING:
            return None if afford is None else ViewKey(None, False, afford)
        seen = CLASS_PUBLIC if self.views is None else view_key(self.views, viewer)
        own = user is not None and user == self.patch["by"]
        if seen is CLASS_PUBLIC and not own and afford is None:
            return PUBLIC_KEY  # most viewers of most patches: one object, no tuple to build
        return ViewKey(seen, own, afford)

    def needs_snapshot(self, viewer: rules.Viewer) -> bool:
        """`viewer`'s view of this version was not rendered (past the cap of
        views per version): it gets a snapshot, never this patch."""
        return self.views is not None and needs_snapshot(self.views, viewer)

    def exempt(self, key: Any) -> bool:
        """Viewers who see everything (the GM) get their own frame when the
        patch changes what they may do; the cap of views never holds them
        back to a snapshot."""
        return isinstance(key, ViewKey) and key.seen is None and key.afford is not None

    def render(self, viewer: rules.Viewer) -> dict[str, Any]:
        p = self.patch
        if not viewer.sees_all:
            if self.views is None:
                ops, events = p["ops"], p["events"]
            else:
                ops, events = view_ops_events(self.views, viewer)
            p = {**p, "ops": ops, "events": events, "id": p["id"] if self._own(viewer) else None}
        extra = self.afford.get(afford_class(viewer))
        if extra:
            p = {**p, "ops": [*p["ops"], *extra]}
        return p


# What the room keeps of a committed patch (core/recent.py): PatchView's
# fields, rebuilt into one when a resume or the history needs it.
RecentPatch = tuple[dict[str, Any], Views | None, dict[Any, list[Any]]]
