"""Events as sentences, from the table the tracker page reads too.

`client_stub/web/events.json` holds one rule per event kind (templates,
with conditions on fields); the page's `event-text.js` and this module
interpret it the same way, so `watch`, `cmd` and the page say the same
thing ("Bastien rolls Medicine for Chloe: d20 13 +1 = 14 vs DC 15 — failure").
Names replace ids: `Names` remembers every character and user it has seen,
so an event about someone removed since still reads with their name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any

TEXTS: dict[str, Any] = json.loads(
    resources.files("client_stub").joinpath("web/events.json").read_text(encoding="utf-8")
)

# {field}, {field|format} or {field|label:TABLE}; a field may be kind.field (commands).
PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w.]*)(?:\|([a-z]+)(?::(\w+))?)?\}")
MISSING = "?"

# A piece of a sentence: its text and the event field it shows (None for plain words).
Segment = tuple[str, str | None]


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


def signed(n: Any) -> str:
    n = int(n or 0)
    return f"+{n}" if n >= 0 else str(n)


def _key(value: Any) -> str:
    """A field's value as a `case` key, as JSON writes it (true, null, 3)."""
    return value if isinstance(value, str) else json.dumps(value)


def _set(value: Any) -> bool:
    return value is not None


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, "") and value != []


class Names:
    """Character and user names by id, kept after they leave the room."""

    def __init__(self) -> None:
        self.chars: dict[str, str] = {}
        self.users: dict[str, str] = {}

    def update(self, state: dict[str, Any] | None) -> None:
        if not state:
            return
        for cid, c in (state.get("characters") or {}).items():
            if c.get("name"):
                self.chars[cid] = str(c["name"])
        for uid, u in (state.get("users") or {}).items():
            if u.get("name"):
                self.users[uid] = str(u["name"])

    def learn(self, cid: str, name: str) -> None:
        """A name an event says (a character's arrival or departure): kept
        unless a state named it already."""
        self.chars.setdefault(cid, str(name))

    def char(self, cid: Any) -> str:
        return self.chars.get(cid, str(cid)) if isinstance(cid, str) else MISSING

    def user(self, uid: Any) -> str:
        return self.users.get(uid, str(uid)) if isinstance(uid, str) else MISSING


class EventText:
    """Renders events with the table of texts and the names known so far.

    `history(v)` (optional) returns the events of version `v` if the caller
    has them, so an undo can say what it undid ("Bastien's first aid on Chloe")."""

    def __init__(
        self,
        names: Names | None = None,
        texts: dict[str, Any] = TEXTS,
        history: Callable[[int], list[dict[str, Any]] | None] | None = None,
    ) -> None:
        self.names = names or Names()
        self.texts = texts
        self.history = history

    def complete(self, event: dict[str, Any], ops: Iterable[Any] | None) -> dict[str, Any]:
        """An event as complete as the patch's ops allow: a `character` event
        stripped to kind and char (a character seen at the status level, as a
        server before issue 33 sent it, docs/views.md) gets the `change` its
        ops show (the character set whole: added, with its name; deleted:
        removed), so a status NPC "joins the table" for players. A
        `character` event's name is remembered (`Names.learn`), so the log of
        someone removed before the client started reads with their name, not
        their id. Other events come back as they are."""
        cid = event.get("char")
        name = event.get("name")
        if event.get("kind") == "character" and isinstance(cid, str) and isinstance(name, str):
            self.names.learn(cid, name)
        if event.get("kind") != "character" or "change" in event or not isinstance(cid, str):
            return event
        for op in ops or ():
            path = op[1] if len(op) > 1 else None
            if not (isinstance(path, list) and path == ["characters", cid]):
                continue
            if op[0] == "set" and isinstance(op[2], dict):
                return {**event, "change": "added", "name": op[2].get("name", self.names.char(cid))}
            if op[0] == "del":
                return {**event, "change": "removed", "name": self.names.char(cid)}
        return event

    def sentence(self, event: dict[str, Any]) -> str:
        return "".join(text for text, _ in self.segments(event))

    def segments(self, event: dict[str, Any]) -> list[Segment]:
        rule = self.texts["events"].get(event.get("kind"), self.texts["unknown"])
        out: list[Segment] = []
        self._rule(rule, event, lambda f: event.get(f), out)
        return out

    def reason(self, why: dict[str, Any]) -> str:
        """Why an action cannot be done now (an affordance's `why`: a key
        and its values) in words, from the table's `reasons`."""
        rule = self.texts.get("reasons", {}).get(why.get("key"))
        if rule is None:
            return str(why.get("key", "not possible now")).replace("_", " ")
        out: list[Segment] = []
        self._rule(rule, why, lambda f: why.get(f), out)
        return "".join(text for text, _ in out)

    def note(self, key: str, values: dict[str, Any]) -> str:
        """A character's note (rest, dying, tending...) in words, from the
        table's `notes`: the page renders the same ones from the same table."""
        out: list[Segment] = []
        self._rule(self.texts["notes"][key], values, lambda f: values.get(f), out)
        return "".join(text for text, _ in out)

    def label(self, value: Any, table: str) -> str:
        """A value's label from one of the table's `labels` (e.g. "rest")."""
        return self._label(value, table)

    def action(self, op: str) -> str:
        """An action's label (the `actions` table), e.g. "First aid"."""
        return str(self.texts.get("actions", {}).get(op, op.replace("_", " ")))

    def command(self, op: str, events: Iterable[dict[str, Any]] | None) -> str | None:
        """What a command did, from its op and its events ("Bastien's first aid
        on Chloe"); None when the events do not say enough."""
        template = self.texts["commands"].get(op)
        if template is None or events is None:
            return None
        events = list(events)

        def lookup(path: str) -> Any:
            kind, _, field = path.partition(".")
            for ev in events:
                if ev.get("kind") == kind and ev.get(field) is not None:
                    return ev[field]
            return None

        out: list[Segment] = []
        if not self._template(template, lookup, out, {}, strict=True):
            return None
        return "".join(text for text, _ in out)

    # --- the rules' interpreter ---------------------------------------------

    def _rule(
        self, rule: Any, event: dict[str, Any], get: Callable[[str], Any], out: list[Segment]
    ) -> None:
        if isinstance(rule, str):
            self._template(rule, get, out, event)
        elif isinstance(rule, list):
            for part in rule:
                self._rule(part, event, get, out)
        elif isinstance(rule, dict):
            if "join" in rule:
                self._join(rule, event, get, out)
                return
            if "each" in rule:
                for n, item in enumerate(self._each(rule, event, get)):
                    if n:
                        out.append((rule.get("sep", ", "), None))
                    out.extend(item)
                return
            if "if" in rule:
                branch = rule.get("then") if _truthy(get(rule["if"])) else rule.get("else")
            elif "has" in rule:
                branch = rule.get("then") if _set(get(rule["has"])) else rule.get("else")
            elif "case" in rule:
                branch = rule["of"].get(_key(get(rule["case"])), rule.get("else"))
            else:
                raise ValueError(f"unknown rule {rule!r}")
            if branch is not None:
                self._rule(branch, event, get, out)
        else:
            raise ValueError(f"unknown rule {rule!r}")

    def _each(
        self, rule: dict[str, Any], event: dict[str, Any], get: Callable[[str], Any]
    ) -> list[list[Segment]]:
        """`then` once per entry of the field `each` names (an object's keys in
        order, or a list's items), with `key` and `value` read as fields."""
        value = get(rule["each"])
        if isinstance(value, dict):
            entries = list(value.items())
        elif isinstance(value, list):
            entries = list(enumerate(value))
        else:
            entries = []
        items = []
        for k, v in entries:

            def lookup(f: str, k: Any = k, v: Any = v) -> Any:
                return k if f == "key" else v if f == "value" else get(f)

            part: list[Segment] = []
            self._rule(rule["then"], event, lookup, part)
            items.append(part)
        return items

    def _join(
        self,
        rule: dict[str, Any],
        event: dict[str, Any],
        get: Callable[[str], Any],
        out: list[Segment],
    ) -> None:
        """The non-empty parts (an `each` counts as one part per entry),
        joined with `sep` (", ") and the last with `last` (" and "); `none`
        when every part is empty."""
        parts: list[list[Segment]] = []
        for part in rule["join"]:
            if isinstance(part, dict) and "each" in part:
                parts.extend(self._each(part, event, get))
            else:
                piece: list[Segment] = []
                self._rule(part, event, get, piece)
                parts.append(piece)
        parts = [p for p in parts if "".join(text for text, _ in p)]
        if not parts:
            if rule.get("none") is not None:
                self._rule(rule["none"], event, get, out)
            return
        for i, part in enumerate(parts):
            if i:
                last = i == len(parts) - 1
                out.append((rule.get("last", " and ") if last else rule.get("sep", ", "), None))
            out.extend(part)

    def _template(
        self,
        template: str,
        get: Callable[[str], Any],
        out: list[Segment],
        event: dict[str, Any],
        strict: bool = False,
    ) -> bool:
        """Append the filled template; with `strict`, False (and nothing
        appended) when a field is missing."""
        pieces: list[Segment] = []
        pos = 0
        for m in PLACEHOLDER.finditer(template):
            if m.start() > pos:
                pieces.append((template[pos : m.start()], None))
            field, fmt, arg = m.group(1), m.group(2), m.group(3)
            value = get(field)
            if value is None and strict:
                return False
            pieces.append((self._format(value, fmt, arg, event), field.rpartition(".")[2]))
            pos = m.end()
        if pos < len(template):
            pieces.append((template[pos:], None))
        out.extend(pieces)
        return True

    def _format(self, value: Any, fmt: str | None, arg: str | None, event: dict[str, Any]) -> str:
        if fmt == "command":
            return self._undone(event)
        if value is None:
            return MISSING
        if fmt == "char":
            return self.names.char(value)
        if fmt == "chars":
            return ", ".join(self.names.char(v) for v in value or [])
        if fmt == "user":
            return self.names.user(value)
        if fmt == "signed":
            return signed(value)
        if fmt == "abs":
            return str(abs(int(value)))
        if fmt == "clock":
            return format_clock(value)
        if fmt == "duration":
            return format_duration(value)
        if fmt == "words":
            return str(value).replace("_", " ")
        if fmt == "label":
            return self._label(value, arg)
        if fmt == "labels":
            return ", ".join(self._label(v, arg) for v in value or [])
        if fmt in (None, "list"):
            if isinstance(value, list):
                return ", ".join(str(v) for v in value)
            if isinstance(value, bool):
                return "yes" if value else "no"
            return str(value)
        raise ValueError(f"unknown format {fmt!r}")

    def _label(self, value: Any, table: str | None) -> str:
        labels = self.texts["labels"].get(table or "", {})
        return str(labels.get(_key(value), str(value).replace("_", " ")))

    def _undone(self, event: dict[str, Any]) -> str:
        """An undo event's command: said from the undone version's events when
        known, else by its op, author and version."""
        v = event.get("undone")
        events = self.history(v) if self.history is not None and isinstance(v, int) else None
        phrase = self.command(str(event.get("op")), events)
        if phrase is not None:
            return phrase
        out: list[Segment] = []
        self._template(self.texts["commands"]["fallback"], event.get, out, event)
        return "".join(text for text, _ in out)
