"""The ``minihpc`` command: Slurm's verbs, columns and state codes over the cluster's state.

One module per command group (jobs, nodes, ops, daemons, validate), each thin over
:mod:`minihpc.client`; this module wires them into one parser and reports errors as one line.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from minihpc import __version__
from minihpc.cli.parser import Parser
from minihpc.core.config import load_settings
from minihpc.core.errors import MinihpcError
from minihpc.core.extras import missing_extra
from minihpc.state.connect import outages

DAEMONS = ("master", "agent", "node", "restart-proxy", "api", "simulate")
"""Commands that run for good and log at INFO."""


GROUPS = ("submit", "jobs", "run", "nodes", "daemons", "ops", "scontrol", "tokens", "validate", "completion")
"""The modules of minihpc.cli that define subcommands, in the order ``--help`` lists them."""

COMMANDS: dict[str, str] = {
    "submit": "submit",
    **dict.fromkeys(("queue", "show", "cancel", "logs", "history", "wait"), "jobs"),
    "run": "run",
    **dict.fromkeys(("monitor", "nodes", "incidents", "alerts"), "nodes"),
    **dict.fromkeys(("restart-proxy", "master", "agent", "node-exited", "node", "api", "simulate", "up", "down"),
                    "daemons"),
    **dict.fromkeys(("report", "drill"), "ops"),
    "scontrol": "scontrol", "token": "tokens", "validate": "validate", "completion": "completion",
}
"""Each subcommand -> the module that defines it. A call builds (and imports) only its own
command's module: Slurm's sbatch answers in tens of milliseconds, and every module imported
costs a call. tests/unit/test_wire_protocol.py checks this table against the full parser."""

_GLOBAL_VALUES = ("--config", "--redis-url")
"""The global options that take a value (skipped when looking for the subcommand)."""


def command_of(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names, or None where the whole parser is needed: none named,
    an unknown one (argparse lists the choices), or a global ``-h``/``--version`` before it."""
    values = False
    for arg in argv:
        if values:
            values = False
        elif arg in _GLOBAL_VALUES:
            values = True
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
        elif arg in ("-h", "--help", "--version") or arg == "--":
            return None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: every subcommand, or only ``command`` (and its module's siblings)."""
    parser = Parser(prog="minihpc", description="A mini HPC cluster with a Slurm-like CLI.")
    parser.add_argument("--version", action="version", version=f"minihpc {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser.add_argument("--config", default=None, help="a TOML config file (also MINIHPC_CONFIG)")
    parser.add_argument("--redis-url", default=None, help="the cluster's Redis (also MINIHPC_REDIS_URL)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for group in GROUPS if command not in COMMANDS else (COMMANDS[command],):
        importlib.import_module(f"minihpc.cli.{group}").add_parsers(sub)
    return parser


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None,
         name: str | None = None) -> int:
    """Run one command. ``parser`` and ``name`` let a Slurm alias (cli.slurm) speak as itself:
    its own usage lines, and ``sbatch: error: ...`` instead of ``minihpc submit: error: ...``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = parser or build_parser(command_of(argv))
    args = parser.parse_args(argv)
    who = name or f"minihpc {args.command}"
    level = logging.DEBUG if args.debug else logging.INFO if args.command in DAEMONS else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings(args.config).with_overrides(redis_url=args.redis_url)
        return args.func(args, settings)
    except MinihpcError as exc:
        if args.debug:
            raise
        print(f"{who}: error: {exc}", file=sys.stderr)
        return 1
    except outages() as exc:  # Redis went away after connecting (logs -f, queue --watch, wait)
        if args.debug:
            raise
        print(f"{who}: error: the cluster's Redis stopped answering ({exc})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (| head); stay quiet like other Unix tools.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # noqa: BLE001 - one line for a user; daemons keep their traceback
        extra = missing_extra(exc)
        if extra and not args.debug:
            print(f"{who}: needs minihpc[{extra}] (pip install 'minihpc[{extra}]')", file=sys.stderr)
            return 1
        if args.debug or args.command in DAEMONS:
            raise
        print(f"{who}: unexpected error: {type(exc).__name__}: {exc} "
              "(run with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
