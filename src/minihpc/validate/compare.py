"""Single- vs multi-process correctness: the global loss step by step, within a tolerance.

A NaN or infinite loss on either side fails its step (NaN compares false with everything).
"""

from __future__ import annotations

import math
from pathlib import Path


def compare_losses(single: list[dict], multi: list[dict], tolerance: float) -> list[dict]:
    """One row per step both runs have: losses, absolute and relative delta, pass."""
    theirs = {s["step"]: s["loss"] for s in multi}
    rows = []
    for s in single:
        if s["step"] not in theirs:
            continue
        a, b = s["loss"], theirs[s["step"]]
        delta = abs(a - b)
        rel = delta / abs(a) if a else (0.0 if delta == 0 else math.inf)
        rows.append({"step": s["step"], "single": a, "multi": b, "abs_delta": delta, "rel_delta": rel,
                     "pass": math.isfinite(delta) and delta <= tolerance})
    return rows


def report(single_run: dict, multi_run: dict, tolerance: float) -> dict:
    """The comparison report: rows, verdict, the largest delta and where it was."""
    rows = compare_losses(single_run["steps"], multi_run["steps"], tolerance)
    missing = sorted({s["step"] for s in single_run["steps"]} ^ {s["step"] for s in multi_run["steps"]})
    worst = max(rows, key=lambda r: r["abs_delta"] if math.isfinite(r["abs_delta"]) else math.inf, default=None)
    failed = [r["step"] for r in rows if not r["pass"]]
    verdict = "PASS" if rows and not failed and not missing else "FAIL"
    return {
        "verdict": verdict,
        "tolerance": tolerance,
        "max_abs_delta": worst["abs_delta"] if worst else None,
        "max_rel_delta": max((r["rel_delta"] for r in rows), default=None),
        "max_delta_step": worst["step"] if worst else None,
        "steps_compared": len(rows),
        "failed_steps": failed,
        "steps_in_one_run_only": missing,
        "single": _side(single_run),
        "multi": _side(multi_run),
        "steps": rows,
    }


def _side(run: dict) -> dict:
    """Who ran it; for the parameter-server strategy, what its timeout left out."""
    side = {"num_workers": run.get("num_workers"), "strategy": run.get("strategy")}
    if "parameter_server" in run:
        ps = run["parameter_server"]
        side["parameter_server"] = {k: ps.get(k) for k in ("timeout_sec", "skipped_total", "steps_with_skips")}
    return side


def format_report(rep: dict, limit: int = 10) -> str:
    lines = [f"{'step':>5}  {'single':>14}  {'multi':>14}  {'abs delta':>10}  {'rel delta':>10}  ok"]
    rows = rep["steps"]
    shown = rows if len(rows) <= limit else rows[: limit // 2] + rows[-(limit // 2):]
    for i, r in enumerate(shown):
        if len(rows) > limit and i == limit // 2:
            lines.append(f"{'...':>5}")
        lines.append(f"{r['step']:>5}  {r['single']:>14.8g}  {r['multi']:>14.8g}  {r['abs_delta']:>10.3g}  "
                     f"{r['rel_delta']:>10.3g}  {'✓' if r['pass'] else '✗'}")
    lines.append(f"{rep['single']['num_workers']} vs {rep['multi']['num_workers']} workers, {rep['steps_compared']} steps: "
                 f"max |delta| {rep['max_abs_delta']:.3g} at step {rep['max_delta_step']} "
                 f"(tolerance {rep['tolerance']:g}) -> {rep['verdict']}")
    if rep["failed_steps"]:
        lines.append(f"failed steps: {', '.join(map(str, rep['failed_steps'][:20]))}")
    if rep["steps_in_one_run_only"]:
        lines.append(f"steps in one run only: {len(rep['steps_in_one_run_only'])}")
    for name in ("single", "multi"):
        ps = rep[name].get("parameter_server")
        if ps:
            lines.append(f"{name} run: parameter server, {ps['skipped_total']} worker-step(s) left out of the "
                         f"average by its {ps['timeout_sec']:g} s timeout in {ps['steps_with_skips']} step(s)"
                         + (" -- the losses cannot match there" if ps["skipped_total"] else ""))
    return "\n".join(lines)


def plot(rep: dict, path: str | Path) -> list[Path]:
    """Both loss curves in ``path``, their absolute delta in ``<stem>-delta.png`` beside it."""
    from minihpc.ops.plot import line_chart

    path = Path(path)
    rows = rep["steps"]
    finite = [r for r in rows if math.isfinite(r["single"]) and math.isfinite(r["multi"])]
    losses = {f"single ({rep['single']['num_workers']})": [(r["step"], r["single"]) for r in finite],
              f"multi ({rep['multi']['num_workers']})": [(r["step"], r["multi"]) for r in finite]}
    line_chart(path, f"global loss: {rep['verdict']} at tolerance {rep['tolerance']:g}", losses, "step", "loss")
    delta_path = path.with_name(f"{path.stem}-delta{path.suffix or '.png'}")
    line_chart(delta_path, "|single - multi|", {"abs delta": [(r["step"], r["abs_delta"]) for r in finite]},
               "step", "abs delta")
    return [path, delta_path]
