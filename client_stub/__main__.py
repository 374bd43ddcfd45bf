"""`python -m client_stub ...`: the same as `vtt-sync client ...`."""

import sys

from client_stub.cli import main

sys.exit(main())
