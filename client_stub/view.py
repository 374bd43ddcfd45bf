"""Terminal rendering of a room for `vtt-sync client watch` (rich)."""

from __future__ import annotations

from collections import deque
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

COND_STYLE = {
    "conscious": "green",
    "dying": "bold red",
    "stable": "yellow",
    "dead": "dim",
}
BAR_STYLE = {"pv": "red", "pe": "dark_orange", "pp": "medium_purple"}
REST_NAMES = {"short": "short rest", "night": "night's rest", "bed": "bed rest"}
STATUS_STYLE = {
    "connected": "bold green",
    "connecting": "yellow",
    "disconnected": "yellow",
    "failed": "bold red",
    "closed": "dim",
}


def format_clock(seconds: int | float | None) -> str:
    s = max(0, int(seconds or 0))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    return f"{d}d {h:02d}h {m:02d}m {sec:02d}s" if d else f"{h}h {m:02d}m {sec:02d}s"


def format_duration(seconds: int | float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m" + (f" {s % 60:02d}s" if s % 60 else "")
    return f"{s // 3600}h" + (f" {(s % 3600) // 60:02d}m" if s % 3600 // 60 else "")


def _signed(n: Any) -> str:
    n = int(n or 0)
    return f"+{n}" if n >= 0 else str(n)


def _name(state: dict[str, Any] | None, cid: Any) -> str:
    if state and cid in state.get("characters", {}):
        return str(state["characters"][cid].get("name", cid))
    return str(cid)


def format_event(event: dict[str, Any], state: dict[str, Any] | None = None) -> Text:
    """One event as a line: rolls show die, modifier, bonus, total, DC, outcome."""
    text = Text()
    if event.get("v") is not None:
        text.append(f"v{event['v']:<4} ", style="dim")
    kind = event.get("kind")
    if event.get("char") is not None:
        text.append(_name(state, event["char"]), style="bold")
        text.append(" ")
    if kind == "roll":
        text.append(f"{event.get('check', 'check')}: ")
        text.append(f"d20 {event.get('d20')}", style="bold cyan")
        text.append(f" {_signed(event.get('mod'))} mod {_signed(event.get('bonus'))} bonus")
        text.append(" = ")
        text.append(str(event.get("total")), style="bold")
        dc = event.get("dc")
        text.append(" (no DC)" if dc is None else f" vs DC {dc}")
        outcome = str(event.get("outcome"))
        good = outcome in {"success", "stay", "wake"}
        text.append(" -> ")
        text.append(outcome, style="bold green" if good else "bold red")
    elif kind == "damage":
        text.append(f"takes {event.get('amount')}{' nonlethal' if event.get('nonlethal') else ''}")
        text.append(f" damage ({event.get('pe', 0)} PE, {event.get('pv', 0)} PV)", style="dim")
    elif kind == "heal":
        text.append(f"healed {event.get('amount')} ({_signed(event.get('pv'))} PV)")
    elif kind == "condition":
        frm, to = str(event.get("from")), str(event.get("to"))
        text.append(frm, style=COND_STYLE.get(frm, ""))
        text.append(" -> ")
        text.append(to, style=COND_STYLE.get(to, ""))
        if event.get("cause"):
            text.append(f" ({event['cause']})", style="dim")
    elif kind == "pp":
        text.append(f"{_signed(event.get('delta'))} PP")
        if event.get("cause"):
            text.append(f" ({event['cause']})", style="dim")
    elif kind == "clock":
        text.append(f"clock {format_clock(event.get('from'))} -> {format_clock(event.get('to'))}")
    elif kind == "combat":
        if event.get("outcome") == "start":
            order = ", ".join(_name(state, c) for c in event.get("order") or [])
            text.append(f"combat starts: {order}")
        else:
            text.append("combat ends")
    elif kind == "turn":
        text.append(f"round {event.get('round')}: turn")
    elif kind == "rest":
        rest = REST_NAMES.get(str(event.get("rest")), event.get("rest"))
        text.append(f"{rest}: {event.get('outcome')}")
        if event.get("cause"):
            text.append(f" ({event['cause']})", style="dim")
    elif kind == "character":
        text.append(str(event.get("change")))
    elif kind == "user":
        text.append(f"user {event.get('name') or event.get('user')} {event.get('change')}")
        if event.get("role"):
            text.append(f" ({event['role']})", style="dim")
    else:
        extra = {k: v for k, v in event.items() if k not in {"kind", "char", "v"}}
        text.append(str(kind))
        if extra:
            text.append(" " + " ".join(f"{k}={v}" for k, v in extra.items()), style="dim")
    return text


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

    def render(self) -> Group:
        state = self.state or {}
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
        current = combat["order"][combat["turn"]] if combat else None
        chars = Table(expand=True, box=None, pad_edge=False, header_style="bold dim")
        chars.add_column("", width=1, no_wrap=True)
        chars.add_column("Character", min_width=10, ratio=1)
        chars.add_column("Condition", min_width=9, no_wrap=True)
        for col in ("PV", "PE", "PP"):
            chars.add_column(col, no_wrap=True)
        chars.add_column("Notes", ratio=2)
        users = state.get("users") or {}
        characters = sorted(
            (state.get("characters") or {}).items(), key=lambda kv: kv[1].get("seq", 0)
        )
        for cid, c in characters:
            notes = []
            if c.get("activity"):
                act = c["activity"]
                left = format_duration(act.get("ends", 0) - state.get("clock", 0))
                notes.append(f"{REST_NAMES.get(act.get('kind'), act.get('kind'))}, {left} left")
            if c.get("nonlethal"):
                notes.append("nonlethal")
            if c.get("healer"):
                notes.append(f"tended by {_name(state, c['healer'])}")
            owner = c.get("owner")
            who = Text(str(c.get("name", cid)), style="bold")
            who.append(f"\n{users.get(owner, {}).get('name', owner) if owner else 'GM'}", "dim")
            cond = Text(str(c.get("condition")), style=COND_STYLE.get(c.get("condition"), ""))
            chars.add_row(
                Text("▶", style="bold cyan") if cid == current else Text(""),
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
                style = "bold reverse cyan" if i == combat.get("turn") else ""
                order.append(f" {_name(state, cid)} ", style=style)
        else:
            order = Text("no combat", style="dim")

        feed = Text("\n").join(format_event(e, state) for e in self.events) if self.events else None
        return Group(
            Panel(head, border_style="cyan"),
            Panel(chars, title="Characters", title_align="left"),
            Panel(order, title="Combat", title_align="left"),
            Panel(
                feed or Text("waiting for events…", style="dim"), title="Events", title_align="left"
            ),
        )
