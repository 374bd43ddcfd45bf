"""`python -m sync_server`: the server's commands of `vtt-sync` (serve, admin,
--version); the whole command, the client's included, is `python -m vtt_sync`."""

from sync_server.ops.cli import main

raise SystemExit(main())
