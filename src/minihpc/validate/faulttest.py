"""fault-test: inject each fault into one rank and check that a detector names it, on the
right rank, with the step it was first seen -- and that clean runs trip no detector.

Per seed: the single-process reference and one clean run of the workers, plus a second clean
run of the first seed judged exactly as the faulty runs are (false positives are counted on
these). Then each fault, seed = the first seed, on ``fault_rank`` from
``fault_step`` (default steps // 3), judged against that seed's references.

The report carries the spec's keys (``num_faults``, ``num_detected``, ``num_missed``,
``detection_rate``, ``summary``; per fault ``fault_type``, ``detected``, ``affected_rank``,
``reason``) beside its own (``injected``, ``detected``, ``located``), and ISO-8601 UTC
``start_timestamp`` / ``end_timestamp``. ``--tolerance`` is relative, ``--abs-tolerance``
absolute, as in ``validate`` (:func:`minihpc.validate.compare.tolerances`).
"""

from __future__ import annotations

import time

from minihpc.core.errors import UsageError
from minihpc.validate import compare, detect, inject
from minihpc.validate.records import iso_utc

FAULT_TEST_DEFAULTS = {
    "steps": 50, "tolerance": None, "abs_tolerance": None, "output": None, "workers": 3, "seeds": "42,43,44",
    "batch_size": 48,
    "faults": ",".join(inject.KINDS), "fault_rank": 1, "fault_step": None, "step_timeout": 5.0,
    "checksum_every": 5, "hidden": "64,64", "workload": "synthetic", "lr": 0.01,
}
"""Every flag of ``validate fault-test`` and its default."""

EXPECTED = {
    "slow": ("throughput", "straggler-ewma"),
    "grad-noise": ("loss-divergence", "grad-norm"),
    "hang": ("step-mismatch",),
    "nan": ("non-finite",),
    "drift": ("checksum", "grad-norm"),
    "bitflip": ("checksum", "grad-norm"),
}
"""The detectors each fault is meant to trip (any detection counts; these are reported)."""

TIMING = ("throughput", "straggler-ewma")
"""Detectors that judge time, which a busy machine moves as a fault would."""

FAULT_TYPES = {
    "slow": "SLOW_WORKER", "grad-noise": "GRADIENT_SYNC_ANOMALY", "hang": "WORKER_TIMEOUT",
    "nan": "NAN_GRADIENT", "drift": "PARAMETER_DRIFT", "bitflip": "BIT_FLIP",
}
"""Each fault's name in the report: the spec's three, and names in its style for ours."""


def parse_list(text: str, what: str, cast=str) -> list:
    try:
        items = [cast(p.strip()) for p in str(text).split(",") if p.strip()]
    except ValueError:
        raise UsageError(f"--{what} {text!r} is not a comma-separated list") from None
    if not items:
        raise UsageError(f"--{what} is empty")
    return items


def plan(opts: dict) -> tuple[list[int], list[str], int]:
    seeds = parse_list(opts["seeds"], "seeds", int)
    faults = parse_list(opts["faults"], "faults")
    bad = [f for f in faults if f not in inject.KINDS]
    if bad:
        raise UsageError(f"--faults names {', '.join(bad)}; fault kinds are {', '.join(inject.KINDS)}")
    if opts["workers"] < 2:
        raise UsageError(f"fault-test needs 2 or more --workers, got {opts['workers']}")
    step = opts["fault_step"] if opts["fault_step"] is not None else max(1, opts["steps"] // 3)
    return seeds, faults, step


def outcome(kind: str, rank: int, step: int, detections: list[dict]) -> dict:
    """One fault's line: detected or missed, the rank and step first seen, why. A timing
    detection dated before the fault's step cannot be the fault's (a run slowed by a busy
    machine before anything was injected): it is listed as ``before_fault``, not counted."""
    early = [d for d in detections if d["detector"] in TIMING and d["step"] is not None and d["step"] < step]
    detections = [d for d in detections if d not in early]
    first = detect.first(detections)
    named = detect.first([d for d in detections if d["rank"] is not None])
    return {"fault": kind, "fault_type": FAULT_TYPES[kind], "affected_rank": rank,
            "reason": f"Detected via {', '.join(sorted({d['detector'] for d in detections}))}: {first['why']}"
            if first else "no detector fired",
            "injected_rank": rank, "injected_step": step, "detected": bool(detections),
            "rank": named["rank"] if named else None, "rank_correct": bool(named) and rank in named["ranks"],
            "step_first_seen": first["step"] if first else None,
            "detectors": sorted({d["detector"] for d in detections}), "expected_detectors": list(EXPECTED[kind]),
            "why": first["why"] if first else "no detector fired", "detections": detections, "before_fault": early}


def summarize(outcomes: list[dict], clean: list[dict]) -> dict:
    """PASS: every fault detected and pinned on the rank it was injected on; no clean run tripped
    a detector."""
    detected = sum(1 for o in outcomes if o["detected"])
    located = sum(1 for o in outcomes if o["detected"] and o["rank_correct"])
    false_positives = [d for c in clean for d in c["detections"]]
    missed = len(outcomes) - detected
    return {"faults": outcomes, "clean_runs": clean, "detected": detected, "located": located,
            "injected": len(outcomes), "num_faults": len(outcomes), "num_detected": detected, "num_missed": missed,
            "detection_rate": detected / len(outcomes) if outcomes else 1.0,
            "false_positives": len(false_positives),
            "summary": f"Fault injection testing complete: {detected}/{len(outcomes)} faults detected, {missed} missed",
            "verdict": "PASS" if located == len(outcomes) and not false_positives else "FAIL"}


def base_config(opts: dict) -> dict:
    keys = ("steps", "batch_size", "checksum_every", "hidden", "workload", "lr", "step_timeout")
    return {k: opts[k] for k in keys}


def run_all(opts: dict, execute, log=lambda line: None) -> dict:
    """Every reference, clean and faulty run, with ``execute(config) -> run report``."""
    opts = {**FAULT_TEST_DEFAULTS, **opts}
    seeds, faults, step = plan(opts)
    base, workers = base_config(opts), opts["workers"]
    rtol, atol = compare.tolerances(opts["tolerance"], opts["abs_tolerance"])
    tol = {"tolerance": rtol, "abs_tolerance": atol}
    if base["batch_size"] % workers:
        raise UsageError(f"--batch-size {base['batch_size']} is not divisible by {workers} workers")
    started = time.time()
    singles, cleans, clean_results = {}, {}, []
    for seed in seeds:
        log(f"seed {seed}: single-process reference and a clean run of {workers} workers")
        singles[seed] = execute({**base, "workers": 1, "seed": seed})
        cleans[seed] = execute({**base, "workers": workers, "seed": seed})
        found = cleans[seed]["detections"] + detect.detect_against(
            cleans[seed], single=singles[seed], throughput_ref=cleans[seeds[0]] if seed != seeds[0] else None, **tol)
        clean_results.append({"seed": seed, "detections": found, "final_loss": cleans[seed]["final_loss"]})
    # The faulty runs are judged against the first seed's clean run by every detector, those that
    # compare with a clean run too (gradient norms, throughput): a second clean run of that seed,
    # judged the same way, is where those would show a false positive.
    log(f"seed {seeds[0]}: a second clean run, judged like the faulty ones")
    repeat = execute({**base, "workers": workers, "seed": seeds[0]})
    found = repeat["detections"] + detect.detect_against(repeat, single=singles[seeds[0]], clean=cleans[seeds[0]], **tol)
    clean_results.append({"seed": seeds[0], "repeat": True, "detections": found, "final_loss": repeat["final_loss"]})
    outcomes = []
    for kind in faults:
        log(f"fault {kind} on rank {opts['fault_rank']} from step {step}")
        run = execute({**base, "workers": workers, "seed": seeds[0], "inject": kind,
                       "fault_rank": opts["fault_rank"], "fault_step": step})
        found = run["detections"] + detect.detect_against(run, single=singles[seeds[0]], clean=cleans[seeds[0]], **tol)
        outcomes.append(outcome(kind, opts["fault_rank"], step, found))
    report = summarize(outcomes, clean_results)
    ended = time.time()
    report.update(start_timestamp=iso_utc(started), end_timestamp=iso_utc(ended), start_time_unix=started,
                  end_time_unix=ended, total_time_sec=ended - started)
    report["config"] = {**opts, **tol, "fault_step": step}
    return report


def _spec_block(report: dict) -> list[str]:
    """The spec's report head and per-fault lines."""
    rule, thin = "=" * 80, "-" * 80
    lines = [rule, "FAULT INJECTION TEST REPORT", rule, f"Total faults tested:  {report['num_faults']}",
             f"Faults detected:      {report['num_detected']}", f"Faults missed:        {report['num_missed']}",
             f"Detection rate:       {100 * report['detection_rate']:.1f}%", "", thin, "Fault Detection Results:", ""]
    for o in report["faults"]:
        lines += [f"{o['fault_type']}: {'✓ DETECTED' if o['detected'] else '✗ MISSED'}",
                  f"  Affected rank: {o['affected_rank']}", f"  Reason: {o['reason'][:160]}", ""]
    return lines + [thin]


def format_table(report: dict) -> str:
    lines = _spec_block(report)
    lines.append(f"{'fault':<11} {'result':<9} {'rank':>4} {'step':>5}  {'detectors':<38} why")
    for o in report["faults"]:
        rank = "-" if o["rank"] is None else str(o["rank"])
        step = "-" if o["step_first_seen"] is None else str(o["step_first_seen"])
        lines.append(f"{o['fault']:<11} {'DETECTED' if o['detected'] else 'MISSED':<9} {rank:>4} {step:>5}  "
                     f"{','.join(o['detectors']):<38} {o['why'][:110]}")
    lines.append(f"detection rate {100 * report['detection_rate']:.0f}% ({report['detected']}/{report['injected']}, "
                 f"{report['located']} on the injected rank), false positives {report['false_positives']} over {len(report['clean_runs'])} clean run(s) "
                 f"(seeds {', '.join(str(c['seed']) for c in report['clean_runs'])}) -> {report['verdict']}")
    for c in report["clean_runs"]:
        for d in c["detections"]:
            lines.append(f"false positive, seed {c['seed']}: {d['detector']}: {d['why']}")
    lines += ["-" * 80, f"SUMMARY: {report['summary']}", "=" * 80]
    return "\n".join(lines)
