"""Effects: what a command asks of the world outside the room's state.

Some commands change more than the state dict: a new user needs a secret
token, a removed user's token must stop working, and their open sessions
must end. The rules decide *that* (they are part of the command's meaning);
the server decides *how* (random tokens, hashes, sockets). So the engine's
outcome lists effects as data, and the server carries them out, without
ever branching on op names.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class IssueToken:
    """Give `user` a new secret token (returned in the ack only); any older
    token of that user stops working."""

    user: str


@attrs.frozen
class RevokeToken:
    """`user`'s token stops working (the user is gone)."""

    user: str


@attrs.frozen
class EndSessions:
    """`user`'s open sessions end (close 4403) once the command is stored,
    and none opened before it may send another command."""

    user: str


Effect = IssueToken | RevokeToken | EndSessions
