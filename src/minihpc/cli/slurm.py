"""Slurm's command names as aliases of ``minihpc`` subcommands, so muscle memory works:
``sbatch job.py`` is ``minihpc submit job.py``, ``squeue`` is ``minihpc queue``, and so on.

Each alias runs the CLI's one ``main`` with its subcommand put in front, under the alias's own
name: ``sbatch --help`` prints ``usage: sbatch ...`` and a usage mistake reads
``sbatch: error: ...``. The global options (``--debug``, ``--config``, ``--redis-url``,
``--version``) work when they come first: ``sbatch --debug job.py``.

Installed as console scripts (``[project.scripts]`` in pyproject.toml) in a venv, and as
``python3 -m minihpc.cli.slurm ALIAS`` wrappers in the image (Dockerfile), which has no
installed package; ``ALIASES`` is the list both are checked against.
"""

from __future__ import annotations

import argparse
import os
import sys

from minihpc.cli import main as cli_main

SOCKET_ENV = "MINIHPC_SRUN_SOCKET"
"""minihpc.job.srun.SOCKET_ENV, set inside a batch job: srun there is the job's own (imported
only then; tests/unit/test_slurm_aliases.py checks the two names agree)."""


def srun_in_job(argv: list[str]) -> int:
    from minihpc.job.srun import main

    return main(argv)

ALIASES: dict[str, str] = {
    "sbatch": "submit",
    "squeue": "queue",
    "scancel": "cancel",
    "sinfo": "nodes",
    "sacct": "history",
    "scontrol": "scontrol",
    "srun": "run",
}
"""Slurm's command -> the ``minihpc`` subcommand it runs."""


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:  # argparse keeps no public handle on its subparsers
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return None  # main() then says "invalid choice", under the alias's name


def _parsers(parser: argparse.ArgumentParser):
    """``parser`` and every parser nested under it (``scontrol show`` under ``scontrol``)."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def aliased_parser(alias: str) -> argparse.ArgumentParser:
    """The CLI's parser, with the alias's subcommand (and everything under it) named ``alias``:
    its usage, help and errors say ``sbatch`` where they said ``minihpc submit``."""
    parser = cli_main.build_parser(ALIASES[alias])
    command = _subcommand(parser, ALIASES[alias])
    old = command.prog if command else ""
    for each in _parsers(command) if command else ():
        if each.prog.startswith(old):  # a subcommand's own aliases hold the same parser twice
            each.prog = alias + each.prog[len(old):]
        each.usage_status = 1  # Slurm's commands exit 1 on a usage mistake
    if command is not None:
        command.set_defaults(slurm=alias)  # e.g. scancel is silent where minihpc cancel says what it did
    parser.prog = alias  # an unrecognized argument is reported by the top parser
    parser.usage_status = 1
    return parser


def _leading_globals(parser: argparse.ArgumentParser, alias: str, argv: list[str]) -> tuple[list[str], list[str]]:
    """(global options, the rest): the top parser's options at the front of ``argv``, which
    must go before the subcommand. An option the subcommand has itself stays where it is."""
    command = _subcommand(parser, ALIASES[alias])
    own = set(command._option_string_actions) if command else set()
    # -h is the subcommand's own too: `sbatch --help` is submit's help.
    takes_value = {o: a.nargs != 0 for o, a in parser._option_string_actions.items() if o not in own}
    i = 0
    while i < len(argv):
        name = argv[i].split("=", 1)[0]
        if name not in takes_value:
            break
        i += 2 if takes_value[name] and "=" not in argv[i] else 1
    return argv[:i], argv[i:]


def run(alias: str, argv: list[str] | None = None) -> int:
    """``minihpc [GLOBALS] SUBCOMMAND ARGV`` under the alias's name; the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = aliased_parser(alias)
    lead, rest = _leading_globals(parser, alias, argv)
    return cli_main.main([*lead, ALIASES[alias], *rest], parser=parser, name=alias)


# The console scripts (pyproject.toml [project.scripts]): one function per alias.

def sbatch() -> int:
    return run("sbatch")


def squeue() -> int:
    return run("squeue")


def scancel() -> int:
    return run("scancel")


def sinfo() -> int:
    return run("sinfo")


def sacct() -> int:
    return run("sacct")


def scontrol() -> int:
    return run("scontrol")


def srun() -> int:
    """``minihpc run``; inside a batch job's script, the job's own srun (job.srun: its bin/ is
    first on the job's PATH, this covers a PATH that lost it)."""
    if os.environ.get(SOCKET_ENV):
        return srun_in_job(sys.argv[1:])
    return run("srun")


def dispatch(argv: list[str] | None = None) -> int:
    """``python -m minihpc.cli.slurm ALIAS ARGS...``: what the image's wrappers run."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ALIASES:
        print(f"usage: python -m minihpc.cli.slurm {{{','.join(ALIASES)}}} [ARGS...]", file=sys.stderr)
        return 2
    if argv[0] == "srun" and os.environ.get(SOCKET_ENV):
        return srun_in_job(argv[1:])
    return run(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(dispatch())
