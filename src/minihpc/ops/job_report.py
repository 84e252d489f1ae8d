"""`minihpc report ID`: PNG plots and a markdown summary of one job, from what the cluster
recorded -- its progress reports (every node's, kept per job), its record and the incidents.

- loss.png: training loss by step, one line per attempt (rank 0's reports);
- throughput.png: samples/s over time;
- step_time.png: mean step time per rank, split into data / forward / backward / all-reduce /
  optimizer;
- rank_step_time.png: each rank's own compute time per step (not the all-reduce) by step: a
  straggler's line stands apart, and a job balanced by measured speed (``--balance``) brings
  the lines together;
- timeline.png: each attempt's span, with node failures, restarts and requeues marked.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from minihpc.core.straggler import own_seconds
from minihpc.job.progress import PHASES
from minihpc.ops import plot
from minihpc.state.store import Store

INCIDENT_KINDS = ("down", "restart", "back", "requeued", "stalled", "drained", "straggler")


def _rank(entry: dict) -> int:
    return int(entry.get("rank", 0))


def loss_by_attempt(series: list[dict]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for e in series:
        if _rank(e) == 0 and "loss" in e:
            out.setdefault(f"attempt {int(e['attempt'])}", []).append((float(e["step"]), float(e["loss"])))
    return out


def phases_by_rank(series: list[dict]) -> dict[str, dict[str, float]]:
    """Mean seconds per step of each phase, per rank."""
    per: dict[int, dict[str, list[float]]] = {}
    for e in series:
        for phase in PHASES:
            if f"{phase}_seconds" in e:
                per.setdefault(_rank(e), {}).setdefault(phase, []).append(float(e[f"{phase}_seconds"]))
    return {f"rank {r}": {p: statistics.mean(v) for p, v in phases.items()} for r, phases in sorted(per.items())}


def compute_by_rank(series: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """Each rank's own compute seconds per step (minihpc.core.straggler.own_seconds), by step."""
    out: dict[int, tuple[str, list[tuple[float, float]]]] = {}
    for e in series:
        seconds = own_seconds(e)
        if seconds is not None and "rank" in e:
            label, points = out.setdefault(_rank(e), (f"rank {_rank(e)} ({e.get('node', '?')})", []))
            points.append((float(e["step"]), seconds))
    return dict(out[r] for r in sorted(out))


def attempt_spans(series: list[dict]) -> list[tuple[str, float, float]]:
    spans: dict[int, list[float]] = {}
    for e in series:
        spans.setdefault(int(e["attempt"]), []).append(float(e["at"]))
    return [(f"attempt {a}", min(ts), max(ts)) for a, ts in sorted(spans.items())]


PLOTS = ("loss.png", "throughput.png", "step_time.png", "rank_step_time.png", "timeline.png")
"""The PNGs :func:`write` makes."""


def charts(job, series: list[dict], incidents: list[dict]) -> dict:
    """What the report's charts show, as data (the PNGs here, the web page's job view):
    loss by attempt, rank 0's samples/s over seconds since the first report, mean step time
    per rank and phase, each attempt's span and the incidents around them (seconds, absolute)."""
    start = min((float(e["at"]) for e in series), default=job.started_at or 0.0)
    spans = attempt_spans(series)
    end = max((b for _, _, b in spans), default=start)
    near = [i for i in incidents
            if i["kind"] in INCIDENT_KINDS and start - 5 <= i["at"] <= end + 5
            and (i.get("job") == job.id or i.get("node") in job.nodes)]
    return {
        "start": start,
        "loss": loss_by_attempt(series),
        "throughput": {"samples/s": [(float(e["at"]) - start, float(e["samples_per_second"]))
                                     for e in series if _rank(e) == 0 and "samples_per_second" in e]},
        "step_time": phases_by_rank(series),
        "rank_compute": compute_by_rank(series),
        "attempts": spans,
        "incidents": sorted((i["at"], f"{i['kind']} {i.get('node') or ''}".strip()) for i in near),
    }


def job_charts(store: Store, job_id: int) -> dict:
    job = store.get_job(job_id)
    return charts(job, store.series(job_id), store.incidents(1000))


def write(store: Store, job_id: int, out: Path) -> Path:
    job = store.get_job(job_id)
    series = store.series(job_id)
    out.mkdir(parents=True, exist_ok=True)
    data = charts(job, series, store.incidents(1000))
    start, throughput, phases, spans, marks = (data[k] for k in ("start", "throughput", "step_time", "attempts", "incidents"))

    plot.line_chart(out / "loss.png", f"job {job_id} {job.name}: training loss", data["loss"], "step", "loss")
    plot.line_chart(out / "throughput.png", f"job {job_id}: throughput", throughput, "seconds", "samples/s")
    plot.stacked_bars(out / "step_time.png", f"job {job_id}: mean step time per rank", phases, "seconds per step")
    plot.line_chart(out / "rank_step_time.png", f"job {job_id}: compute time per step by rank", data["rank_compute"],
                    "step", "seconds per step")
    plot.timeline(out / "timeline.png", f"job {job_id}: attempts and incidents", spans, marks)

    final = next((e for e in reversed(series) if _rank(e) == 0 and "loss" in e), None)
    speeds = [s for _, s in throughput["samples/s"]]
    lines = [
        f"# Job {job_id}: {job.name}",
        "",
        f"- State: **{job.state.value}** after {job.queue_attempts} attempt(s), {job.requeues} requeue(s); nodes "
        f"{', '.join(job.nodes) or '-'}",
        f"- Steps: {int(final['step']) if final else '-'}"
        + (f" of {int(final['total'])}" if final and final.get("total") else "")
        + (f"; final loss {final['loss']:.4f}" if final else ""),
        f"- Throughput: median {statistics.median(speeds):.0f} samples/s" if speeds else "- Throughput: not reported",
        f"- Progress reports kept: {len(series)}",
        "",
        "## Step time per rank (mean seconds per step)",
        "",
        "| rank | " + " | ".join(PHASES) + " |",
        "|---|" + "---|" * len(PHASES),
        *(f"| {rank} | " + " | ".join(f"{v.get(p, 0.0):.4f}" for p in PHASES) + " |" for rank, v in phases.items()),
        "",
        "## Attempts and incidents",
        "",
        *(f"- {label}: {b - a:.1f} s of reported training" for label, a, b in spans),
        *(f"- {t - start:+.1f} s: {label}" for t, label in marks),
        "",
        "![loss](loss.png) ![throughput](throughput.png)",
        "![step time](step_time.png) ![compute per rank](rank_step_time.png)",
        "![timeline](timeline.png)",
        "",
    ]
    summary = out / "summary.md"
    summary.write_text("\n".join(lines))
    return summary
