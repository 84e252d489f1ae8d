"""``python -m minihpc.validate ARGS``: the ``minicluster`` command (specs/validator.md)."""

import sys

from minihpc.validate.minicluster import main

sys.exit(main())
