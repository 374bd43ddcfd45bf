"""How a version looks to the viewers who do not see everything
(docs/views.md): rendered by the room core when it makes the version, stored
with it (`VersionRecord.views`), and read back for resumes and history.

The rules decide what each viewer may see (`rules.view`); this module turns
that into what a version keeps: the public view, the players whose own view
differs from it, and those past the cap who get a snapshot instead. Storage
backends call `backfill_views` to give a log from before views were stored
(an old database, an old room file) the views the core would have made.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rules.patch import applied
from rules.view import (
    CLASS_PUBLIC,
    PatchClasses,
    Viewer,
    new_memo,
    private_owners,
    restricted,
    view_patch,
)
from sync_server.core.limits import MAX_STORED_VIEWS_PER_VERSION

# How one stored version looks to the viewers who do not see everything
# (docs/views.md), stored with it so that resumes and history after a
# restart (or an import) give each viewer their view without the states
# before and after at hand: {"public": [ops, events], "players": {user:
# [ops, events]}}. "public" is what observers and every player without a
# view class of their own get; "players" holds the players whose view of
# this version differs from it (those owning a character that is not
# `full`, before or after). The GM and admin get the plain patch. "resync"
# (when present) lists the players whose own view was not rendered, past
# the cap of views per version (limits.MAX_STORED_VIEWS_PER_VERSION): they
# get no patch of this version, but a snapshot (`needs_snapshot`).
Views = dict[str, Any]
PUBLIC_VIEWER = Viewer(None, "observer")


def version_views(
    before: dict[str, Any],
    after: dict[str, Any],
    ops: list[Any],
    events: list[dict[str, Any]],
    max_players: int | None = None,
) -> Views | None:
    """What to store of a version for the viewers (see `Views`): None when
    the rules say no viewer's patch differs from the plain one. At most
    `max_players` players' own views are rendered (None: all), the rest
    listed under "resync"."""
    if not restricted(ops, events, before, after):
        return None
    memo = new_memo()  # status views shared by the renders of this version
    public = list(view_patch(before, after, ops, events, PUBLIC_VIEWER, memo))
    players: dict[str, list[Any]] = {}
    # A player whom the patch does not concern gets the public view: only the
    # others are rendered (a room of 98 players owning status patients costs
    # two renders for a hit on one NPC, not 99).
    classes = PatchClasses(before, after, ops, events)
    resync: list[str] = []
    for user in sorted(private_owners(before) | private_owners(after)):
        viewer = Viewer(user, "player")
        if classes.key(viewer) == CLASS_PUBLIC:
            continue
        if max_players is not None and len(players) + len(resync) >= max_players:
            resync.append(user)
            continue
        own = list(view_patch(before, after, ops, events, viewer, memo))
        if own != public:
            players[user] = own
    views: Views = {"public": public, "players": players}
    if resync:
        views["resync"] = resync
    return views


def needs_snapshot(views: Views | None, viewer: Viewer) -> bool:
    """Whether `viewer`'s view of this version was not rendered (past the
    cap: "resync"): it must get a snapshot instead of this version's patch."""
    return (
        views is not None
        and not viewer.sees_all
        and viewer.role == "player"
        and viewer.user in views.get("resync", ())
    )


def view_key(views: Views, viewer: Viewer) -> Any:
    """Viewers with equal keys get the same stored view of a version; None
    for those who get the plain patch (the GM, the admin)."""
    if viewer.sees_all:
        return None
    if viewer.role == "player" and viewer.user in views["players"]:
        return ("player", viewer.user)
    return "public"


def view_ops_events(views: Views, viewer: Viewer) -> tuple[list[Any], list[dict[str, Any]]]:
    """The (ops, events) a viewer who does not see everything gets (for one
    who `needs_snapshot`, the public ones: never more than its view, for a
    history; its mirror takes a snapshot instead)."""
    key = view_key(views, viewer)
    ops, events = views["public"] if key == "public" else views["players"][viewer.user]
    return ops, events


def backfill_views(
    snapshot_v: int,
    snapshot: dict[str, Any],
    versions: Iterable[tuple[int, list[Any], list[Any], list[dict[str, Any]]]],
    max_players: int | None = MAX_STORED_VIEWS_PER_VERSION,
) -> dict[int, Views | None]:
    """The stored views of every version of a log that has none (a database
    or a room file from before they were stored): (v, ops, inverse, events)
    for 1..head, and a snapshot among them. The states before and after
    each version are rebuilt from the snapshot: forwards with each
    version's ops, backwards with its inverse (so the log's beginning needs
    no snapshot of its own)."""
    rows = {v: (ops, inverse, events) for v, ops, inverse, events in versions}
    out: dict[int, Views | None] = {}
    after = snapshot
    # Each state is built copy-on-write from its neighbour (`rules.applied`:
    # only what a version touches is copied; deep copies of a 200-character
    # state were 97% of an import of 2,000 versions), and at most
    # `max_players` players' views are rendered, as the room core does.
    for v in range(snapshot_v, 0, -1):
        ops, inverse, events = rows[v]
        before = applied(after, inverse)
        out[v] = version_views(before, after, ops, events, max_players)
        after = before
    before = snapshot
    for v in range(snapshot_v + 1, max(rows, default=0) + 1):
        ops, _inverse, events = rows[v]
        after = applied(before, ops)
        out[v] = version_views(before, after, ops, events, max_players)
        before = after
    return out
