"""Performance baselines: named sets of up to MAX_RUNS run reports' metrics, and the verdict
of a new run against one.

A performance change beyond the threshold the user gives (percent of the baseline's mean) is a
regression: "fail if throughput drops more than 5%" means 5%, whatever the baseline holds.
Only when asked (``allow_spread``, ``--allow-spread``) is the allowance widened to the spread
the baseline itself measured (twice its relative standard deviation, or its min-max range,
whichever is wider), and, until it holds MIN_RUNS runs, to UNMEASURED_SPREAD_PCT for timings:
a gate on a noisy shared machine that prefers no flake to a tight bound.
Losses are correctness, not performance: same seed, same data, float64 -- any change beyond
LOSS_RTOL (relative) is a regression, either way (with ``allow_spread``, beyond the baseline's
own spread of losses).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from pathlib import Path

from minihpc.core.errors import MinihpcError
from minihpc.validate.records import iso_utc, write_json

DEFAULT_DIR = Path(".minihpc") / "baselines"
MAX_RUNS = 10
LOSS_RTOL = 1e-6
METRICS = {
    "average_loss": "loss",
    "final_loss": "loss",
    "average_throughput_samples_per_sec": "higher",
    "total_allreduce_time_ms": "lower",
    "step_time_p50_ms": "lower",
    "step_time_p95_ms": "lower",
}
"""Each metric compared and which way is better ("loss": no change allowed)."""
MIN_RUNS = 3
"""With ``allow_spread``: runs a baseline needs before the spread of its timings is its own
measurement."""
UNMEASURED_SPREAD_PCT = 35.0
"""With ``allow_spread``: the timing spread assumed before then (timings drift 20-35% within an
hour on 2-core hosts)."""
COMPARABLE = ("workers", "steps", "batch_size", "seed", "workload", "strategy", "hidden")


class BaselineError(MinihpcError):
    """A baseline or metrics file that is missing or unreadable (baseline compare exits 2)."""


def check_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name or "") or name.startswith("."):
        raise BaselineError(f"baseline name {name!r} must be letters, digits, '.', '_' or '-'")
    return name


def _read_json(path: Path, what: str, missing: str):
    """A JSON file's contents, or BaselineError with one line: ``missing`` if it is not there."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise BaselineError(missing) from None
    except (OSError, ValueError) as exc:
        raise BaselineError(f"{what} {path} is not readable JSON ({exc})") from None


def load_metrics(path: str | Path) -> dict:
    """A run report (``validate run --output``)."""
    path = Path(path)
    data = _read_json(path, "metrics file", f"metrics file {path} does not exist")
    if not isinstance(data, dict) or any(m not in data for m in METRICS):
        raise BaselineError(f"metrics file {path} is not a run report (needs {', '.join(METRICS)})")
    return data


def path_of(directory: str | Path, name: str) -> Path:
    return Path(directory) / f"{check_name(name)}.json"


def load(directory: str | Path, name: str) -> dict:
    path = path_of(directory, name)
    data = _read_json(path, "baseline", f"no baseline named {name!r} in {directory} (save one with `baseline save`)")
    if not isinstance(data, dict) or not data.get("runs"):
        raise BaselineError(f"baseline {path} holds no runs")
    return data


def entry(run: dict, source: str, now: float) -> dict:
    return {"saved_at": iso_utc(now), "saved_at_unix": now, "source": source, "metrics": {m: run[m] for m in METRICS},
            "config": {k: run.get("config", {}).get(k) for k in COMPARABLE}}


def add_run(baseline: dict | None, name: str, run_entry: dict) -> dict:
    """The baseline with one more run, keeping the newest MAX_RUNS."""
    runs = list((baseline or {}).get("runs", [])) + [run_entry]
    return {"name": name, "runs": runs[-MAX_RUNS:]}


def save(directory: str | Path, name: str, run: dict, source: str) -> dict:
    path = path_of(directory, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = load(directory, name) if path.exists() else None
    baseline = add_run(existing, name, entry(run, source, time.time()))
    write_json(path, baseline)
    return baseline


def spread_pct(values: list[float]) -> float:
    """The baseline's own variation, percent of its mean: max(2 x relative std, min-max range)."""
    mean = statistics.fmean(values)
    if len(values) < 2 or mean == 0:
        return 0.0
    return max(200 * statistics.stdev(values) / abs(mean), 100 * (max(values) - min(values)) / abs(mean))


def allowance(kind: str, threshold_pct: float, values: list[float], allow_spread: bool) -> tuple[float, float]:
    """(threshold, allowed) percent for a metric of ``kind``: the user's threshold (LOSS_RTOL for
    losses); with ``allow_spread``, widened to the baseline's spread (UNMEASURED_SPREAD_PCT for
    timings until it holds MIN_RUNS runs)."""
    threshold = LOSS_RTOL * 100 if kind == "loss" else threshold_pct
    if not allow_spread:
        return threshold, threshold
    spread = spread_pct(values)
    if kind != "loss" and len(values) < MIN_RUNS:
        spread = max(spread, UNMEASURED_SPREAD_PCT)
    return threshold, max(threshold, spread)


def verdict(metric: str, values: list[float], current: float, threshold_pct: float,
            allow_spread: bool = False) -> dict:
    """One metric's row: baseline mean, current, delta %, the allowance, regression or not."""
    kind = METRICS[metric]
    mean = statistics.fmean(values)
    if current is None or not math.isfinite(current):
        delta = math.inf
    else:
        delta = 0.0 if current == mean else ((current - mean) / abs(mean) * 100 if mean else math.inf)
    threshold, allowed = allowance(kind, threshold_pct, values, allow_spread)
    worse = {"loss": abs(delta), "higher": -delta, "lower": delta}[kind]
    return {"metric": metric, "baseline": mean, "current": current, "delta_pct": delta, "allowed_pct": allowed,
            "threshold_pct": threshold, "spread_pct": spread_pct(values), "baseline_runs": len(values),
            "regress": worse > allowed}


def check_thresholds(latency_threshold, throughput_threshold) -> None:
    for flag, value in (("--latency-threshold", latency_threshold), ("--throughput-threshold", throughput_threshold)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise BaselineError(f"{flag} {value} must be a percentage >= 0")


def compare(baseline: dict, run: dict, latency_threshold: float, throughput_threshold: float,
            allow_spread: bool = False) -> dict:
    check_thresholds(latency_threshold, throughput_threshold)
    rows = []
    for metric, kind in METRICS.items():
        values = [r["metrics"][metric] for r in baseline["runs"] if r["metrics"].get(metric) is not None]
        if not values:
            continue
        threshold = throughput_threshold if kind == "higher" else latency_threshold
        rows.append(verdict(metric, values, run.get(metric), threshold, allow_spread))
    last = baseline["runs"][-1].get("config", {})
    differs = [k for k in COMPARABLE if last.get(k) is not None and run.get("config", {}).get(k) != last.get(k)]
    regressions = [r["metric"] for r in rows if r["regress"]]
    return {"baseline": baseline["name"], "runs_in_baseline": len(baseline["runs"]), "rows": rows,
            "latency_threshold_pct": latency_threshold, "throughput_threshold_pct": throughput_threshold,
            "allow_spread": allow_spread, "regressions": regressions, "verdict": "REGRESS" if regressions else "OK",
            "config_differs": differs}


def format_table(report: dict) -> str:
    width = max(len(r["metric"]) for r in report["rows"]) if report["rows"] else 10
    lines = ["=" * 80, "BASELINE COMPARISON REPORT", "=" * 80,
             f"Baseline:                    {report['baseline']} ({report['runs_in_baseline']} run(s))",
             f"Latency threshold:           {report['latency_threshold_pct']:.1f}%",
             f"Throughput threshold:        {report['throughput_threshold_pct']:.1f}%",
             f"Spread allowance:            {'on (--allow-spread)' if report['allow_spread'] else 'off'}",
             "", "-" * 80, "Metric Comparisons:", "-" * 80]
    for r in report["rows"]:
        mark = "✗ REGRESS" if r["regress"] else "✓"
        cur = "nan" if r["current"] is None else f"{r['current']:.6g}"
        lines.append(f"{r['metric']:<{width}}  {r['baseline']:.6g} → {cur} ({r['delta_pct']:+.2f}%)  {mark}"
                     f"   [allowed ±{r['allowed_pct']:.3g}%]")
    if report["config_differs"]:
        lines.append(f"note: this run's {', '.join(report['config_differs'])} differ from the baseline's")
    lines.append(f"verdict: {report['verdict']}" + (f" ({', '.join(report['regressions'])})" if report["regressions"] else ""))
    lines += ["", "=" * 80]
    return "\n".join(lines)


def exit_code(report: dict) -> int:
    return 1 if report["regressions"] else 0
