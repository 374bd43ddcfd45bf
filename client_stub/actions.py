"""What you may do now, in words: the server's affordances for this viewer.

The server puts them in each viewer's state (`affordances`, kept current by
the patches: docs/protocol.md); this module only words them, with the
labels and reasons of the shared table of texts (client_stub/web/events.json,
which the tracker page reads too). It decides nothing: an action listed
here is one the server accepts now, an action marked "not now" is one it
refuses, for the reason shown.

    vtt-sync client actions [CHAR]
"""

from __future__ import annotations

import json
from typing import Any

from client_stub.events import EventText

AFFORDANCES = "affordances"


def affordances_of(state: dict[str, Any] | None) -> dict[str, Any] | None:
    """The viewer's affordances in a state they received, or None (a server
    that does not send them)."""
    found = (state or {}).get(AFFORDANCES)
    return found if isinstance(found, dict) else None


def _value(text: EventText, arg: str, value: Any) -> str:
    if arg in ("char", "patient"):
        return f"{text.names.char(value)} ({value})"
    if arg == "user":
        return f"{text.names.user(value)} ({value})"
    if arg == "order":
        return ", ".join(text.names.char(v) for v in value)
    return str(text.label(value, "rest") if arg == "kind" else value)


def _command(op: str, entry: dict[str, Any]) -> str:
    """The `cmd` line that sends the action (choices and free args as
    placeholders)."""
    parts = [f"{k}={json.dumps(v)}" for k, v in entry.get("args", {}).items()]
    for name, values in (entry.get("choices") or {}).items():
        if name == "order":
            parts.append(f"order={json.dumps(values)}")
        else:
            parts.append(f"{name}=<{'|'.join(str(v) for v in values)}>")
    parts += [f"{name}=…" for name in entry.get("free", ())]
    return " ".join(["vtt-sync client cmd", op, *parts])


def entry_lines(text: EventText, op: str, entry: dict[str, Any]) -> list[str]:
    """One action: its label and either how to send it or why not now."""
    label = text.action(op)
    why = entry.get("why")
    if why is not None:
        return [f"  {label}: not now: {text.reason(why)}"]
    details = []
    for name, values in (entry.get("choices") or {}).items():
        if name != "order":
            details.append(" or ".join(_value(text, name, v) for v in values))
    for name, refused in (entry.get("refused") or {}).items():
        for value, reason in refused.items():
            details.append(f"not {_value(text, name, value)}: {text.reason(reason)}")
    cost = entry.get("cost") or {}
    if cost:
        details.append("costs " + ", ".join(f"{n} {k.upper()}" for k, n in cost.items()))
    head = f"  {label}" + (f" ({'; '.join(details)})" if details else "")
    return [head, f"      {_command(op, entry)}"]


def undo_lines(text: EventText, undo: dict[str, Any]) -> list[str]:
    label = text.action("undo")
    if "why" in undo:
        return [f"  {label}: not now: {text.reason(undo['why'])}"]
    op = text.label(undo.get("op"), "op")
    return [
        f"  {label}: reverts v{undo.get('v')}, {op} by {text.names.user(undo.get('by'))}",
        "      vtt-sync client cmd undo",
    ]


def actions_text(state: dict[str, Any], char: str | None = None) -> str:
    """What this viewer may do now: for one character, or for every
    character they may act for and for the room."""
    aff = affordances_of(state)
    if aff is None:
        return "this server does not say what you may do (it predates affordances)"
    text = EventText()
    text.names.update(state)
    chars: dict[str, dict[str, Any]] = aff.get("chars") or {}
    lines: list[str] = []
    if char is not None:
        if char not in chars:
            return f"nothing you may do for {text.names.char(char)} ({char})"
        chars = {char: chars[char]}
    for cid, ops in chars.items():
        lines.append(f"{text.names.char(cid)} ({cid}):")
        for op, entry in ops.items():
            lines += entry_lines(text, op, entry)
    if char is None:
        lines.append("Room:")
        for op, entry in (aff.get("room") or {}).items():
            lines += entry_lines(text, op, entry)
        lines += undo_lines(text, aff.get("undo") or {})
    return "\n".join(lines)


def subject_of(args: Any) -> str | None:
    """The character a command acts for (its `char`, else its `patient`)."""
    if not isinstance(args, dict):
        return None
    found = args.get("char", args.get("patient"))
    return found if isinstance(found, str) else None
