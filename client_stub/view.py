"""Terminal rendering of a room for `vtt-sync client watch` (rich)."""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from client_stub.events import EventText, Names, format_clock, format_duration

__all__ = [
    "WatchView",
    "char_sort_key",
    "current_char",
    "format_clock",
    "format_duration",
    "format_event",
    "numbers_hidden",
]

COND_STYLE = {
    "conscious": "green",
    "dying": "bold red",
    "stable": "yellow",
    "dead": "dim",
}
BAR_STYLE = {"pv": "red", "pe": "dark_orange", "pp": "medium_purple"}
STATUS_STYLE = {
    "connected": "bold green",
    "connecting": "yellow",
    "disconnected": "yellow",
    "failed": "bold red",
    "closed": "dim",
}


# What the GM's view says of a character that the players see less of
# (docs/views.md): the `shown` setting, in words.
SHOWN_NOTES = {
    "status": "shown: status (others see no numbers)",
    "hidden": "shown: hidden (others cannot see it)",
}
_ID_NUMBER = re.compile(r"(\d+)$")


def numbers_hidden(c: dict[str, Any]) -> bool:
    """Is this a character the viewer sees at the `status` level only (name,
    owner, level, condition, `shown`; no PV/PE/PP, no maxima)? Decided by
    what the dict holds, not by `shown`: the GM and the owner see a `status`
    character in full."""
    return "pv_max" not in c


def char_sort_key(item: tuple[str, dict[str, Any]]) -> tuple[float, str, str]:
    """The table's order: by `seq`, which a `status` character does not carry;
    then by the number of its id (ids are `c<n>`, handed out in that order),
    then by name and id, so that partial states still sort stably."""
    cid, c = item
    seq = c.get("seq")
    if not isinstance(seq, int):
        m = _ID_NUMBER.search(str(cid))
        seq = int(m.group(1)) if m else None
    return (float("inf") if seq is None else seq, str(c.get("name", "")), str(cid))


def current_char(combat: dict[str, Any] | None) -> str | None:
    """The id whose turn it is, or None: no combat, or `turn` is null (a
    character the viewer cannot see is acting) or out of the order."""
    if not combat:
        return None
    order = combat.get("order") or []
    turn = combat.get("turn")
    if isinstance(turn, int) and not isinstance(turn, bool) and 0 <= turn < len(order):
        return order[turn]
    return None


def _name(state: dict[str, Any] | None, cid: Any) -> str:
    if state and cid in state.get("characters", {}):
        return str(state["characters"][cid].get("name", cid))
    return str(cid)


def _style(field: str | None, text: str) -> str:
    """How a field of an event sentence looks in the terminal."""
    if field in ("char", "patient", "name", "undone"):
        return "bold"
    if field == "d20":
        return "bold cyan"
    if field == "total":
        return "bold"
    if field == "outcome":
        good = text in {"success", "stays stable", "wakes up"}
        return "bold green" if good else "bold red"
    if field in ("from", "to"):
        return COND_STYLE.get(text, "")
    return ""


def format_event(
    event: dict[str, Any],
    state: dict[str, Any] | None = None,
    text: EventText | None = None,
    undone: bool = False,
) -> Text:
    """One event as a sentence (client_stub/web/events.json), version first;
    an event whose command was undone since is struck through."""
    if text is None:
        names = Names()
        names.update(state)
        text = EventText(names)
    line = Text()
    if event.get("v") is not None:
        line.append(f"v{event['v']:<4} ", style="dim")
    body = Text()
    for piece, field in text.segments(event):
        body.append(piece, style=_style(field, piece))
    if undone:
        body.stylize("strike dim")
        body.append(" (undone)", style="dim italic")
    line.append_text(body)
    return line


def dying_note(c: dict[str, Any], state: dict[str, Any], text: EventText | None = None) -> str:
    """When a dying character next loses a PP (D5), in words (the
    shared table's `notes`, as the page says it)."""
    if c.get("condition") != "dying":
        return ""
    nxt = c.get("dying_next")  # None in combat: at the end of its own turns
    left = None if nxt is None else int(nxt) - int(state.get("clock") or 0)
    return (text or EventText()).note("dying", {"next": left, "fresh": c.get("dying_fresh")})


def _bar(cur: int, maximum: int, style: str, width: int = 6) -> Text:
    filled = 0 if maximum <= 0 else round(width * max(0, min(cur, maximum)) / maximum)
    text = Text()
    text.append("█" * filled, style=style)
    text.append("░" * (width - filled), style="dim")
    low = maximum > 0 and cur / maximum <= 0.25
    text.append(f" {cur:>2}/{maximum:<2}", style="bold red" if low else "")
    return text


class WatchView:
    """Keeps the latest state, the connection status and the event feed."""

    def __init__(self, feed_size: int = 14) -> None:
        self.state: dict[str, Any] | None = None
        self.version: int | None = None
        self.user: str | None = None
        self.role: str | None = None
        self.status = "connecting"
        self.detail = ""
        self.events: deque[dict[str, Any]] = deque(maxlen=feed_size)
        self.names = Names()
        self.text = EventText(self.names, history=self._events_of)

    def _events_of(self, v: int) -> list[dict[str, Any]] | None:
        found = [e for e in self.events if e.get("v") == v]
        return found or None

    def _notes(self, c: dict[str, Any], state: dict[str, Any]) -> list[str]:
        """A fully seen character's notes: rest, dying, nonlethal, healer
        (in the shared table's words: `notes`)."""
        notes = []
        if c.get("activity"):
            act = c["activity"]
            left = act.get("ends", 0) - state.get("clock", 0)
            notes.append(self.text.note("resting", {"kind": act.get("kind"), "left": left}))
        dying = dying_note(c, state, self.text)
        if dying:
            notes.append(dying)
        if c.get("nonlethal"):
            notes.append("nonlethal")
        if c.get("healer") or c.get("tended"):  # `tended` alone: a healer this viewer cannot see
            notes.append(self.text.note("tended", {"healer": c.get("healer")}))
        return notes

    def render(self) -> Group:
        state = self.state or {}
        self.names.update(state)
        head = Text()
        head.append(str(state.get("name") or "vtt-sync"), style="bold")
        if state.get("room"):
            head.append(f"  ({state['room']})", style="dim")
        head.append("   clock ")
        head.append(format_clock(state.get("clock")), style="bold cyan")
        if self.version is not None:
            head.append(f"   v{self.version}", style="dim")
        head.append("   ")
        head.append(self.status, style=STATUS_STYLE.get(self.status, ""))
        if self.detail and self.status != "connected":
            head.append(f" ({self.detail})", style="dim")
        if self.user:
            me = (state.get("users") or {}).get(self.user, {}).get("name", self.user)
            head.append(f"   as {me} ({self.role})", style="dim")

        combat = state.get("combat")
        current = current_char(combat)
        gm_view = self.role in ("gm", "admin")
        chars = Table(expand=True, box=None, pad_edge=False, header_style="bold dim")
        chars.add_column("", width=1, no_wrap=True)
        chars.add_column("Character", min_width=10, ratio=1)
        chars.add_column("Condition", min_width=9, no_wrap=True)
        for col in ("PV", "PE", "PP"):
            chars.add_column(col, no_wrap=True)
        chars.add_column("Notes", ratio=2)
        users = state.get("users") or {}
        characters = sorted((state.get("characters") or {}).items(), key=char_sort_key)
        for cid, c in characters:
            owner = c.get("owner")
            who = Text(str(c.get("name", cid)), style="bold")
            who.append(f" {cid}", style="dim")  # the id every command names
            owner_name = users.get(owner, {}).get("name", owner) if owner else "GM"
            level = f" · lv {c['level']}" if c.get("level") is not None else ""
            who.append(f"\n{owner_name}{level}", "dim")
            cond = Text(str(c.get("condition", "?")), style=COND_STYLE.get(c.get("condition"), ""))
            marker = Text("▶", style="bold cyan") if cid == current else Text("")
            if numbers_hidden(c):
                dash = Text("·", style="dim")
                note = Text(self.text.note("no_numbers", {}), style="dim italic")
                chars.add_row(marker, who, cond, dash, dash, dash, note)
                continue
            notes = self._notes(c, state)
            if gm_view and c.get("shown") in SHOWN_NOTES:
                notes.append(SHOWN_NOTES[c["shown"]])
            chars.add_row(
                marker,
                who,
                cond,
                _bar(c.get("pv", 0), c.get("pv_max", 0), BAR_STYLE["pv"]),
                _bar(c.get("pe", 0), c.get("pe_max", 0), BAR_STYLE["pe"]),
                _bar(c.get("pp", 0), c.get("pp_max", 0), BAR_STYLE["pp"], width=4),
                Text(", ".join(notes), style="cyan"),
            )
        if not characters:
            chars.add_row("", Text("no characters yet", style="dim"), "", "", "", "", "")

        if combat:
            order = Text(f"Round {combat.get('round')}: ")
            for i, cid in enumerate(combat.get("order") or []):
                if i:
                    order.append(" → ", style="dim")
                style = "bold reverse cyan" if cid == current else ""
                order.append(f" {_name(state, cid)} ", style=style)
            if current is None:
                order.append("   someone you cannot see is acting", style="italic yellow")
        else:
            order = Text("no combat", style="dim")

        undone = {e.get("undone") for e in self.events if e.get("kind") == "undo"}
        feed = (
            Text("\n").join(
                format_event(e, state, self.text, e.get("v") in undone) for e in self.events
            )
            if self.events
            else None
        )
        return Group(
            Panel(head, border_style="cyan"),
            Panel(chars, title="Characters", title_align="left"),
            Panel(order, title="Combat", title_align="left"),
            Panel(
                feed or Text("waiting for events…", style="dim"), title="Events", title_align="left"
            ),
        )
