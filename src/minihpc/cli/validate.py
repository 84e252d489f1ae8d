"""``minihpc validate``: training validation -- single- vs multi-process correctness, fault
injection and detection, performance baselines (see minihpc.validate).

The subcommands (run, compare -- also ``validate``, the spec's name --, fault-test, baseline)
and their handlers are the validate package's own (:mod:`minihpc.validate.flags`,
:mod:`minihpc.validate.commands`), shared with the spec's ``minicluster`` command
(``python -m minihpc.validate``); here they are put under ``minihpc validate`` with this
face's defaults (baselines in ``.minihpc/baselines``).
"""

from __future__ import annotations

from minihpc.validate import baseline, flags


def add_parsers(sub) -> None:
    v = sub.add_parser("validate", help="validate distributed training: correctness, faults, baselines")
    vsub = v.add_subparsers(dest="validate_command", required=True)
    flags.add_commands(vsub, face="minihpc validate", baseline_dir=baseline.DEFAULT_DIR, compare_name="compare")
