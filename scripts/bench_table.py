"""The engine benchmark's table (scripts/bench.py): every figure beside its raw baseline, with
its ratio and goal."""

from __future__ import annotations

import statistics

GOALS = {"barrier": 0.3, "throughput": 20.0, "mnist": 0.95}
PARTS = ("barrier", "latency", "throughput", "mnist")


def mnist_summary(pairs: list[dict]) -> dict:
    """The pairs and the median of their ratios: the goal's figure. Each pair is taken side by
    side, so the drift of an hour (20-35% here) cancels within it, not between pairs; the
    median keeps one pair disturbed by something else on the machine from deciding."""
    return {"pairs": pairs, "median_ratio": statistics.median(p["ratio"] for p in pairs)}


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def table(results: dict) -> str:
    """The markdown table of the engine's figures against the raw baselines, with each goal."""
    lines = [
        "| measure | minihpc | raw baseline | ratio | goal |",
        "|---|---|---|---|---|",
    ]
    b = results.get("barrier_3node")
    for q in ("p50", "p95") if b else ():
        ratio = b["warm"][q] / b["torchrun"][q]
        lines.append(
            f"| submit -> every rank past its first barrier, 3 nodes, {q} (s) | {b['warm'][q]:.3f} "
            f"(cold: {b['cold'][q]:.3f}) | {b['torchrun'][q]:.3f} (torchrun --standalone --nproc-per-node 3) | "
            f"{ratio:.2f}x | <= {GOALS['barrier']}x: {verdict(ratio <= GOALS['barrier'])} |"
        )
    for n in (1, 3):
        r = results.get(f"latency_{n}node")
        for q in ("p50", "p95") if r else ():
            ours, base = r["minihpc"][q], r[f"baseline_{q}"]
            lines.append(
                f"| submit -> all ranks running, {n}-node, {q} (s) | {ours:.3f} | {base:.3f} "
                f"(torchrun {r['torchrun'][q]:.3f} + rq {r['rq'][q]:.4f}) | {ours / base:.2f}x | - |"
            )
    t = results.get("throughput")
    if t:
        rate = t["minihpc_jobs_per_s"]
        lines.append(
            f"| throughput, {t['jobs']} tiny 1-node jobs, {t['workers']} nodes (jobs/s) | "
            f"{rate:.2f} (cold, {t['cold_jobs']} jobs: {t['minihpc_cold_jobs_per_s']:.2f}) | "
            f"{t['rq_torchrun_jobs_per_s']:.2f} (rq running torchrun) | "
            f"{rate / t['rq_torchrun_jobs_per_s']:.2f}x | >= {GOALS['throughput']:.0f} jobs/s: "
            f"{verdict(rate >= GOALS['throughput'])} |"
        )
        lines.append(f"| throughput, raw rq no-op tasks (jobs/s, for scale) | - | {t['rq_noop_jobs_per_s']:.1f} | - | - |")
    m = results.get("mnist")
    for i, pair in enumerate(m["pairs"] if m else ()):
        lines.append(
            f"| MNIST DDP, 3 ranks, samples/s (pair {i + 1}) | {pair['minihpc']:.0f} | {pair['torchrun']:.0f} "
            f"(torchrun --standalone --nproc-per-node 3) | {pair['ratio']:.2f}x | - |"
        )
    if m:
        lines.append(
            f"| MNIST DDP, 3 ranks, median of the {len(m['pairs'])} pairs' ratios | - | - | {m['median_ratio']:.2f}x "
            f"(pairs {min(p['ratio'] for p in m['pairs']):.2f}-{max(p['ratio'] for p in m['pairs']):.2f}) | "
            f">= {GOALS['mnist']}x: {verdict(m['median_ratio'] >= GOALS['mnist'])} |"
        )
    return "\n".join(lines)
