"""What scripts/bench_scale.py measured, as issue 38's goals with verdicts and as a log-log SVG
of each cost against the size it grows with. Pure functions of the results; stdlib only."""

from __future__ import annotations

import math
import re

KIB = 1024

# --- the master's pass-time histogram, from its /metrics text --------------------------------

_BUCKET = re.compile(r'^minihpc_scheduling_pass_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)$', re.M)


def buckets(metrics: str) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) of the scheduling pass histogram."""
    return sorted((math.inf if le == "+Inf" else float(le), float(n)) for le, n in _BUCKET.findall(metrics))


def delta(after: list[tuple[float, float]], before: list[tuple[float, float]]) -> list[tuple[float, float]]:
    was = dict(before)
    return [(le, n - was.get(le, 0.0)) for le, n in after]


def quantile(cumulative: list[tuple[float, float]], q: float) -> float | None:
    """As Prometheus's histogram_quantile: linear within the bucket the rank falls in."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    rank, lower, below = q * cumulative[-1][1], 0.0, 0.0
    for le, count in cumulative:
        if count >= rank:
            if le == math.inf:
                return lower
            return lower + (le - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = le, count
    return lower


# --- goals --------------------------------------------------------------------------------


def goals(results: list[dict]) -> list[tuple[str, str, bool]]:
    """(goal, measured, met) for each of issue 38's goals that the results hold."""
    small, big = results[0], results[-1]
    top = big["levels"][-1] if big["levels"] else {}
    near_10k = min(big["levels"], key=lambda lv: abs(lv["jobs"] - 10_000)) if big["levels"] else {}
    calls = big["calls"]
    out = [
        ("one sbatch call, empty queue <= 0.1 s", f"{calls['sbatch_s']:.3f} s", calls["sbatch_s"] <= 0.1),
        ("one squeue call, empty queue <= 0.1 s", f"{calls['squeue_empty_s']:.3f} s", calls["squeue_empty_s"] <= 0.1),
        ("one scancel call <= 0.1 s", f"{calls['scancel_s']:.3f} s", calls["scancel_s"] <= 0.1),
        ("CLI submit (arrays) >= 1000 jobs/s", f"{max(lv['cli_submit_per_s'] for lv in big['levels']):.0f} jobs/s",
         max(lv["cli_submit_per_s"] for lv in big["levels"]) >= 1000),
        ("API submit (one job a request, 8 clients) >= 300 jobs/s", f"{calls['api_submit_per_s_8']:.0f} jobs/s "
         f"(1 client: {calls['api_submit_per_s_1']:.0f}; arrays: {calls.get('api_array_submit_per_s', 0):.0f})",
         calls["api_submit_per_s_8"] >= 300),
    ]
    if top:
        out.append((f"idle master over {top['jobs']} pending jobs <= 10% of a core", f"{100 * top['master_cores']:.0f}%",
                    top["master_cores"] <= 0.10))
        out.append((f"squeue of {top['jobs']} jobs <= 1 s", f"{top['squeue_s']:.2f} s", top["squeue_s"] <= 1.0))
    if near_10k and near_10k.get("pass_p95_s") is not None:
        out.append((f"scheduling pass p95 <= 0.1 s, {near_10k['jobs']} pending on {big['nodes']} nodes",
                    f"{near_10k['pass_p95_s']:.3f} s", near_10k["pass_p95_s"] <= 0.1))
    out.append((f">= 200 short jobs started/s on {big['nodes']} nodes", f"{big['short_started_per_s']:.0f}/s",
                big["short_started_per_s"] >= 200))
    if "crash_detect_s" in big and "crash_detect_s" in small:
        out.append((f"crash detected at {big['nodes']} nodes as fast as at {small['nodes']} (+25%)",
                    f"{big['crash_detect_s']:.2f} s vs {small['crash_detect_s']:.2f} s",
                    big["crash_detect_s"] <= 1.25 * small["crash_detect_s"] + 0.1))
    out.append(("Redis <= 2 KiB per ended job", f"{big['bytes_per_ended_job'] / KIB:.2f} KiB",
                big["bytes_per_ended_job"] <= 2 * KIB))
    return out


def report(results: list[dict]) -> bool:
    """Print the per-size table and the goals; whether every goal was met."""
    print(f"\n{'nodes':>6}{'jobs':>8}{'submit/s':>10}{'pass p50':>10}{'pass p95':>10}{'master':>8}{'redis':>7}"
          f"{'squeue':>8}{'GET /jobs':>10}{'scrape':>8}{'B/job':>7}")
    for r in results:
        for lv in r["levels"]:
            print(f"{r['nodes']:>6}{lv['jobs']:>8}{lv['cli_submit_per_s']:>10.0f}{_s(lv['pass_p50_s']):>10}"
                  f"{_s(lv['pass_p95_s']):>10}{100 * lv['master_cores']:>7.0f}%{100 * lv['redis_cores']:>6.0f}%"
                  f"{lv['squeue_s']:>7.2f}s{lv['api_jobs_s']:>9.2f}s{lv['scrape_s']:>7.2f}s"
                  f"{lv['bytes_per_pending_job']:>7.0f}")
    print(f"\n{'nodes':>6}{'idle: redis cmd/s':>19}{'redis':>7}{'master':>8}{'sim':>6}{'B/node':>8}{'short/s':>9}"
          f"{'B/ended':>9}{'busy p95':>9}{'crash':>8}{'silence':>9}")
    for r in results:
        idle = r["idle"]
        print(f"{r['nodes']:>6}{idle['redis_commands_per_s']:>19.0f}{100 * idle['redis_cores']:>6.0f}%"
              f"{100 * idle['master_cores']:>7.0f}%{100 * idle['simulated_cores']:>5.0f}%{idle['redis_bytes_per_node']:>8.0f}"
              f"{_n(r.get('short_started_per_s')):>9}{_n(r.get('bytes_per_ended_job')):>9}{_s(r.get('busy_pass_p95_s')):>9}"
              f"{_s(r.get('crash_detect_s')):>8}{_s(r.get('silence_detect_s')):>9}")
    print(f"\n{'goal':<61}{'measured':<44}verdict")
    verdicts = goals(results)
    for goal, measured, met in verdicts:
        print(f"{goal:<61}{measured:<44}{'met' if met else 'MISSED'}")
    return all(met for _, _, met in verdicts)


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


# --- the plot -------------------------------------------------------------------------------

SERIES = [("pass_p50_s", "scheduling pass p50 (s)"), ("squeue_s", "squeue (s)"), ("api_jobs_s", "GET /jobs (s)"),
          ("scrape_s", "exporter scrape (s)"), ("master_cores", "idle master (cores)")]
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
DASHES = ["", "6 3", "2 2", "8 3 2 3"]
"""Solid for the first node count, then dashed, dotted, dash-dotted."""


def plot(results: list[dict], width: int = 760, height: int = 480) -> str:
    """A log-log SVG: each cost against the queued jobs, one line per cost and node count
    (a slope of 1 is linear growth, 0 constant)."""
    lines = []  # (label, points, colour: the cost, dashes: the node count)
    for n, r in enumerate(results):
        for k, (key, label) in enumerate(SERIES):
            points = [(lv["jobs"], lv[key]) for lv in r["levels"] if lv.get(key)]
            if points:
                lines.append((f"{label}, {r['nodes']} nodes", points, COLOURS[k % len(COLOURS)], DASHES[n % len(DASHES)]))
    xs = [x for _, pts, _, _ in lines for x, _ in pts] or [1, 10]
    ys = [y for _, pts, _, _ in lines for _, y in pts if y > 0] or [1, 10]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)) - 1e-9)
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)) - 1e-9)
    x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)
    left, top, right, bottom = 70, 20, width - 260, height - 50

    def px(x: float, y: float) -> tuple[float, float]:
        return (left + (math.log10(x) - x0) / (x1 - x0) * (right - left),
                bottom - (math.log10(y) - y0) / (y1 - y0) * (bottom - top))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>']
    for e in range(x0, x1 + 1):
        x, _ = px(10 ** e, 10 ** y0)
        out += [f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#ddd"/>',
                f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle">1e{e}</text>']
    for e in range(y0, y1 + 1):
        _, y = px(10 ** x0, 10 ** e)
        out += [f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#ddd"/>',
                f'<text x="{left - 5}" y="{y + 4:.1f}" text-anchor="end">1e{e}</text>']
    out.append(f'<text x="{(left + right) / 2}" y="{height - 12}" text-anchor="middle">queued jobs</text>')
    for i, (label, points, colour, dashes) in enumerate(lines):
        dash = f' stroke-dasharray="{dashes}"' if dashes else ""
        coords = " ".join(f"{a:.1f},{b:.1f}" for a, b in (px(x, y) for x, y in points))
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        ly = top + 14 * i
        out += [f'<line x1="{right + 10}" y1="{ly}" x2="{right + 30}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>',
                f'<text x="{right + 35}" y="{ly + 4}">{label}</text>']
    out.append("</svg>")
    return "\n".join(out) + "\n"
