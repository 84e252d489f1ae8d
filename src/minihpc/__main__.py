"""``python -m minihpc ARGS``: the ``minihpc`` command, as ``python -m minihpc.cli`` runs it."""

import sys

from minihpc.cli.main import main

sys.exit(main())
