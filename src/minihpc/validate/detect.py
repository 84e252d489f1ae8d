"""Detectors: pure functions from run reports (see :mod:`minihpc.validate.aggregate`) to
detections, ``{"detector", "rank", "ranks", "step", "why"}`` -- who, when first, and why.

Some need only the run itself (straggler, non-finite, checksum, step mismatch); others compare
with a reference of the same seed: the single-process run (loss divergence), or a clean run of
the same workers (throughput, local gradient norms).
"""

from __future__ import annotations

import math
from collections import Counter
from statistics import median

EWMA_ALPHA = 0.3
STRAGGLER_FACTOR = 3.0
STRAGGLER_MARGIN_MS = 100.0
STREAK = 3
"""Consecutive steps a timing condition must hold: one descheduled step on a busy machine is
noise, a slow rank is slow step after step."""
THROUGHPUT_RATIO = 0.5
GRAD_NORM_RTOL = 1e-6
"""Same seed, same workers, float64: a clean rank's local gradient norm repeats to ~1e-15."""


def detection(detector: str, ranks: list[int] | None, step: int | None, why: str) -> dict:
    ranks = sorted(ranks) if ranks else []
    return {"detector": detector, "rank": ranks[0] if ranks else None, "ranks": ranks, "step": step, "why": why}


def _ranked(per_rank: dict, field: str) -> dict[int, list[float]]:
    return {int(r): v[field] for r, v in per_rank.items()}


def straggler(compute_ms: dict[int, list[float]]) -> list[dict]:
    """A rank whose EWMA compute time exceeds STRAGGLER_FACTOR x the median of the others' and
    the others' + STRAGGLER_MARGIN_MS, its raw compute time too, STREAK steps running."""
    ranks = sorted(compute_ms)
    if len(ranks) < 2:
        return []
    n = min(len(v) for v in compute_ms.values())
    ewma: dict[int, float] = {}
    streak = dict.fromkeys(ranks, 0)
    for i in range(n):
        for r in ranks:
            x = compute_ms[r][i]
            ewma[r] = x if r not in ewma else EWMA_ALPHA * x + (1 - EWMA_ALPHA) * ewma[r]
        for r in ranks:
            others = median(ewma[o] for o in ranks if o != r)
            raw_others = median(compute_ms[o][i] for o in ranks if o != r)
            slow = (ewma[r] > STRAGGLER_FACTOR * others and ewma[r] > others + STRAGGLER_MARGIN_MS
                    and compute_ms[r][i] > raw_others + STRAGGLER_MARGIN_MS)
            streak[r] = streak[r] + 1 if slow else 0
            if streak[r] == STREAK:
                first = i - STREAK + 1
                return [detection("straggler-ewma", [r], first,
                                  f"rank {r}'s compute time (EWMA {ewma[r]:.0f} ms) is {ewma[r] / max(others, 1e-9):.0f}x "
                                  f"the others' median ({others:.1f} ms) from step {first} on")]
    return []


def non_finite(per_rank: dict) -> list[dict]:
    """The first step where some rank's local gradient norm or local loss is NaN or infinite."""
    grads, losses = _ranked(per_rank, "local_grad_norm"), _ranked(per_rank, "local_loss")
    n = min((len(v) for v in grads.values()), default=0)
    for i in range(n):
        bad = [r for r in sorted(grads) if not (math.isfinite(grads[r][i]) and math.isfinite(losses[r][i]))]
        if bad:
            what = "gradient norm" if not math.isfinite(grads[bad[0]][i]) else "loss"
            return [detection("non-finite", bad, i, f"rank {bad[0]}'s local {what} is {grads[bad[0]][i] if what == 'gradient norm' else losses[bad[0]][i]} at step {i}")]
    return []


def odd_ranks(digests: dict[int, str], reference: str | None = None) -> list[int]:
    """Ranks whose checksum differs from the majority's; with no majority (2 ranks), those
    that differ from the reference's when one is given, else all of them."""
    if len(set(digests.values())) <= 1:
        return []
    top, count = Counter(digests.values()).most_common(1)[0]
    if count * 2 > len(digests):
        return sorted(r for r, d in digests.items() if d != top)
    if reference is not None:
        return sorted(r for r, d in digests.items() if d != reference)
    return sorted(digests)


def checksum_mismatch(checksums: dict[str, dict[str, str]], reference: dict[str, str] | None = None) -> list[dict]:
    for step, by_rank in sorted(checksums.items(), key=lambda kv: int(kv[0])):
        digests = {int(r): d for r, d in by_rank.items()}
        odd = odd_ranks(digests, (reference or {}).get(step))
        if odd:
            return [detection("checksum", odd, int(step),
                              f"parameter checksum of rank(s) {', '.join(map(str, odd))} differs from the "
                              f"{'majority' if len(odd) < len(digests) / 2 else 'others'} at step {step}")]
    return []


def step_mismatch(asked: int, completed: int, timed_out: bool, heartbeats: dict | None) -> list[dict]:
    """Fewer steps than asked: names the rank not in the all-reduce while others wait there
    (else the rank furthest behind)."""
    if completed >= asked and not timed_out:
        return []
    beats = {int(r): b for r, b in (heartbeats or {}).items()}
    waiting = [r for r, b in beats.items() if b.get("phase") == "allreduce"]
    culprits = [r for r, b in beats.items() if b.get("phase") not in ("allreduce", "done")]
    if not (waiting and culprits) and beats:
        low = min(b.get("step", 0) for b in beats.values())
        culprits = [r for r, b in beats.items() if b.get("step") == low]
    step = beats[min(culprits)].get("step") if culprits else None
    phases = ", ".join(f"rank {r}: {b.get('phase')} of step {b.get('step')}" for r, b in sorted(beats.items()))
    why = (f"{completed} of {asked} steps completed{' before the run was ended for not advancing' if timed_out else ''}"
           f"; last heartbeats: {phases or 'none'}")
    return [detection("step-mismatch", culprits, step, why)]


def loss_divergence(rows: list[dict]) -> list[dict]:
    """The first failing row of :func:`minihpc.validate.compare.compare_losses`."""
    for row in rows:
        if not row["pass"]:
            return [detection("loss-divergence", None, row["step"],
                              f"global loss {row['multi']:.6g} vs single-process {row['single']:.6g} at step "
                              f"{row['step']}: |delta| {row['abs_delta']:.3g} ({100 * row['rel_delta']:.3g}%) "
                              "beyond the tolerance")]
    return []


def grad_norm_deviation(per_rank: dict, clean_per_rank: dict, rtol: float = GRAD_NORM_RTOL) -> list[dict]:
    """The first step where some rank's local gradient norm differs from the clean run's, same
    rank and step."""
    run, clean = _ranked(per_rank, "local_grad_norm"), _ranked(clean_per_rank, "local_grad_norm")
    ranks = sorted(set(run) & set(clean))
    n = min((min(len(run[r]), len(clean[r])) for r in ranks), default=0)
    for i in range(n):
        odd = [r for r in ranks if not math.isfinite(run[r][i]) or abs(run[r][i] - clean[r][i]) > rtol * max(abs(clean[r][i]), 1e-12)]
        if odd:
            r = odd[0]
            return [detection("grad-norm", odd, i, f"rank {r}'s local gradient norm {run[r][i]:.6g} vs {clean[r][i]:.6g} "
                                                   f"in the clean run at step {i}")]
    return []


def longest_streak(flags: list[bool]) -> tuple[int, int]:
    """Where the longest run of True starts and ends, as slice bounds (the latest among equals):
    a slowdown that lasts, not a slow first step while the ranks warm up."""
    best, best_len, start = 0, 0, None
    for i, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if i - start >= best_len:
                best, best_len = start, i - start
            start = None
    return best, best + best_len


def onset(excess: list[float]) -> int:
    """Where a slowdown that lasts starts, in a run of slow steps (their time over the clean
    run's): the first step at least half as late as the run's median. A step a busy machine
    slowed just before the fault joins the run, but is not as late as the fault's steps. 0 for
    no run (no single step both slow and late enough)."""
    if not excess:
        return 0
    level = median(excess) / 2
    return next(i for i, e in enumerate(excess) if e >= level)


def throughput_drop(steps: list[dict], clean_steps: list[dict]) -> list[dict]:
    """Median throughput below THROUGHPUT_RATIO of the clean run's, with the median step time
    STRAGGLER_MARGIN_MS longer (scheduler noise is not a slowdown); the step first seen is
    where the longest run of such steps starts (its :func:`onset`)."""
    if not steps or not clean_steps:
        return []
    clean_tp = median(s["throughput_samples_per_sec"] for s in clean_steps)
    clean_st = median(s["step_time_ms"] for s in clean_steps)
    run_tp = median(s["throughput_samples_per_sec"] for s in steps)
    if not (run_tp < THROUGHPUT_RATIO * clean_tp and median(s["step_time_ms"] for s in steps) > clean_st + STRAGGLER_MARGIN_MS):
        return []
    slow = [s["throughput_samples_per_sec"] < THROUGHPUT_RATIO * clean_tp and s["step_time_ms"] > clean_st + STRAGGLER_MARGIN_MS
            for s in steps]
    start, end = longest_streak(slow)
    first = steps[start + onset([s["step_time_ms"] - clean_st for s in steps[start:end]])]["step"]
    return [detection("throughput", None, first, f"median throughput {run_tp:.0f} samples/s is "
                      f"{100 * run_tp / clean_tp:.0f}% of the clean run's {clean_tp:.0f} (below {100 * THROUGHPUT_RATIO:.0f}%)")]


def detect_run(run: dict) -> list[dict]:
    """The detectors that need only the run."""
    asked = run["config"].get("steps", run["num_steps"])
    launch = run.get("launch", {})
    return [*straggler(_ranked(run["per_rank"], "compute_time_ms")), *non_finite(run["per_rank"]),
            *checksum_mismatch(run["checksums"]),
            *step_mismatch(asked, run["num_steps"], launch.get("timed_out", False), launch.get("heartbeats"))]


def detect_against(run: dict, tolerance: float | None, single: dict | None = None, clean: dict | None = None,
                   throughput_ref: dict | None = None, abs_tolerance: float | None = None) -> list[dict]:
    """The detectors that compare: losses with the single-process run of the same seed (within
    ``tolerance``, relative, and ``abs_tolerance``, absolute, each when given), local gradient
    norms with a clean run of the same seed and workers, throughput with a clean run
    (``throughput_ref``, default ``clean``)."""
    from minihpc.validate.compare import compare_losses

    found = []
    if single is not None:
        found += loss_divergence(compare_losses(single["steps"], run["steps"], atol=abs_tolerance, rtol=tolerance))
    if clean is not None:
        found += grad_norm_deviation(run["per_rank"], clean["per_rank"])
    throughput_ref = throughput_ref or clean
    if throughput_ref is not None:
        found += throughput_drop(run["steps"], throughput_ref["steps"])
    return found


def first(detections: list[dict]) -> dict | None:
    """The earliest detection (by step), one naming a rank first among equals."""
    ranked = sorted(detections, key=lambda d: (d["step"] if d["step"] is not None else math.inf, d["rank"] is None))
    return ranked[0] if ranked else None
