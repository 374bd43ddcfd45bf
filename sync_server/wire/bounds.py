"""The bounds of a frame's content that the codec checks while decoding,
before any server code sees the frame (bad_frame beyond them). They belong
to the wire: both subprotocols, the server and the Python client share them.
`sync_server/core/limits.py` lists them with every other limit."""

from __future__ import annotations

__all__ = ["MAX_CMD_ID_LENGTH", "MAX_INT", "MAX_NESTING", "MIN_INT"]

# Maps and lists nested deeper than this are refused as bad_frame: nothing
# in the protocol nests more than ~6 levels, and deep nesting is a classic
# way to exhaust a decoder's stack.
MAX_NESTING = 32

# Integers must fit in MessagePack's range, so that both subprotocols carry
# exactly the same values (a JSON client could otherwise send 2**100, which
# the log could not store).
MIN_INT = -(2**63)
MAX_INT = 2**64 - 1

# Command ids are chosen by clients and stored for deduplication; bound them.
MAX_CMD_ID_LENGTH = 128
