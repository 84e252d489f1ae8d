"""``python -m minihpc.cli ARGS``: what the ``minihpc`` command runs (daemons start this way)."""

import sys

from minihpc.cli.main import main

sys.exit(main())
