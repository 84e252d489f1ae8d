"""argparse as the CLI uses it: a usage mistake is one line on stderr and exit status 2 (1 under
Slurm's command names, as Slurm's)."""

from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """No prefix matching: ``--ntasks`` must never be taken for ``--ntasks-per-node``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    usage_status = 2
    """The exit status of a usage mistake: 2 as argparse's; 1 under Slurm's names, as Slurm's
    commands exit (cli.slurm sets it)."""

    def error(self, message: str):
        self.exit(self.usage_status, f"{self.prog}: error: {message}\n")
