"""`python -m vtt_sync ...`: the same as `vtt-sync ...`."""

from vtt_sync import main

raise SystemExit(main())
