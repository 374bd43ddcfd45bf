"""The ops the server handles itself, as the reference describes them.

`undo` walks the room's log (rules/revert.py decides what it restores) and
the admin ops (create_room, delete_room, reissue_gm_link, import_room) touch
no room state: they are not in the op table (`rules.engine.OPS`), so their
arguments and role are declared here, with their words. Their one home: the
server checks admin commands with these kinds (`rules.validate.check_args`),
and `sync_server/core/limits.py` lists the limits with every other one.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from rules.errors import InvalidArgs
from rules.op import OpDoc
from rules.validate import BOOL, Arg, Kind, _int, _str, optional

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


SERVER_OPS: dict[str, OpDoc] = {
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
