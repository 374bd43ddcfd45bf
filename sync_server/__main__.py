"""`python -m sync_server` is `vtt-sync`."""

from sync_server.cli import main

raise SystemExit(main())
