"""`python -m sync_server` is `vtt-sync`."""

from sync_server.ops.cli import main

raise SystemExit(main())
