"""``minihpc validate``: training validation -- single- vs multi-process correctness, fault
injection and detection, performance baselines (see minihpc.validate).

Every subcommand takes ``--config FILE`` (TOML, or YAML with PyYAML) setting any of its flags;
a flag given on the command line wins. Flags default to None here so that a flag given can be
told from one not given; the real defaults are the tables in minihpc.validate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from minihpc.core.config import Settings
from minihpc.core.errors import MinihpcError, UsageError

BASELINE_SAVE_DEFAULTS = {"metrics": None, "name": None, "baseline_dir": None}
BASELINE_COMPARE_DEFAULTS = {"metrics": None, "name": None, "baseline_dir": None, "latency_threshold": 5.0,
                             "throughput_threshold": 5.0, "output": None}
COMPARE_DEFAULTS = {"tolerance": 0.01, "output": None, "plot": None}


def _resolve(args, defaults: dict, command: str) -> dict:
    from minihpc.validate import config

    explicit = {k: getattr(args, k, None) for k in defaults}
    from_file = config.load(args.validate_config, command) if args.validate_config else {}
    return config.resolve(explicit, from_file, defaults)


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_run(args, settings: Settings) -> int:
    from minihpc.validate import runner

    cfg = _resolve(args, runner.RUN_DEFAULTS, "run")
    run = runner.execute(cfg, settings)
    print(runner.format_summary(run, cfg["output"]))
    return 0 if run["num_steps"] == cfg["steps"] else 1


def _read_run(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"run report {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"run report {path} is not readable JSON ({exc})") from None
    if not isinstance(data, dict) or "steps" not in data:
        raise UsageError(f"{path} is not a run report (validate run --output)")
    return data


def cmd_compare(args, settings: Settings) -> int:
    from minihpc.validate import compare
    from minihpc.validate.records import write_json

    cfg = _resolve(args, COMPARE_DEFAULTS, "compare")
    rep = compare.report(_read_run(args.single), _read_run(args.multi), float(cfg["tolerance"]))
    print(compare.format_report(rep))
    if cfg["output"]:
        write_json(cfg["output"], rep)
        print(f"written to {cfg['output']}")
    if cfg["plot"]:
        for path in compare.plot(rep, cfg["plot"]):
            print(f"plot: {path}")
    return 0 if rep["verdict"] == "PASS" else 1


def cmd_fault_test(args, settings: Settings) -> int:
    from minihpc.validate import faulttest, runner
    from minihpc.validate.records import write_json

    cfg = _resolve(args, faulttest.FAULT_TEST_DEFAULTS, "fault-test")
    report = faulttest.run_all(cfg, lambda c: runner.execute(c, settings), log=_log)
    print(faulttest.format_table(report))
    if cfg["output"]:
        write_json(cfg["output"], report)
        print(f"written to {cfg['output']}")
    return 0 if report["verdict"] == "PASS" else 1


def cmd_baseline_save(args, settings: Settings) -> int:
    from minihpc.validate import baseline

    cfg = _resolve(args, BASELINE_SAVE_DEFAULTS, "baseline-save")
    if not cfg["metrics"] or not cfg["name"]:
        raise UsageError("baseline save needs --metrics RUN.json and --name NAME")
    directory = cfg["baseline_dir"] or baseline.DEFAULT_DIR
    try:
        saved = baseline.save(directory, cfg["name"], baseline.load_metrics(cfg["metrics"]), str(cfg["metrics"]))
    except baseline.BaselineError as exc:
        raise UsageError(str(exc)) from None
    print(f"baseline {cfg['name']}: {len(saved['runs'])} run(s) in {baseline.path_of(directory, cfg['name'])}")
    return 0


def cmd_baseline_compare(args, settings: Settings) -> int:
    """Exit 0 no regression, 1 regression, 2 error (one line on stderr)."""
    from minihpc.validate import baseline
    from minihpc.validate.records import write_json

    try:
        cfg = _resolve(args, BASELINE_COMPARE_DEFAULTS, "baseline-compare")
        if not cfg["metrics"] or not cfg["name"]:
            raise UsageError("baseline compare needs --metrics RUN.json and --name NAME")
        run = baseline.load_metrics(cfg["metrics"])
        base = baseline.load(cfg["baseline_dir"] or baseline.DEFAULT_DIR, cfg["name"])
        report = baseline.compare(base, run, float(cfg["latency_threshold"]), float(cfg["throughput_threshold"]))
        if cfg["output"]:
            write_json(cfg["output"], report)
    except (MinihpcError, OSError) as exc:
        print(f"minihpc validate baseline compare: error: {exc}", file=sys.stderr)
        return 2
    print(baseline.format_table(report))
    return baseline.exit_code(report)


def _config_flag(p) -> None:
    p.add_argument("--config", dest="validate_config", default=None, metavar="FILE",
                   help="TOML (or YAML) file setting any flag of this command; flags given here win")


def _run_flags(p) -> None:
    from minihpc.validate import inject, runner

    d = runner.RUN_DEFAULTS
    for flag, kind, text in (
        ("--workers", int, "ranks (1 = the single-process reference)"), ("--steps", int, "training steps"),
        ("--batch-size", int, "global batch, divisible by --workers"), ("--seed", int, "data and weights seed"),
        ("--workload", str, "synthetic or mnist"), ("--hidden", str, "MLP hidden layer sizes"),
        ("--samples", int, "synthetic samples"), ("--in-features", int, "synthetic input features"),
        ("--lr", float, "Adam learning rate"), ("--data-dir", str, "MNIST's root (also MINIHPC_DATA_DIR)"),
        ("--checksum-every", int, "parameter checksum every K steps (0: never)"),
        ("--fault-rank", int, "rank --inject hits"), ("--fault-step", int, "step --inject starts at"),
        ("--ps-timeout", float, "parameter server: seconds to collect a step's gradients"),
        ("--step-timeout", float, "end the run when no rank advances for this many seconds"),
        ("--pg-timeout", float, "gloo process group timeout, seconds"),
        ("--tasks-per-node", int, "with --cluster: ranks per node"), ("--output", str, "run report (JSON)"),
        ("--tensorboard", str, "write TensorBoard event files here"),
    ):
        p.add_argument(flag, type=kind, default=None, help=f"{text} (default: {d[flag[2:].replace('-', '_')]})")
    p.add_argument("--inject", choices=inject.KINDS, default=None, help="inject a fault into --fault-rank")
    p.add_argument("--strategy", choices=("ddp", "parameter-server"), default=None, help="default: ddp")
    p.add_argument("--cluster", action="store_true", default=None, help="run as a job on the cluster")
    p.add_argument("--keep-records", action="store_true", default=None, help="keep the ranks' record files")


def _add_baseline(sub) -> None:
    base = sub.add_parser("baseline", help="save a run as a performance baseline, or compare a run with one")
    bsub = base.add_subparsers(dest="baseline_command", required=True)
    p = bsub.add_parser("save", help="add a run's metrics to a named baseline (up to 10 runs)")
    p.add_argument("--metrics", default=None, help="run report (validate run --output)")
    p.add_argument("--name", default=None)
    p.add_argument("--baseline-dir", default=None, help="default: .minihpc/baselines")
    _config_flag(p)
    p.set_defaults(func=cmd_baseline_save)
    p = bsub.add_parser("compare", help="compare a run with a baseline: exit 0 ok, 1 regression, 2 error")
    p.add_argument("--metrics", default=None)
    p.add_argument("--name", default=None)
    p.add_argument("--baseline-dir", default=None)
    p.add_argument("--latency-threshold", type=float, default=None, help="percent (default: 5.0)")
    p.add_argument("--throughput-threshold", type=float, default=None, help="percent (default: 5.0)")
    p.add_argument("--output", default=None)
    _config_flag(p)
    p.set_defaults(func=cmd_baseline_compare)


def _fault_test_flags(p) -> None:
    from minihpc.validate.faulttest import FAULT_TEST_DEFAULTS as d

    for flag, kind, text in (
        ("--steps", int, "steps per run"), ("--tolerance", float, "loss divergence tolerance"),
        ("--workers", int, "ranks of the clean and faulty runs"), ("--seeds", str, "clean runs' seeds (faults: the first)"),
        ("--batch-size", int, "global batch"), ("--faults", str, "fault kinds to inject"),
        ("--fault-rank", int, "rank the faults hit"), ("--fault-step", int, "step the faults start (default: steps/3)"),
        ("--step-timeout", float, "seconds without progress that end a run"),
        ("--checksum-every", int, "parameter checksum every K steps"), ("--hidden", str, "MLP hidden layers"),
        ("--workload", str, "synthetic or mnist"), ("--lr", float, "Adam learning rate"), ("--output", str, "report (JSON)"),
    ):
        default = d[flag[2:].replace("-", "_")]
        p.add_argument(flag, type=kind, default=None, help=text if default is None else f"{text} (default: {default})")


def add_parsers(sub) -> None:
    v = sub.add_parser("validate", help="validate distributed training: correctness, faults, baselines")
    vsub = v.add_subparsers(dest="validate_command", required=True)
    p = vsub.add_parser("run", help="train on N ranks (torchrun, gloo) and write a run report")
    _run_flags(p)
    _config_flag(p)
    p.set_defaults(func=cmd_run)
    p = vsub.add_parser("compare", help="per-step global loss of two runs within a tolerance")
    p.add_argument("single")
    p.add_argument("multi")
    p.add_argument("--tolerance", type=float, default=None, help="absolute (default: 0.01)")
    p.add_argument("--output", default=None)
    p.add_argument("--plot", default=None, help="PNG of both loss curves (and <name>-delta.png)")
    _config_flag(p)
    p.set_defaults(func=cmd_compare)
    p = vsub.add_parser("fault-test", help="inject each fault; report detection and false positives")
    _fault_test_flags(p)
    _config_flag(p)
    p.set_defaults(func=cmd_fault_test)
    _add_baseline(vsub)
