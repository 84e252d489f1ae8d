"""Turning the ranks' records into one run report (run.json): per-step records, per-rank
step times and the aggregates. Pure functions of the records.

Timestamps are ISO-8601 UTC strings, as the spec's report shows (``start_timestamp``); the exact
epoch floats they were before are ``start_time_unix`` / ``end_time_unix``.

Per-step times are the maximum over ranks (the step is as slow as its slowest rank); the loss
is the global loss (every rank's all-reduced mean), taken from the lowest rank that has it.
"""

from __future__ import annotations

import math
import os
import platform
import socket
import sys

from minihpc.validate.records import iso_utc

STEP_FIELDS = ("step_time_ms", "compute_time_ms", "data_time_ms", "allreduce_time_ms")


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between closest ranks (numpy's
    default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def steps_by_rank(records: dict[int, list[dict]]) -> dict[int, dict[int, dict]]:
    """{rank: {step: step record}}."""
    return {rank: {r["step"]: r for r in lines if r.get("event") == "step"} for rank, lines in records.items()}


def per_step(by_rank: dict[int, dict[int, dict]]) -> list[dict]:
    """One record per step that every rank finished."""
    if not by_rank:
        return []
    common = set.intersection(*(set(steps) for steps in by_rank.values()))
    out = []
    for step in sorted(common):
        rows = [by_rank[r][step] for r in sorted(by_rank)]
        rec = {"step": step, "loss": rows[0]["loss"]}
        rec.update({f: max(row[f] for row in rows) for f in STEP_FIELDS})
        samples = sum(row["samples"] for row in rows)
        rec["samples"] = samples
        rec["throughput_samples_per_sec"] = samples / (rec["step_time_ms"] / 1e3) if rec["step_time_ms"] > 0 else 0.0
        if "ps_arrived" in rows[0]:
            rec["ps_arrived"] = rows[0]["ps_arrived"]
        out.append(rec)
    return out


def per_rank(by_rank: dict[int, dict[int, dict]]) -> dict[str, dict]:
    """Each rank's step times, compute times and local gradient norms, in step order."""
    out = {}
    for rank, steps in sorted(by_rank.items()):
        ordered = [steps[s] for s in sorted(steps)]
        out[str(rank)] = {
            "step_time_ms": [r["step_time_ms"] for r in ordered],
            "compute_time_ms": [r["compute_time_ms"] for r in ordered],
            "local_grad_norm": [r["local_grad_norm"] for r in ordered],
            "local_loss": [r["local_loss"] for r in ordered],
        }
    return out


def checksums(records: dict[int, list[dict]]) -> dict[str, dict[str, str]]:
    """{step: {rank: parameter checksum}} as each rank recorded its own."""
    out: dict[str, dict[str, str]] = {}
    for rank, lines in records.items():
        for r in lines:
            if r.get("event") == "checksum":
                out.setdefault(str(r["step"]), {})[str(rank)] = r["digest"]
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def _times(records: dict[int, list[dict]], event: str) -> list[float]:
    return [r["time"] for lines in records.values() for r in lines if r.get("event") == event]


def aggregates(steps: list[dict], records: dict[int, list[dict]], workers: int) -> dict:
    starts, ends = _times(records, "start"), _times(records, "end") or _times(records, "step")
    step_times = [s["step_time_ms"] for s in steps]
    losses = [s["loss"] for s in steps]
    busy = sum(step_times) / 1e3
    start, end = (min(starts) if starts else None), (max(ends) if ends else None)
    return {
        "num_workers": workers,
        "num_steps": len(steps),
        "total_time_sec": (end - start) if start is not None and end is not None else 0.0,
        "total_allreduce_time_ms": sum(s["allreduce_time_ms"] for s in steps),
        "total_compute_time_ms": sum(s["compute_time_ms"] for s in steps),
        "average_loss": sum(losses) / len(losses) if losses else None,
        "final_loss": losses[-1] if losses else None,
        "average_throughput_samples_per_sec": sum(s["samples"] for s in steps) / busy if busy > 0 else 0.0,
        "step_time_p50_ms": percentile(step_times, 50),
        "step_time_p95_ms": percentile(step_times, 95),
        "start_timestamp": iso_utc(start),
        "end_timestamp": iso_utc(end),
        "start_time_unix": start,
        "end_time_unix": end,
    }


def evaluations(records: dict[int, list[dict]]) -> list[dict]:
    """The held-out loss every ``--eval-steps`` steps, from the lowest rank that has it (every
    rank evaluates the same parameters on the same test set)."""
    for rank in sorted(records):
        found = [{"step": r["step"], "test_loss": r["loss"], "eval_time_ms": r.get("eval_time_ms")}
                 for r in records[rank] if r.get("event") == "eval"]
        if found:
            return found
    return []


def versions(records: dict[int, list[dict]]) -> dict:
    first = next((r for lines in records.values() for r in lines if r.get("event") == "start"), {})
    return {"torch": first.get("torch"), "minihpc": first.get("minihpc"),
            "python": first.get("python") or sys.version.split()[0]}


def machine(records: dict[int, list[dict]] | None = None) -> dict:
    """Where the run was launched from, and the host and device each rank ran on (``--cluster``:
    the nodes; ``cpu`` or ``cuda:N``)."""
    starts = [(str(rank), r) for rank, lines in sorted((records or {}).items())
              for r in lines if r.get("event") == "start"]
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "rank_hosts": {rank: r["hostname"] for rank, r in starts if r.get("hostname")},
            "rank_devices": {rank: r["device"] for rank, r in starts if r.get("device")}}


def backend(records: dict[int, list[dict]], config: dict) -> str | None:
    """The process group's backend the ranks chose (``--backend auto`` is decided by each rank,
    where the GPUs are); None for the parameter server, which has none, and for records from
    before ranks said."""
    if config.get("strategy", "ddp") != "ddp":
        return None
    chosen = {r["backend"] for lines in records.values() for r in lines
              if r.get("event") == "start" and r.get("backend")}
    return ",".join(sorted(chosen)) or None


def merge(records: dict[int, list[dict]], workers: int, config: dict) -> dict:
    """The run report, less detections and launch outcome (the runner adds those)."""
    by_rank = steps_by_rank(records)
    steps = per_step(by_rank)
    return {
        **aggregates(steps, records, workers),
        "strategy": config.get("strategy", "ddp"),
        "backend": backend(records, config),
        "workload": config.get("workload", "synthetic"),
        "step_times_from": "max over ranks; loss is the global (all-reduced) loss",
        "versions": versions(records),
        "machine": machine(records),
        "config": config,
        "steps": steps,
        "per_rank": per_rank(by_rank),
        "checksums": checksums(records),
        "eval": evaluations(records),
    }
