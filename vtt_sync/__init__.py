"""The `vtt-sync` command: one entry point for both sides.

    vtt-sync serve ... | admin ... | --version     the server's CLI (sync_server.ops.cli)
    vtt-sync client ...                            the Python client's (client_stub.cli)

It stands above the server and the client, which know nothing of each other
beyond the wire: the server package never imports the client, so this
package does the dispatching (tests/test_layering.py ranks it on top).
`python3 -m vtt_sync ...` is the same command; `python3 -m sync_server ...`
is the server's commands alone, `python3 -m client_stub ...` the client's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run `vtt-sync ARGV`: `client ...` by the client, the rest by the
    server's CLI (which lists `client` in its help)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["client"]:
        from client_stub.cli import main as client_main

        return client_main(args[1:]) or 0
    from sync_server.ops.cli import main as server_main

    return server_main(args)
