"""The reference of every operation and event kind, as data.

The op table (`rules.engine.OPS`) says what each op accepts and who may send
it; this module says what the table cannot: what the op changes, what each
argument means, an example, its events and its own refusals. Together they
make docs/operations.md (`python3 -m scripts.gen_operations`) and
`vtt-sync client ops` / `cmd OP --help`. Tests fail when an op of the table,
an argument, or an event kind the engine emits has no entry here, so the
reference cannot fall behind the code.

Ops the server handles itself (undo, create_room, delete_room, import_room) are not in
the op table; their arguments and role are described here instead, with
kinds whose limits a test compares with the server's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from rules.engine import ADMIN_OPS, LOG_OPS, OWNER_OR_GM, UNTEND, G
from rules.engine import OPS as TABLE
from rules.errors import InvalidArgs
from rules.validate import BOOL, Arg, Kind, _int, _str, optional

# --- the arguments of the ops the server handles itself ------------------------
# Their one home: the server checks admin commands with these kinds
# (`rules.validate.check_args`), and `sync_server/core/limits.py` lists the
# limits with every other one.

# Room ids appear in URLs, paths and every hello: short and plain.
MAX_ROOM_ID = 64
ROOM_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_ROOM_ID_RE = re.compile(ROOM_ID_PATTERN)
# Names given to create_room: shown in the page's title bar.
MAX_ROOM_NAME = 100
# An upload id of import_room: chosen by the client, like a command id.
MAX_UPLOAD_ID = 64

# The largest room file `import_room` takes. The server holds the whole file
# (and then its parsed form, several times larger) in memory while it checks
# it: 64 MiB is a room of ~100,000 logged versions, far beyond a long
# campaign, and bounded on a small server.
MAX_IMPORT_BYTES = 64 * 1024 * 1024
# Characters of the file per `import_room` part. Frames from clients are at
# most 64 KiB; the file is ASCII JSON, which the JSON subprotocol may escape
# to up to twice its size (each quote gains a backslash): 30,000 fits either
# subprotocol with room for the frame's envelope.
IMPORT_CHUNK_CHARS = 30_000
# Parts of one import: the file's bound over the part size, rounded up.
MAX_IMPORT_PARTS = -(-MAX_IMPORT_BYTES // IMPORT_CHUNK_CHARS)


def valid_room_id(value: Any) -> bool:
    return isinstance(value, str) and _ROOM_ID_RE.fullmatch(value) is not None


def _check_room_id(name: str, value: Any) -> str:
    if not valid_room_id(value):
        raise InvalidArgs(f"{name} must be 1-{MAX_ROOM_ID} letters, digits, '_', '-' or '.'")
    room: str = value
    return room


def _check_room_name(name: str, value: Any) -> str:
    if not (isinstance(value, str) and value.strip() and len(value) <= MAX_ROOM_NAME):
        raise InvalidArgs(f"{name} must be a non-empty string of at most {MAX_ROOM_NAME}")
    text: str = value
    return text


ROOM_ID = Kind(
    _check_room_id,
    "id",
    1,
    MAX_ROOM_ID,
    note="letters, digits, '_', '-', '.', starting with a letter or digit",
)
ROOM_NAME = attrs.evolve(_str(1, MAX_ROOM_NAME), check=_check_room_name)
UPLOAD_ID = _str(1, MAX_UPLOAD_ID, "id")
IMPORT_PART = _int(0, MAX_IMPORT_PARTS - 1)
IMPORT_PARTS = _int(1, MAX_IMPORT_PARTS)
IMPORT_DATA = _str(1, IMPORT_CHUNK_CHARS)


@attrs.frozen
class OpDoc:
    """What one op does, in words, beside its row of the op table."""

    summary: str  # one line, for `vtt-sync client ops`
    changes: str  # what it changes in the room (or on the server)
    meaning: dict[str, str]  # argument -> what it is (every argument of the op)
    example: dict[str, Any]  # the args of one valid command
    events: tuple[str, ...] = ()  # the event kinds it may emit, in their usual order
    errors: tuple[tuple[str, str], ...] = ()  # its own refusals: (code, when)
    result: str = "{}"  # the ack's result
    rules: str = ""  # docs/rules.md ids it applies
    undoable: bool = True
    # Server-handled ops only (not in the op table): their arguments and role.
    args: dict[str, Arg] | None = None
    role: str | None = None


@attrs.frozen
class EventDoc:
    """One event kind: what it reports, its fields, an example."""

    meaning: str
    fields: dict[str, str]  # field -> meaning (besides `kind`, and `at`)
    example: dict[str, Any]
    by: str = "rules engine"  # who emits it


TIMED_EVENTS = ("pp", "condition", "roll", "rest", "recover", "tend")

OPS: dict[str, OpDoc] = {
    "update_room": OpDoc(
        "change the room's settings: its name, a round's length, passing over the dead",
        "The room's `name`, `round_seconds` (world seconds per combat round: the dying PP "
        "clock out of combat and the time a round adds to the clock) and `skip_dead` "
        "(whether an end of turn passes over dead combatants, T3; from the next end of turn).",
        {
            "name": "the room's new name",
            "round_seconds": "world seconds per combat round (default 6)",
            "skip_dead": "pass over dead combatants' turns (default true); false: a dead "
            "combatant's turn comes round and the GM ends it",
        },
        {"name": "Thursday table", "round_seconds": 6},
        ("room",),
        (("invalid_args", "none of `name`, `round_seconds`, `skip_dead` is given"),),
        rules="T3",
    ),
    "add_user": OpDoc(
        "invite a GM, a player or an observer: returns their token",
        "Adds a user to the room; the server makes their token, which this ack alone "
        "carries (never a patch, an event or a log line). The GM's page turns it into a "
        "link to send them: `http://HOST:PORT/#room=ROOM&token=TOKEN`.",
        {"name": "how the table calls them", "role": "gm, player or observer"},
        {"name": "Dana", "role": "player"},
        ("user",),
        result='{"user": "u5", "token": "..."}',
        undoable=False,
    ),
    "remove_user": OpDoc(
        "revoke a user: their link stops working",
        "Removes the user; their characters get `owner` null; their open connections "
        "are closed (4403).",
        {"user": "the user's id (u2, ...)"},
        {"user": "u5"},
        ("user",),
        (("rule", "the user is the room's last GM"),),
        undoable=False,
    ),
    "rotate_token": OpDoc(
        "give a user a new token (a new link); the old one stops working",
        "The user's token is replaced by a new one, which this ack alone carries; their "
        "open connections are closed (4403).",
        {"user": "the user's id"},
        {"user": "u5"},
        ("user",),
        result='{"user": "u5", "token": "..."}',
        undoable=False,
    ),
    "add_character": OpDoc(
        "add a character (its id is in the result)",
        "A new character, conscious, its current PV, PE and PP at their maxima unless given. "
        "Its id is `id`, else the next free `cN`.",
        {
            "name": "the character's name",
            "level": "its level (R2/R3 recover `level` PV)",
            "pv_max": "hit points (PV) maximum",
            "pe_max": "stamina (PE) maximum, before Con damage (A2)",
            "pp_max": "perseverance (PP) maximum",
            "abilities": "the six ability scores",
            "medicine": "its Medicine bonus (first aid S1, tending L4)",
            "owner": "the player (user id) who acts for it; absent or null: the GM",
            "id": "the character's id (default: the next free c1, c2, ...)",
            "pv": "current PV (default pv_max)",
            "pe": "current PE (default the effective pe_max)",
            "pp": "current PP (default pp_max)",
            "shown": "what players and observers see of it: full, status (name, level, "
            "condition; no numbers) or hidden; default full for a player's character, "
            "status for the GM's or nobody's (docs/views.md)",
        },
        {
            "name": "Aline",
            "level": 3,
            "pv_max": 20,
            "pe_max": 15,
            "pp_max": 6,
            "abilities": {"str": 10, "dex": 14, "con": 14, "int": 10, "wis": 12, "cha": 8},
            "medicine": 5,
            "owner": "u2",
        },
        ("character",),
        (
            ("conflict", "a character with this `id` exists"),
            ("rule", "the sheet breaks an invariant (a current value above its maximum, pv 0)"),
        ),
        result='{"char": "c5"}',
    ),
    "update_character": OpDoc(
        "correct a character's sheet (any field, condition included)",
        "Sets the given fields. A change of condition runs that condition's entry and exit "
        "actions (clocks, rests, tending). A result that breaks an invariant is refused, "
        "never repaired. `shown` changes what players and observers see of it: each of "
        "them gets a patch adding or removing what they may now see.",
        {"char": "the character's id", "set": "the fields to change and their new values"},
        {"char": "c1", "set": {"pv": 12, "owner": "u3"}},
        ("condition", "rest", "tend", "character"),
        (("rule", "the result breaks an invariant (pv above pv_max, dying with pv 1, ...)"),),
    ),
    "remove_character": OpDoc(
        "remove a character",
        "Removes the character; it stops tending, leaves the combat order (the turn passes "
        "on if it was its turn; an empty order ends the combat).",
        {"char": "the character's id"},
        {"char": "c4"},
        ("tend", "combat", "turn", "clock", *TIMED_EVENTS, "character"),
    ),
    "combat_start": OpDoc(
        "start a combat in the given order",
        "A combat: round 1, the first character's turn (T1). Rests of the combatants end (R4).",
        {"order": "the combatants' ids, in turn order"},
        {"order": ["c2", "c1", "c3"]},
        ("rest", "combat", "turn"),
        (
            ("rule", "a combat is running already"),
            ("rule", "a character appears twice, or is dead (D6)"),
        ),
        rules="T1",
    ),
    "combat_end": OpDoc(
        "end the combat",
        "No combat. A dying combatant now loses PP by world time (D5).",
        {},
        {},
        ("combat",),
        (("rule", "no combat is running"),),
        rules="T1, D5",
    ),
    "end_turn": OpDoc(
        "end the current character's turn",
        "The end-of-turn rules of the current character (a dying one loses 1 PP, D5; "
        "its S3/S4 allowance resets), then the next turn, passing over dead combatants "
        "unless the room's `skip_dead` is off (T3); after the last combatant a new "
        "round starts and the clock advances by `round_seconds` (T2).",
        {
            "char": "the character whose turn it is",
            "round": "the current round; a stale one is refused, so two clicks end one turn",
        },
        {"char": "c2", "round": 1},
        ("pp", "condition", "turn", "clock", *TIMED_EVENTS),
        (("conflict", "no combat, or that turn is over (another character, another round)"),),
        rules="T1, T2, T3, D5",
    ),
    "advance_clock": OpDoc(
        "move the world clock forward; the timed rules fire",
        "The clock; every timed rule inside the interval fires at its own instant, in order: "
        "dying PP losses (D5), hourly stability checks (L1-L5), rests completing (R1-R3).",
        {
            "seconds": "world seconds to add",
            "from": "the clock the sender saw; if the room's clock is elsewhere the advance is "
            "refused, so an advance sent twice advances once",
        },
        {"seconds": 3600},
        ("clock", *TIMED_EVENTS),
        (("conflict", "`from` is not the room's clock"),),
        rules="T2",
    ),
    "set_order": OpDoc(
        "change the running combat's order: reorder, add, remove combatants",
        "The combat order. Without `turn` the current combatant keeps its turn (if it left, "
        "the next one after it has it, passing over the dead, T3); `turn` says whose turn "
        "it is now, its length ending the round (the clock advances, T2). No end-of-turn "
        "rule runs; a combatant whose turn moves away has had it passed over (a dying one "
        "loses 1 PP at the end of its next turn, D5). Newcomers' rests end (R4); their "
        "dying PP loss moves to their turns (D5); leavers are out of combat from now (D5, "
        "S4 count a full round from here). Initiative totals (T4) of leavers are dropped.",
        {
            "order": "the combatants' ids, in turn order",
            "turn": "whose turn it is now: an index in `order`, or its length to end the round",
        },
        {"order": ["c2", "c1", "c3"]},
        ("rest", "combat", "turn", "clock", *TIMED_EVENTS),
        (("rule", "no combat is running; a character appears twice, or is dead (D6)"),),
        rules="T1, T2, T3, D5, R4, S4",
    ),
    "roll_initiative": OpDoc(
        "roll initiative: the combat order sorted by d20 + Dex modifier + bonus",
        "Each character rolls d20 + its Dexterity modifier (ability damage included) + its "
        "`bonus` (T4); the order is by total, ties by the higher Dexterity modifier, then "
        "character order. With no combat running, `chars` are the combatants and the "
        "combat starts in that order (as combat_start). In a combat, `chars` (default: "
        "every living combatant) roll and the order is sorted again: combatants never "
        "rolled for come last; the current combatant keeps its turn, except in round 1 "
        "before the first turn ends, when the top of the order has it. The totals stay in "
        "`initiative` (the GM's only) until the combat ends. Dice: `rolls`, then the queue "
        "(in character order), then the server's (X1).",
        {
            "chars": "the characters who roll (without a combat: required, the combatants); "
            "default every living combatant",
            "bonus": "a bonus per character, added to its roll",
            "rolls": "natural d20s the GM rolled at the table, per character (X1)",
        },
        {"chars": ["c1", "c2", "c3"], "bonus": {"c2": 2}},
        ("roll", "rest", "combat", "turn", "clock", *TIMED_EVENTS),
        (
            (
                "rule",
                "no combat and no `chars`; a character twice, dead (D6), or not in the "
                "running combat; a `bonus` or `rolls` for a character who does not roll",
            ),
        ),
        rules="T4, X1, X2, T3",
    ),
    "damage": OpDoc(
        "deal damage: PE first, then PV",
        "PE then PV (D1); 0 PV makes a conscious character dying (D2); damage reaching the "
        "PV of a dying one costs 1 PP (D3); a rest ends (D4). Nonlethal damage knocks out "
        "instead (N1).",
        {
            "char": "the character hit",
            "amount": "points of damage",
            "nonlethal": "nonlethal damage (N1)",
            "pv_only": "skip PE: the damage goes to PV",
        },
        {"char": "c1", "amount": 8},
        ("rest", "damage", "condition", "pp", "tend"),
        rules="D1-D5, N1",
    ),
    "heal": OpDoc(
        "heal PV; 1 PV or more wakes",
        "PV up to pv_max; a dying or stable character with 1 PV or more is conscious; "
        "`stabilize` makes a dying one stable even at 0 PV.",
        {
            "char": "the character healed",
            "amount": "PV to give",
            "stabilize": "also stabilise a dying character",
        },
        {"char": "c1", "amount": 5},
        ("heal", "condition", "tend"),
        rules="S2",
    ),
    "first_aid": OpDoc(
        "a Medicine check DC 15 on a dying character",
        "The medic rolls d20 + medicine against DC 15; success makes the patient stable. "
        "A failure is still a version, with its roll.",
        {
            "char": "the medic (the GM or its owner sends it)",
            "patient": "the dying character",
            "roll": "a natural d20 the GM rolled at the table (GM only, X1)",
        },
        {"char": "c2", "patient": "c1"},
        ("roll", "condition"),
        (
            ("rule", "the medic is the patient, or is not conscious; the patient is not dying"),
            ("forbidden", "a player sends `roll`"),
        ),
        rules="S1, X1, X2",
    ),
    "stabilize": OpDoc(
        "a dying character spends PP to become stable",
        "Spends pp_max // 4 PP (1 to 3); the character is stable.",
        {"char": "the dying character"},
        {"char": "c1"},
        ("pp", "condition"),
        (("rule", "not dying; not enough PP; S3 or S4 used already this turn"),),
        rules="S3",
    ),
    "stay_in_fight": OpDoc(
        "a stable character spends 1 PP to wake with 1 PV",
        "1 PP for 1 PV; the character is conscious.",
        {"char": "the stable character"},
        {"char": "c1"},
        ("pp", "condition"),
        (("rule", "not stable; no PP; S3 or S4 used already this turn"),),
        rules="S4",
    ),
    "tend": OpDoc(
        "a conscious character tends a stable one",
        "The patient's `healer`: before each hourly check the healer rolls Medicine DC 15; "
        "a success gives +2 and no death on that check.",
        {"char": "the healer", "patient": "the stable character"},
        {"char": "c2", "patient": "c1"},
        ("tend",),
        (
            (
                "rule",
                "the healer is the patient, not conscious, or resting; the patient is not "
                "stable, or is tended already",
            ),
        ),
        rules="L4",
    ),
    "untend": OpDoc(
        "stop tending a patient",
        "The patient has no healer.",
        {"patient": "the tended character"},
        {"patient": "c1"},
        ("tend",),
        (("rule", "nobody tends this patient"),),
        rules="L4",
    ),
    "rest": OpDoc(
        "start a short rest (10 min), a night (8 h) or bed rest (24 h)",
        "The character's `activity`; the benefits apply when the clock reaches its end "
        "(R1-R3); damage, combat or falling unconscious interrupt it (R4).",
        {"char": "the resting character", "kind": "short, night or bed"},
        {"char": "c1", "kind": "night"},
        ("rest",),
        (
            (
                "rule",
                "not conscious; in a running combat; resting already; tending someone; "
                "a short rest with 0 PP",
            ),
        ),
        rules="R1-R4",
    ),
    "stop_rest": OpDoc(
        "stop a rest early, without its benefit",
        "The rest ends with no benefit.",
        {"char": "the resting character"},
        {"char": "c1"},
        ("rest",),
        (("rule", "the character is not resting"),),
        rules="R4",
    ),
    "ability_damage": OpDoc(
        "temporary damage to an ability",
        "The ability's damage grows (never above the score); Con damage lowers pe_max "
        "(PE capped to it) and kills when it equals the score.",
        {
            "char": "the character",
            "ability": "str, dex, con, int, wis or cha",
            "amount": "points of damage",
        },
        {"char": "c1", "ability": "con", "amount": 2},
        ("ability", "condition"),
        rules="A1, A2",
    ),
    "ability_restore": OpDoc(
        "restore points of ability damage",
        "The ability's damage shrinks (never below 0); a regained Con modifier raises "
        "pe_max, PE unchanged.",
        {
            "char": "the character",
            "ability": "str, dex, con, int, wis or cha",
            "amount": "points restored",
        },
        {"char": "c1", "ability": "con", "amount": 2},
        ("ability",),
        rules="A3",
    ),
    "queue_rolls": OpDoc(
        "queue physical d20s for the next automated checks",
        "The dice queue: the next checks the server makes use these natural d20s, in order, "
        "before its own dice.",
        {"rolls": "natural d20 results, in order"},
        {"rolls": [15, 4]},
        ("rolls_queued",),
        (("rule", "the queue would hold more than 100 rolls"),),
        rules="X1",
    ),
    "undo": OpDoc(
        "revert the latest command not yet undone",
        "The room as it was before that command (the dice queue included), as a new version; "
        "repeated undos walk back. User and token commands are skipped: users stay as they "
        "are, and a restored character whose owner was removed since gets owner null.",
        {},
        {},
        ("undo",),
        (
            ("conflict", "nothing left to undo"),
            ("rule", "the restored room would break an invariant"),
        ),
        result='{"undone": 28, "op": "first_aid"}',
        undoable=False,
        args={},
        role="G",
    ),
    "create_room": OpDoc(
        "create a room and its first GM (admin session)",
        "A new room with one GM user; the ack carries the GM's token "
        "(`vtt-sync client create-room NAME` prints the GM's link).",
        {
            "room": "the room's id, used in links",
            "name": "the room's name",
            "gm_name": "the first GM's name (default GM)",
        },
        {"room": "thursday", "name": "Thursday table", "gm_name": "Maya"},
        (),
        (("conflict", "a room with this id exists"),),
        result='{"room": "thursday", "user": "u1", "gm_token": "..."}',
        undoable=False,
        args={"room": Arg(ROOM_ID), "name": Arg(ROOM_NAME), "gm_name": optional(ROOM_NAME)},
        role="A",
    ),
    "delete_room": OpDoc(
        "delete a room and its log (admin session)",
        "The room's queued commands finish; the room and its log are deleted; its "
        "connections close with 4404.",
        {"room": "the room's id"},
        {"room": "thursday"},
        (),
        (("not_found", "no room with this id"),),
        result='{"room": "thursday"}',
        undoable=False,
        args={"room": Arg(ROOM_ID)},
        role="A",
    ),
    "reissue_gm_link": OpDoc(
        "a new link for a room's GM who lost theirs (admin session)",
        "The GM's token is rotated as `rotate_token` does (in the room's log): the ack "
        "carries the new one, the old link stops working and the GM's sessions close with "
        "4403. Every other user keeps their link. `vtt-sync admin gm-link ROOM` prints the "
        "link; the admin page has a button for it.",
        {"room": "the room's id", "user": "which GM (default: the room's first GM)"},
        {"room": "thursday"},
        (),
        (("not_found", "no room with this id, or no such GM in it"),),
        result='{"room": "thursday", "user": "u1", "gm_token": "..."}',
        undoable=False,
        args={"room": Arg(ROOM_ID), "user": optional(UPLOAD_ID)},
        role="A",
    ),
    "import_room": OpDoc(
        "import a room file, in parts (admin session)",
        "A room exported by `vtt-sync admin export` (or another server) is created as it "
        "was: its state, its version, its whole log (so undo, history and retries work). "
        "The file travels in parts of at most 30,000 characters, in order, under one "
        "`upload` id; the last part's ack says the room is stored. Without token hashes in "
        "the file, every user gets a new token (in the last ack, once). With `replace`, an "
        "existing room is replaced at once and its connections close (1012); without token "
        "hashes in the file their old tokens are refused (4401): each user needs their new link. "
        "`vtt-sync admin import FILE` does all this.",
        {
            "room": "the room's id (as in the file)",
            "upload": "an id for this upload, the same in every part",
            "part": "this part's number, from 0",
            "parts": "how many parts the file was cut into",
            "data": "this part of the file's text",
            "replace": "replace the room if it exists (default false)",
        },
        {"room": "thursday", "upload": "up-1", "part": 0, "parts": 1, "data": '{"format": ...}'},
        (),
        (
            ("conflict", "the room exists and replace is not set; another import is running"),
            ("invalid_args", "a part out of order; a file that is not a valid room"),
        ),
        result='{"room": "thursday", "v": 57, "users": 4, "tokens": {"u1": "...", "u2": "..."}}',
        undoable=False,
        args={
            "room": Arg(ROOM_ID),
            "upload": Arg(UPLOAD_ID),
            "part": Arg(IMPORT_PART),
            "parts": Arg(IMPORT_PARTS),
            "data": Arg(IMPORT_DATA),
            "replace": optional(BOOL, False),
        },
        role="A",
    ),
}

EVENTS: dict[str, EventDoc] = {
    "roll": EventDoc(
        "a check: d20 + modifier + bonus against a DC (X2)",
        {
            "char": "who rolls",
            "check": "medicine, constitution or initiative",
            "d20": "the natural die",
            "mod": "the modifier (medicine bonus, Con modifier, Dex modifier)",
            "bonus": "a bonus (+2 from a successful tending, L4; the GM's initiative bonus)",
            "total": "d20 + mod + bonus (raised to 10 after a successful tending, L4)",
            "dc": "the difficulty, or null for the hourly stability check",
            "outcome": "success, failure; for stability checks wake, stay or die; for "
            "initiative rolled",
            "source": "where the d20 came from: server, queued (X1) or gm (`roll`)",
            "patient": "first aid and tending: the character cared for",
            "hour": "stability checks: which hourly check (1-8)",
        },
        {
            "kind": "roll",
            "char": "c2",
            "check": "medicine",
            "d20": 13,
            "mod": 1,
            "bonus": 0,
            "total": 14,
            "dc": 15,
            "outcome": "failure",
            "source": "server",
            "patient": "c1",
        },
    ),
    "damage": EventDoc(
        "damage taken (D1)",
        {
            "char": "the character hit",
            "amount": "the damage dealt",
            "pe": "PE change (0 or negative)",
            "pv": "PV change (0 or negative)",
            "nonlethal": "nonlethal damage (N1)",
        },
        {"kind": "damage", "char": "c1", "amount": 18, "pe": -15, "pv": -3, "nonlethal": False},
    ),
    "heal": EventDoc(
        "healing (S2)",
        {
            "char": "the character healed",
            "amount": "the healing given",
            "pv": "PV gained (capped at pv_max)",
            "stabilize": "the heal also stabilises a dying character",
        },
        {"kind": "heal", "char": "c1", "amount": 5, "pv": 5, "stabilize": False},
    ),
    "condition": EventDoc(
        "a change of condition",
        {
            "char": "the character",
            "from": "conscious, dying, stable or dead",
            "to": "conscious, dying, stable or dead",
            "cause": "what did it: damage, first_aid, heal, stabilize, stay_in_fight, dying, "
            "stability_check, long_rest, nonlethal, constitution_damage, correction",
        },
        {"kind": "condition", "char": "c1", "from": "dying", "to": "stable", "cause": "first_aid"},
    ),
    "pp": EventDoc(
        "PP spent or lost",
        {
            "char": "the character",
            "delta": "PP change (negative)",
            "cause": "dying (D5), damage (D3), stabilize (S3), stay_in_fight (S4), short_rest (R1)",
            "rounds": "dying out of combat: the rounds of world time this loss covers (one "
            "event per clock advance, however long)",
            "at": "timed: the world second it happened (for a dying run, the last loss)",
        },
        {"kind": "pp", "char": "c1", "delta": -3, "cause": "dying", "rounds": 3, "at": 18},
    ),
    "clock": EventDoc(
        "the world clock moved (T2)",
        {"from": "world second before", "to": "world second after"},
        {"kind": "clock", "from": 0, "to": 3600},
    ),
    "combat": EventDoc(
        "a combat starts, ends, or its order changes (T1, set_order)",
        {
            "outcome": "start, end, or order",
            "order": "start, order: the combatants, in turn order",
            "joined": "order: the characters who joined",
            "left": "order: the characters who left",
        },
        {"kind": "combat", "outcome": "start", "order": ["c2", "c1"]},
    ),
    "turn": EventDoc(
        "a character's turn begins (T1)",
        {
            "char": "whose turn it is",
            "round": "the round",
            "turn": "its index in the combat order",
        },
        {"kind": "turn", "char": "c1", "round": 2, "turn": 1},
    ),
    "rest": EventDoc(
        "a rest starts, completes or is interrupted (R1-R4)",
        {
            "char": "the resting character",
            "rest": "short, night or bed",
            "outcome": "started, complete, interrupted or no_benefit",
            "ends": "started: the world second it completes",
            "cause": "interrupted: damage, combat, unconscious, dead, stopped; no_benefit: no_pp",
        },
        {"kind": "rest", "char": "c1", "rest": "night", "outcome": "started", "ends": 28800},
    ),
    "recover": EventDoc(
        "what a completed rest (or the L2 wake-up) gave back",
        {
            "char": "the character",
            "cause": "short_rest, night_rest, bed_rest or long_rest (L2)",
            "pv": "PV gained",
            "pe": "PE gained",
            "pp": "PP gained",
            "abilities": "points of damage healed on each ability",
        },
        {
            "kind": "recover",
            "char": "c1",
            "cause": "night_rest",
            "pv": 3,
            "pe": 15,
            "pp": 2,
            "abilities": 1,
        },
    ),
    "tend": EventDoc(
        "tending starts or ends (L4)",
        {
            "char": "the healer",
            "patient": "the tended character",
            "outcome": "start or end",
            "cause": "end: untend, not_stable, healer_down, removed",
        },
        {"kind": "tend", "char": "c2", "patient": "c1", "outcome": "start"},
    ),
    "ability": EventDoc(
        "ability damage or restoration (A1-A3)",
        {
            "char": "the character",
            "ability": "str, dex, con, int, wis or cha",
            "delta": "change of the damage (positive: damage, negative: restored)",
            "damage": "the ability's damage now",
            "mod": "the ability's modifier now",
        },
        {"kind": "ability", "char": "c1", "ability": "con", "delta": 2, "damage": 2, "mod": 1},
    ),
    "character": EventDoc(
        "a character added, corrected or removed",
        {
            "char": "the character",
            "change": "added, updated or removed",
            "name": "added, removed: its name",
            "fields": "updated: the fields changed",
        },
        {"kind": "character", "char": "c5", "change": "added", "name": "Aline"},
    ),
    "user": EventDoc(
        "a user added or removed, or their token replaced",
        {
            "user": "the user's id",
            "change": "added, removed or token_rotated",
            "name": "added, removed: their name (a removed user's is known by none after)",
            "role": "added: gm, player or observer",
        },
        {
            "kind": "user",
            "user": "u5",
            "change": "added",
            "name": "Chloe's player",
            "role": "player",
        },
    ),
    "room": EventDoc(
        "the room's settings changed",
        {
            "name": "the room's name now",
            "round_seconds": "seconds per round now",
            "skip_dead": "whether dead combatants are passed over now (T3)",
        },
        {"kind": "room", "name": "Thursday table", "round_seconds": 6, "skip_dead": True},
    ),
    "rolls_queued": EventDoc(
        "d20s added to the dice queue (X1)",
        {"rolls": "the d20s added", "queued": "how many wait in the queue now"},
        {"kind": "rolls_queued", "rolls": [15, 4], "queued": 2},
    ),
    "undo": EventDoc(
        "a command was undone",
        {
            "undone": "the version undone",
            "op": "that version's op",
            "by": "who had sent that command (user id)",
        },
        {"kind": "undo", "undone": 28, "op": "first_aid", "by": "u3"},
        by="server",
    ),
}

# Names the examples use (the demo table's), to show events as sentences.
EXAMPLE_NAMES: dict[str, dict[str, str]] = {
    "characters": {"c1": "Aline", "c2": "Bastien", "c3": "Chloe", "c4": "Gorgol", "c5": "Aline"},
    "users": {"u1": "Maya", "u2": "Aline's player", "u3": "Bastien's player",
              "u5": "Chloe's player"},
}  # fmt: skip

# Every event may carry `at` (the world second a timed rule fired at, during
# advance_clock or a round's end) besides its own fields.
COMMON_EVENT_FIELDS = {
    "kind": "the event kind",
    "at": "on the events of timed rules (fired by advance_clock or a round's end), "
    "the world second the rule fired at",
}


# --- reading the table and the catalog together (docs, CLI help) ----------------

ROLE_TEXT = {
    G: "the GM",
    OWNER_OR_GM: "the GM, or the player who owns `char`",
    UNTEND: "the GM, or the player who owns the patient or its healer",
    "A": "an admin session (the server's admin token, no room)",
}
ROLE_SHORT = {G: "GM", OWNER_OR_GM: "GM, owner", UNTEND: "GM, owners", "A": "admin"}


def all_ops() -> list[str]:
    """The table's ops in their order, then the server's own (room, then admin)."""
    return [*TABLE, *sorted(LOG_OPS - set(TABLE)), *sorted(ADMIN_OPS - set(TABLE))]


def op_args(name: str) -> dict[str, Arg]:
    spec = TABLE.get(name)
    if spec is not None:
        return spec.args
    doc = OPS[name]
    if doc.args is None:
        raise KeyError(f"{name}: an op the server handles needs `args` in rules/catalog.py")
    return doc.args


def op_role(name: str) -> str:
    spec = TABLE.get(name)
    role = spec.role if spec is not None else OPS[name].role
    if role not in ROLE_TEXT:
        raise KeyError(f"{name}: role {role!r} has no description in rules/catalog.py")
    return role


# The order of refusal codes (docs/protocol.md, "Refusals"; the server's
# wire/protocol.py holds the same tuple; tests/server/test_apidoc.py compares).
ERROR_ORDER = (
    "rate_limited", "bad_frame", "unknown_op", "invalid_args", "not_found", "forbidden",
    "conflict", "rule", "internal",
)  # fmt: skip


def op_errors(name: str) -> list[tuple[str, str]]:
    """Every refusal of an op, (code, when), in the order they are checked:
    those the op table implies, then the catalog's own."""
    spec = TABLE.get(name)
    args = op_args(name)
    role = op_role(name)
    out: list[tuple[str, str]] = []
    if args:
        out.append(("invalid_args", "an argument is missing, unknown, mistyped or out of range"))
    else:
        out.append(("invalid_args", "any argument is given"))
    if spec is not None and spec.chars:
        names = ", ".join(f"`{c}`" for c in spec.chars)
        out.append(("not_found", f"{names} names no character of the room"))
    if spec is not None and spec.users:
        names = ", ".join(f"`{u.split('.')[-1]}`" for u in spec.users)
        out.append(("not_found", f"{names} names no user of the room"))
    if role == "A":
        out.append(("forbidden", "sent in a room session"))
    else:
        who = ROLE_TEXT[role]
        out.append(
            ("forbidden", f"the sender is not {who} (an observer or admin session never is)")
        )
    if spec is not None and spec.chars and not spec.on_dead:
        out.append(("rule", "a character it names is dead (D6)"))
    out.extend(OPS[name].errors)
    return sorted(out, key=lambda e: ERROR_ORDER.index(e[0]))


def describe_arg(arg: Arg) -> tuple[str, str]:
    """(required / optional with its default, the values it accepts)."""
    kind = arg.check
    accepts = kind.describe() if isinstance(kind, Kind) else "see the op's text"
    if arg.required:
        need = "required"
    elif arg.default is None:
        need = "optional"
    else:
        need = f"optional, default {json.dumps(arg.default)}"
    return need, accepts
