"""``minicluster``: the validation tool of specs/validator.md under its own name, with its command
lines as written -- ``minicluster run|validate|fault-test|baseline save|baseline compare`` -- as
a console script (pyproject.toml) and as ``python -m minihpc.validate``.

The subcommands are ``minihpc validate``'s (:mod:`minihpc.validate.flags`), with the spec's
names and defaults: the correctness check is ``validate`` (``compare`` too), and baselines live
in ``.minicluster/baselines`` unless ``--baseline-dir`` says otherwise. Bad input is one line on
stderr and a non-zero exit (2 for a usage mistake, as argparse; ``baseline compare``: 2 for any
error, as the spec says; otherwise 1); ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import minihpc
from minihpc.core.config import load_settings
from minihpc.core.errors import MinihpcError
from minihpc.core.extras import missing_extra
from minihpc.validate import flags

PROG = "minicluster"
BASELINE_DIR = Path(".minicluster") / "baselines"
"""Where the spec keeps baselines."""


class Parser(argparse.ArgumentParser):
    """No prefix matching (``--tol`` is no ``--tolerance``); a usage mistake is one line, exit 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description="Validate distributed training: correctness first, performance "
                                           "second, fault tolerance third (minihpc's validation suite).")
    parser.add_argument("--version", action="version", version=f"{PROG} (minihpc {minihpc.__version__})")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    flags.add_commands(sub, face=PROG, baseline_dir=BASELINE_DIR, compare_name="validate")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status."""
    args = build_parser().parse_args(argv)
    who = " ".join(filter(None, (PROG, args.command, getattr(args, "baseline_command", None))))
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args, load_settings())
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (| head): stay quiet like other Unix tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (MinihpcError, OSError) as exc:
        if args.debug:
            raise
        print(f"{who}: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - one line for a user
        if args.debug:
            raise
        extra = missing_extra(exc)
        if extra:
            print(f"{who}: needs minihpc[{extra}] (pip install 'minihpc[{extra}]')", file=sys.stderr)
            return 1
        print(f"{who}: unexpected error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
              file=sys.stderr)
        return 1
