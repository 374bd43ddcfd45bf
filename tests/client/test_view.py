"""The terminal view of `vtt-sync client watch` renders every part of the table."""

from __future__ import annotations

from rich.console import Console

from client_stub.view import WatchView, char_sort_key, format_clock, format_event

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


def test_roll_line_reads_as_a_sentence_with_die_mod_bonus_total_dc_outcome() -> None:
    ev = {"kind": "roll", "char": "c2", "check": "medicine", "d20": 13, "mod": 5, "bonus": 2}
    ev |= {"total": 20, "dc": 15, "outcome": "success", "v": 12, "patient": "c1"}
    line = format_event(ev, STATE)
    assert line.plain == "v12   Brom rolls Medicine for Aline: d20 13 +5 +2 = 20 vs DC 15 — success"
    styled = {line.plain[s.start : s.end]: str(s.style) for s in line.spans}
    assert styled["13"] == "bold cyan" and styled["success"] == "bold green"
    ev2 = {"kind": "roll", "char": "c1", "check": "constitution", "d20": 4, "mod": 0}
    ev2 |= {"bonus": 0, "total": 4, "dc": None, "outcome": "die", "hour": 2}
    assert format_event(ev2, STATE).plain == (
        "Aline rolls Constitution (hour 2): d20 4 +0 = 4 — dies (under 10)"
    )


def test_watch_feed_marks_undone_events_and_says_what_undo_undid() -> None:
    view = WatchView()
    view.state, view.version, view.user, view.role = STATE, 43, "u1", "gm"
    view.events.append({"kind": "damage", "char": "c1", "amount": 3, "pe": -3, "pv": 0, "v": 41})
    view.events.append({"kind": "undo", "undone": 41, "op": "damage", "by": "u1", "v": 42})
    out = render(view)
    assert "Aline takes 3 damage (-3 PE, +0 PV) (undone)" in out
    assert "Undid: 3 damage to Aline" in out
    # an undo whose command is not in the feed any more says op, author and version
    view.events.popleft()
    assert "Undid: damage by Maya (v41)" in render(view)


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
    assert "Round 3" in out and "Time passes: 0h 00m 00s → 1h 00m 00s" in out
    assert "Aline c1" in out and "Brom c2" in out  # the ids commands need
    assert "▶" in out  # Aline's turn
    view.status, view.detail = "disconnected", "connection closed (1006)"
    assert "disconnected (connection closed (1006))" in render(view)


def test_D5_a_dying_character_shows_when_it_next_loses_a_pp() -> None:
    state = {**STATE, "clock": 100, "combat": None}
    chars = {
        "c1": {**STATE["characters"]["c1"], "condition": "dying", "dying_next": 106},
        "c2": {**STATE["characters"]["c2"], "condition": "dying", "dying_next": None},
    }
    view = WatchView()
    view.state, view.version, view.status = {**state, "characters": chars}, 5, "connected"
    out = render(view, width=160)
    assert "loses 1 PP in 6s" in out  # out of combat: by world time
    assert "loses 1 PP at the end of its turn" in out  # in combat: its own turns


# A player's view (docs/views.md): Brom is `status` (no numbers, no seq),
# a hidden character acts (turn null) and is absent; no queued_rolls, next_seq.
PARTIAL = {
    "room": "r1",
    "name": "Table du jeudi",
    "clock": 100,
    "round_seconds": 6,
    "combat": {"order": ["c2", "c1"], "turn": None, "round": 2},
    "users": STATE["users"],
    "characters": {
        "c1": {**STATE["characters"]["c1"], "shown": "full"},
        "c2": {"name": "Brom", "owner": None, "shown": "status", "level": 4, "condition": "dying"},
    },
}


def row(out: str, name: str) -> str:
    """The line of the table that starts with a character's name."""
    return next(line for line in out.splitlines() if f" {name} c" in line)


def test_a_status_character_shows_name_level_owner_condition_and_no_numbers() -> None:
    view = WatchView()
    view.state, view.version, view.user, view.role = PARTIAL, 7, "u2", "player"
    view.status = "connected"
    out = render(view, width=140)
    brom = row(out, "Brom")
    assert "dying" in brom and "no numbers shown" in brom
    assert "GM · lv 4" in out  # the line under Brom's name
    assert "None" not in out and "0/0" not in out
    assert "loses 1 PP" not in out  # Brom's dying timer is not his viewers' to know
    assert "4/6" in out  # Aline, seen in full, keeps her bars
    assert "shown:" not in out  # the setting is the GM's note


def test_a_null_turn_marks_nobody_and_says_someone_unseen_acts() -> None:
    view = WatchView()
    view.state, view.version, view.role = PARTIAL, 7, "player"
    out = render(view, width=140)
    assert "▶" not in out
    assert "someone you cannot see is acting" in out
    seen = {**PARTIAL, "combat": {**PARTIAL["combat"], "turn": 1}}
    view.state = seen
    out = render(view, width=140)
    assert "▶" in out and "cannot see" not in out
    assert "▶" in row(out, "Aline")


def test_characters_without_seq_sort_by_their_id_number() -> None:
    chars = {
        "c10": {"name": "Zed", "shown": "status", "level": 1, "condition": "conscious"},
        "c2": {"name": "Yan", "shown": "status", "level": 1, "condition": "conscious"},
        "c3": {**STATE["characters"]["c1"], "seq": 3, "name": "Xia"},
    }
    assert [cid for cid, _ in sorted(chars.items(), key=char_sort_key)] == ["c2", "c3", "c10"]
    view = WatchView()
    view.state = {**PARTIAL, "characters": chars, "combat": None}
    out = render(view, width=140)
    assert out.index("Yan") < out.index("Xia") < out.index("Zed")


def test_the_gm_sees_each_characters_shown_setting() -> None:
    chars = {
        "c1": {**STATE["characters"]["c1"], "shown": "full"},
        "c2": {**STATE["characters"]["c2"], "shown": "status"},
        "c3": {**STATE["characters"]["c2"], "seq": 3, "name": "Cale", "shown": "hidden"},
    }
    view = WatchView()
    view.state, view.role = {**STATE, "characters": chars}, "gm"
    out = render(view, width=160)
    assert "shown: status" in row(out, "Brom") and "20/20" in row(out, "Brom")
    assert "shown: hidden" in row(out, "Cale")
    assert "shown:" not in row(out, "Aline")


def test_a_healer_the_viewer_cannot_see_reads_as_someone() -> None:
    """Views (issue 19): `healer: null, tended: true` is a hidden healer."""
    c1 = {**STATE["characters"]["c1"], "healer": None, "tended": True}
    view = WatchView()
    view.state = {**STATE, "characters": {"c1": c1}, "combat": None}
    view.version, view.user, view.role = 3, "u2", "player"
    out = render(view, 160)
    assert "tended by someone you cannot see" in out and "Brom" not in out
