"""The validate subcommands' parsers, one set for both faces (``minihpc validate`` and
``minicluster``): :func:`add_commands` puts run, validate/compare, fault-test and baseline
under a subparsers object. Flags default to None so that a flag given can be told from one not
given; the real defaults are the tables in the modules (``runner.RUN_DEFAULTS`` ...).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from minihpc.job import devices
from minihpc.validate import commands


def _finish(p: argparse.ArgumentParser, func, face: str, baseline_dir: Path | None = None) -> None:
    """``--config``, the handler, and each flag's type (a config file's value must have it)."""
    p.add_argument("--config", dest="validate_config", default=None, metavar="FILE",
                   help="TOML or YAML file setting any flag of this command (or the parameter-server "
                        "config's keys); flags given here win")
    types = {a.dest: a.type for a in p._actions if a.type in (int, float, str)}
    p.set_defaults(func=func, face=face, flag_types=types, default_baseline_dir=baseline_dir)


def _run_flags(p) -> None:
    from minihpc.validate import inject, runner

    d = runner.RUN_DEFAULTS
    for flag, kind, text in (
        ("--workers", int, "ranks (1 = the single-process reference)"), ("--steps", int, "training steps"),
        ("--epochs", int, "whole passes over the training data; sets --steps (config: num_epochs)"),
        ("--batch-size", int, "global batch, divisible by --workers"), ("--seed", int, "data and weights seed"),
        ("--workload", str, "synthetic or mnist"), ("--model", str, "mlp, or net: the MNIST CNN (default: "
                                                                    "mlp; mnist: net)"),
        ("--hidden", str, "MLP hidden layer sizes"), ("--samples", int, "synthetic samples"),
        ("--in-features", int, "model inputs (default: 16; mnist: 784)"),
        ("--lr", float, "Adam learning rate"), ("--data-dir", str, "MNIST's root (also MINIHPC_DATA_DIR)"),
        ("--checksum-every", int, "parameter checksum every K steps (0: never)"),
        ("--eval-steps", int, "held-out loss every N steps (0: never)"),
        ("--fault-rank", int, "rank --inject hits"), ("--fault-step", int, "step --inject starts at"),
        ("--ps-timeout", float, "parameter server: seconds to collect a step's gradients"),
        ("--ps-host", str, "parameter server: address it listens on (default: 127.0.0.1; --cluster: 0.0.0.0)"),
        ("--ps-connect", str, "parameter server: address workers connect to (default: 127.0.0.1; "
                              "--cluster: this host)"),
        ("--ps-port", int, "parameter server: TCP port (0: any free one)"),
        ("--step-timeout", float, "end the run when no rank advances for this many seconds"),
        ("--pg-timeout", float, "process group timeout, seconds"),
        ("--tasks-per-node", int, "with --cluster: ranks per node"), ("--output", str, "run report (JSON)"),
        ("--tensorboard", str, "write TensorBoard event files here"),
    ):
        default = d[flag[2:].replace("-", "_")]
        p.add_argument(flag, type=kind, default=None, help=text if default is None else f"{text} (default: {default})")
    p.add_argument("--track-gradients", action=argparse.BooleanOptionalAction, default=None,
                   help="log each rank's gradient norm to TensorBoard / W&B (default: on)")
    p.add_argument("--inject", choices=inject.KINDS, default=None, help="inject a fault into --fault-rank")
    p.add_argument("--strategy", choices=("ddp", "parameter-server"), default=None, help="default: ddp")
    p.add_argument("--backend", type=str, choices=devices.BACKENDS, default=None,
                   help="ddp's process group: nccl on each rank's own GPU where CUDA is there, else gloo on the "
                        "CPU (default: auto)")
    p.add_argument("--cluster", action="store_true", default=None, help="run as a job on the cluster")
    p.add_argument("--keep-records", action="store_true", default=None, help="keep the ranks' record files")


def _tolerance_flags(p, what: str) -> None:
    p.add_argument("--tolerance", type=float, default=None,
                   help=f"relative {what}: 0.01 = 1.00%% of the single-process loss (default: 0.01). "
                        "Before: absolute, now --abs-tolerance")
    p.add_argument("--abs-tolerance", type=float, default=None,
                   help="absolute loss delta; alone, the only tolerance; with --tolerance, a step keeps both")


def _fault_test_flags(p) -> None:
    from minihpc.validate.faulttest import FAULT_TEST_DEFAULTS as d

    _tolerance_flags(p, "loss divergence tolerance")
    for flag, kind, text in (
        ("--steps", int, "steps per run"),
        ("--workers", int, "ranks of the clean and faulty runs"), ("--seeds", str, "clean runs' seeds (faults: the first)"),
        ("--batch-size", int, "global batch"), ("--faults", str, "fault kinds to inject"),
        ("--fault-rank", int, "rank the faults hit"), ("--fault-step", int, "step the faults start (default: steps/3)"),
        ("--step-timeout", float, "seconds without progress that end a run"),
        ("--checksum-every", int, "parameter checksum every K steps"), ("--hidden", str, "MLP hidden layers"),
        ("--workload", str, "synthetic or mnist"), ("--lr", float, "Adam learning rate"), ("--output", str, "report (JSON)"),
    ):
        default = d[flag[2:].replace("-", "_")]
        p.add_argument(flag, type=kind, default=None, help=text if default is None else f"{text} (default: {default})")


def _add_baseline(sub, face: str, baseline_dir: Path) -> None:
    base = sub.add_parser("baseline", help="save a run as a performance baseline, or compare a run with one")
    bsub = base.add_subparsers(dest="baseline_command", required=True)
    p = bsub.add_parser("save", help="add a run's metrics to a named baseline (up to 10 runs)")
    p.add_argument("--metrics", default=None, help="run report (run --output)")
    p.add_argument("--name", default=None)
    p.add_argument("--baseline-dir", default=None, help=f"default: {baseline_dir}")
    _finish(p, commands.cmd_baseline_save, face, baseline_dir)
    p = bsub.add_parser("compare", help="compare a run with a baseline: exit 0 ok, 1 regression, 2 error")
    p.add_argument("--metrics", default=None)
    p.add_argument("--name", default=None)
    p.add_argument("--baseline-dir", default=None, help=f"default: {baseline_dir}")
    p.add_argument("--latency-threshold", type=float, default=None, help="percent (default: 5.0)")
    p.add_argument("--throughput-threshold", type=float, default=None, help="percent (default: 5.0)")
    p.add_argument("--allow-spread", action="store_true", default=None,
                   help="also allow the baseline's own measured spread (35%% for timings until it holds 3 runs)")
    p.add_argument("--output", default=None)
    _finish(p, commands.cmd_baseline_compare, face, baseline_dir)


def add_commands(sub, face: str, baseline_dir: Path, compare_name: str = "compare") -> None:
    """The subcommands under ``sub``; ``face`` names the command in error lines; ``compare_name``
    is the correctness check's name (``validate`` in the spec), the other one its alias."""
    p = sub.add_parser("run", help="train on N ranks (torchrun; gloo, or NCCL on GPUs) and write a run report")
    _run_flags(p)
    _finish(p, commands.cmd_run, face)
    alias = "validate" if compare_name == "compare" else "compare"
    p = sub.add_parser(compare_name, aliases=[alias], help="per-step global loss of two runs within a tolerance")
    p.add_argument("single")
    p.add_argument("multi")
    _tolerance_flags(p, "tolerance")
    p.add_argument("--output", default=None)
    p.add_argument("--plot", default=None, help="PNG of both loss curves (and <name>-delta.png)")
    _finish(p, commands.cmd_compare, face)
    p = sub.add_parser("fault-test", help="inject each fault; report detection and false positives")
    _fault_test_flags(p)
    _finish(p, commands.cmd_fault_test, face)
    _add_baseline(sub, face, baseline_dir)
