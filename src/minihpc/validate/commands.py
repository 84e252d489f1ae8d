"""The validate subcommands -- run, validate (alias compare), fault-test, baseline save and
baseline compare -- shared by both faces: ``minihpc validate ...`` (:mod:`minihpc.cli.validate`)
and the spec's ``minicluster ...`` / ``python -m minihpc.validate``
(:mod:`minihpc.validate.minicluster`). Parsers are in :mod:`minihpc.validate.flags`.

Every subcommand takes ``--config FILE`` (TOML, or YAML with PyYAML) setting any of its flags;
a flag given on the command line wins. Each checks its flags and makes every output's folder
(:mod:`minihpc.validate.outputs`) before it trains or reads anything big, so bad input is one
line and a non-zero exit with nothing lost.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from minihpc.core.errors import MinihpcError, UsageError
from minihpc.validate import config, outputs
from minihpc.validate.records import iso_utc

BASELINE_SAVE_DEFAULTS = {"metrics": None, "name": None, "baseline_dir": None}
BASELINE_COMPARE_DEFAULTS = {"metrics": None, "name": None, "baseline_dir": None, "latency_threshold": 5.0,
                             "throughput_threshold": 5.0, "allow_spread": False, "output": None}
COMPARE_DEFAULTS = {"tolerance": None, "abs_tolerance": None, "output": None, "plot": None}
"""``tolerance`` None: 0.01 relative, unless ``abs_tolerance`` alone is given
(:func:`minihpc.validate.compare.tolerances`)."""


def resolve(args, defaults: dict, command: str) -> dict:
    """The command's flags: given > ``--config`` file > default."""
    explicit = {k: getattr(args, k, None) for k in defaults}
    path = getattr(args, "validate_config", None)
    from_file = config.load(path, command) if path else {}
    return config.resolve(explicit, from_file, defaults, getattr(args, "flag_types", None))


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _saved(path) -> None:
    if path:
        print(f"Report saved to: {path}")


def cmd_run(args, settings) -> int:
    from minihpc.validate import runner

    cfg = runner.settle(resolve(args, runner.RUN_DEFAULTS, "run"))
    outputs.prepare("--output", cfg["output"])
    outputs.prepare("--tensorboard", cfg["tensorboard"], want_dir=True)
    _log("Starting distributed training run...")
    run = runner.execute(cfg, settings)
    print(runner.format_summary(run, cfg["output"]))
    return 0 if run["num_steps"] == cfg["steps"] else 1


def read_run(path: str) -> dict:
    """A run report, or UsageError with one line."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"run report {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"run report {path} is not readable JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise UsageError(f"{path} is not a run report (run --output)")
    if any(not isinstance(s, dict) or "step" not in s or "loss" not in s for s in data["steps"]):
        raise UsageError(f"{path} is not a run report: its steps need a step and a loss each")
    return data


def cmd_compare(args, settings) -> int:
    from minihpc.validate import compare

    cfg = resolve(args, COMPARE_DEFAULTS, "compare")
    rtol, atol = compare.tolerances(cfg["tolerance"], cfg["abs_tolerance"])
    single, multi = read_run(args.single), read_run(args.multi)
    outputs.prepare_all([("--output", cfg["output"]), ("--plot", cfg["plot"])])
    rep = compare.report(single, multi, rtol, atol, paths=(args.single, args.multi))
    rep["timestamp"] = iso_utc(time.time())
    print(compare.format_report(rep))
    if cfg["output"]:
        outputs.write_report(cfg["output"], rep)
        _saved(cfg["output"])
    if cfg["plot"]:
        for path in compare.plot(rep, cfg["plot"]):
            print(f"plot: {path}")
    return 0 if rep["verdict"] == "PASS" else 1


def cmd_fault_test(args, settings) -> int:
    from minihpc.validate import compare, faulttest, runner

    cfg = resolve(args, faulttest.FAULT_TEST_DEFAULTS, "fault-test")
    faulttest.plan(cfg)
    compare.tolerances(cfg["tolerance"], cfg["abs_tolerance"])
    outputs.prepare("--output", cfg["output"])
    report = faulttest.run_all(cfg, lambda c: runner.execute(c, settings), log=_log)
    print(faulttest.format_table(report))
    if cfg["output"]:
        outputs.write_report(cfg["output"], report)
        _saved(cfg["output"])
    return 0 if report["verdict"] == "PASS" else 1


def cmd_baseline_save(args, settings) -> int:
    from minihpc.validate import baseline

    cfg = resolve(args, BASELINE_SAVE_DEFAULTS, "baseline-save")
    if not cfg["metrics"] or not cfg["name"]:
        raise UsageError("baseline save needs --metrics RUN.json and --name NAME")
    directory = cfg["baseline_dir"] or args.default_baseline_dir
    try:
        baseline.check_name(cfg["name"])
        run = baseline.load_metrics(cfg["metrics"])
        outputs.prepare("--baseline-dir", directory, want_dir=True)
        saved = baseline.save(directory, cfg["name"], run, str(cfg["metrics"]))
    except baseline.BaselineError as exc:
        raise UsageError(str(exc)) from None
    path = baseline.path_of(directory, cfg["name"])
    print(f"✓ Baseline '{cfg['name']}' saved successfully ({len(saved['runs'])} run(s) in {path})")
    return 0


def cmd_baseline_compare(args, settings) -> int:
    """Exit 0 no regression, 1 regression, 2 error (one line on stderr)."""
    from minihpc.validate import baseline

    try:
        cfg = resolve(args, BASELINE_COMPARE_DEFAULTS, "baseline-compare")
        if not cfg["metrics"] or not cfg["name"]:
            raise UsageError("baseline compare needs --metrics RUN.json and --name NAME")
        run = baseline.load_metrics(cfg["metrics"])
        base = baseline.load(cfg["baseline_dir"] or args.default_baseline_dir, cfg["name"])
        outputs.prepare("--output", cfg["output"])
        report = baseline.compare(base, run, cfg["latency_threshold"], cfg["throughput_threshold"],
                                  bool(cfg["allow_spread"]))
        report["timestamp"] = iso_utc(time.time())
        if cfg["output"]:
            outputs.write_report(cfg["output"], report)
    except (MinihpcError, OSError) as exc:
        print(f"{args.face} baseline compare: error: {exc}", file=sys.stderr)
        return 2
    print(baseline.format_table(report))
    return baseline.exit_code(report)
