"""argparse as the CLI uses it: a usage mistake is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """No prefix matching: ``--ntasks`` must never be taken for ``--ntasks-per-node``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")
