"""The terminal view of `vtt-sync client watch` renders every part of the table."""

from __future__ import annotations

from rich.console import Console

from client_stub.view import WatchView, format_clock, format_event

STATE = {
    "room": "r1",
    "name": "Table du jeudi",
    "clock": 93784,
    "round_seconds": 6,
    "combat": {"order": ["c2", "c1"], "turn": 1, "round": 3},
    "queued_rolls": [],
    "users": {"u1": {"name": "Maya", "role": "gm"}, "u2": {"name": "Paul", "role": "player"}},
    "characters": {
        "c1": {
            "seq": 1, "name": "Aline", "owner": "u2", "level": 3, "condition": "stable",
            "pv": 0, "pv_max": 20, "pe": 0, "pe_max": 15, "pp": 4, "pp_max": 6,
            "activity": None, "nonlethal": True, "healer": "c2",
        },
        "c2": {
            "seq": 2, "name": "Brom", "owner": None, "level": 3, "condition": "conscious",
            "pv": 20, "pv_max": 20, "pe": 15, "pe_max": 15, "pp": 6, "pp_max": 6,
            "activity": {"kind": "short", "ends": 94384}, "nonlethal": False, "healer": None,
        },
    },
}  # fmt: skip


def render(view: WatchView, width: int = 110) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(view.render())
    return console.export_text()


def test_clock_format() -> None:
    assert format_clock(0) == "0h 00m 00s"
    assert format_clock(3723) == "1h 02m 03s"
    assert format_clock(93784) == "1d 02h 03m 04s"


def test_roll_line_has_die_mod_bonus_total_dc_outcome() -> None:
    ev = {"kind": "roll", "char": "c2", "check": "medicine", "d20": 13, "mod": 5, "bonus": 2}
    ev |= {"total": 20, "dc": 15, "outcome": "success", "v": 12}
    text = format_event(ev, STATE).plain
    for part in ("v12", "Brom", "medicine", "d20 13", "+5 mod", "+2 bonus", "= 20", "DC 15"):
        assert part in text
    assert text.endswith("success")
    ev2 = {"kind": "roll", "char": "c1", "check": "constitution", "d20": 4, "mod": 0}
    assert "(no DC)" in format_event(ev2 | {"bonus": 0, "total": 4, "dc": None}, STATE).plain


def test_watch_view_shows_the_table() -> None:
    view = WatchView()
    view.state, view.version, view.user, view.role = STATE, 42, "u1", "gm"
    view.status = "connected"
    view.events.append({"kind": "clock", "from": 0, "to": 3600, "v": 41})
    out = render(view)
    for part in ("Table du jeudi", "1d 02h 03m 04s", "v42", "Maya", "Aline", "Paul", "stable"):
        assert part in out
    for part in ("0/20", "20/20", "4/6", "nonlethal", "tended by Brom", "short rest, 10m left"):
        assert part in out
    assert "Round 3" in out and "clock 0h 00m 00s -> 1h 00m 00s" in out
    assert "▶" in out  # Aline's turn
    view.status, view.detail = "disconnected", "connection closed (1006)"
    assert "disconnected (connection closed (1006))" in render(view)
