"""vtt-sync clients: the asyncio `Client`, the `vtt-sync client` CLI, and the
browser client and tracker page in `client_stub/web/`."""

from client_stub.client import SUBPROTOCOLS, Client, tls_context
from client_stub.errors import (
    AccessRevoked,
    BadFrame,
    ClientClosed,
    CommandError,
    CommandTimeout,
    Conflict,
    ConnectionFailed,
    Forbidden,
    FrameTooBig,
    InternalError,
    InvalidArgs,
    NotFound,
    ProtocolMisuse,
    RateLimited,
    RoomDeleted,
    RuleError,
    Unauthenticated,
    UnknownOp,
    VttSyncError,
)
from client_stub.mirror import Mirror

__all__ = [
    "SUBPROTOCOLS",
    "AccessRevoked",
    "BadFrame",
    "Client",
    "ClientClosed",
    "CommandError",
    "CommandTimeout",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "FrameTooBig",
    "InternalError",
    "InvalidArgs",
    "Mirror",
    "NotFound",
    "ProtocolMisuse",
    "RateLimited",
    "RoomDeleted",
    "RuleError",
    "Unauthenticated",
    "UnknownOp",
    "VttSyncError",
    "tls_context",
]
