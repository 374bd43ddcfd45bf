"""The connection registry: which sessions this process holds, per room
and user, for the connection limits and for closing a user's or a room's
sessions (token rotated, user removed, room deleted or moved away).

Local by nature (a process can only close its own sockets), and apart from
the bus: a multi-process delivery would replace the bus, not this. It holds
`Closable`s, never sockets.
"""

from __future__ import annotations

from typing import Protocol


class Closable(Protocol):
    user: str
    closing: bool

    def close_after(self, code: int, reason: str) -> None:
        """Close once what was sent before is written."""
        ...

    def abort(self, code: int, reason: str) -> None:
        """Close now."""
        ...


class Registry:
    def __init__(self) -> None:
        self._rooms: dict[str, dict[Closable, None]] = {}

    def add(self, room: str, session: Closable) -> None:
        self._rooms.setdefault(room, {})[session] = None

    def remove(self, room: str, session: Closable) -> None:
        sessions = self._rooms.get(room)
        if sessions is not None:
            sessions.pop(session, None)
            if not sessions:
                del self._rooms[room]

    def count(self, room: str, user: str | None = None) -> int:
        """Open sessions of a room (of one user), not counting closing ones."""
        sessions = self._rooms.get(room, {})
        return sum(1 for s in sessions if not s.closing and (user is None or s.user == user))

    def users(self, room: str) -> dict[str, int]:
        """Open sessions of a room per user (the admin's list of rooms)."""
        counts: dict[str, int] = {}
        for s in self._rooms.get(room, ()):
            if not s.closing:
                counts[s.user] = counts.get(s.user, 0) + 1
        return counts

    def close_user(self, room: str, user: str, code: int, reason: str) -> list[Closable]:
        """Close a user's sessions of a room after what they were sent."""
        closed = [s for s in self._rooms.get(room, ()) if s.user == user]
        for session in closed:
            session.close_after(code, reason)
            self.remove(room, session)
        return closed

    def close_room(self, room: str, code: int, reason: str, *, now: bool = True) -> list[Closable]:
        """Close every session of a room: at once (deleted), or after what
        they were sent (the room moves to another node)."""
        closed = list(self._rooms.pop(room, ()))
        for session in closed:
            if now:
                session.abort(code, reason)
            else:
                session.close_after(code, reason)
        return closed
