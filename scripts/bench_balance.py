#!/usr/bin/env python
"""Balanced against equal batches on an unequal cluster, side by side in one run.

Its own Compose cluster (project minihpc-bench) whose three nodes may use 0.8, 0.4 and 0.2 CPUs
(MINIHPC_CPUS_* in .env; --cpus to change them) trains MNIST with DDP on all three, in
alternating pairs: equal per-rank batches (the slowest node sets the pace), then the same
global batch split by measured speed (``--balance``). For each run: cluster samples/s over the
same steps (after the first re-balances), each rank's compute time per step and batch size, and
the ratio balanced / equal (goal >= 1.8; the ideal for 4 : 2 : 1 is 1.75 / 0.75 = 2.33). The
last balanced job's report (bench/results/balance-report/) plots each rank's compute time per
step before and after its first re-balance.

Why 0.8 : 0.4 : 0.2 and not 1 : 0.5 : 0.25 (the same proportions): on a 2-core machine the
three ranks plus the cluster's own daemons (Redis, the master, the agents, Prometheus) must
fit, and at 1.75 CPUs for the ranks alone a balanced run, which keeps every rank busy, competes
with them for the rest; `--cpus 1,0.5,0.25` measures that case.

Then the update: a balanced run in float64 on the same cluster (shares re-split by measured
speed) against one process training on the whole global batch in the control container, loss
by loss at 1e-5 (minihpc.validate.compare, the validation suite's comparison). float64, because
in float32 two runs that differ only in summation order drift apart after a few dozen steps
(tests/integration/test_balanced_ddp.py shows both).

Writes bench/results/balance.json and balance.md and prints the table.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench import write_results  # noqa: E402
from bench_recovery import ComposeBench  # noqa: E402

from minihpc.core.straggler import own_seconds  # noqa: E402
from minihpc.ops import job_report  # noqa: E402
from minihpc.state.store import Store  # noqa: E402
from minihpc.validate.compare import compare_losses  # noqa: E402

NODES = ("master-node", "worker-node-1", "worker-node-2")
GOAL = 1.8
TOLERANCE = 1e-5


class UnequalCluster(ComposeBench):
    def __init__(self, cpus: list[str]):
        super().__init__()
        for node, limit in zip(NODES, cpus):
            self.env[f"MINIHPC_CPUS_{node.upper().replace('-', '_')}"] = limit

    def run(self, args: str) -> int:
        out = self.make("submit", "JOB=jobs/train_mnist_distributed.py", "NODES=3", f"ARGS={args}")
        return int(out.split()[-1])

    def losses(self, job_id: int) -> list[dict]:
        """The loss log a job wrote in its checkpoint directory (--loss-log losses.txt)."""
        text = subprocess.run(["docker", "exec", f"{self.env['MINIHPC_CONTAINER_PREFIX']}master-node", "cat",
                               f"/shared/models/job-{job_id}/losses.txt"], capture_output=True, text=True, check=True).stdout
        return parse_losses(text)

    def single_process(self, args: str) -> list[dict]:
        """The same training as one process on the whole global batch, in the control container
        (same data volume, same torch)."""
        script = ("cd /tmp && python -m torch.distributed.run --standalone --nproc-per-node 1 "
                  f"/opt/minihpc/jobs/train_mnist_distributed.py {args} --checkpoint-dir /tmp/single "
                  "--loss-log losses.txt >/tmp/single.log 2>&1 && cat /tmp/single/losses.txt")
        compose = ["docker", "compose"] if subprocess.run(["docker", "compose", "version"],
                                                          capture_output=True).returncode == 0 else ["docker-compose"]
        out = subprocess.run([*compose, "exec", "-T", "control", "sh", "-c", script], cwd=ROOT, env=self.env,
                             capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            raise SystemExit(f"bench: the single-process run failed ({out.returncode}): {out.stderr[-500:]}")
        return parse_losses(out.stdout)


def parse_losses(text: str) -> list[dict]:
    """'attempt step loss' lines as [{step, loss}]."""
    return [{"step": int(step), "loss": float(loss)} for _, step, loss in (line.split() for line in text.splitlines())]


def wait_completed(store: Store, job_id: int, timeout: float = 1800) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = store.get_job(job_id).state
        if state.terminal:
            if state.value != "COMPLETED":
                raise SystemExit(f"bench: job {job_id} ended {state.value}; see make logs ID={job_id}")
            return
        time.sleep(0.5)
    raise SystemExit(f"bench: job {job_id} not done after {timeout:.0f}s")


def measure(series: list[dict], global_batch: int, warm: int) -> dict:
    """Samples/s of the whole cluster from rank 0's reports past step ``warm``, and each rank's
    median compute seconds per step there."""
    zero = [(e["step"], e["at"]) for e in series if e.get("rank") == 0 and e["step"] >= warm]
    if len(zero) < 2:
        raise SystemExit(f"bench: too few progress reports past step {warm} ({len(zero)})")
    (s0, t0), (s1, t1) = zero[0], zero[-1]
    per_rank: dict[int, list[float]] = {}
    for e in series:
        seconds = own_seconds(e)
        if e["step"] >= warm and seconds is not None and "rank" in e:
            per_rank.setdefault(int(e["rank"]), []).append(seconds)
    batches = {int(e["rank"]): int(e["batch_size"]) for e in series if e["step"] >= warm and "batch_size" in e}
    return {"samples_per_second": (s1 - s0) * global_batch / (t1 - t0), "steps": s1 - s0, "seconds": t1 - t0,
            "compute_seconds": {r: statistics.median(v) for r, v in sorted(per_rank.items())},
            "batch_sizes": dict(sorted(batches.items()))}


def table(results: dict) -> str:
    lines = ["| run | samples/s | steps | compute s/step per rank (0, 1, 2) | batch per rank |",
             "|---|---|---|---|---|"]
    for run in results["runs"]:
        compute = ", ".join(f"{v:.3f}" for v in run["compute_seconds"].values())
        batches = "/".join(str(b) for b in run["batch_sizes"].values()) or "equal"
        lines.append(f"| {run['mode']} {run['pair']} | {run['samples_per_second']:.0f} | {run['steps']} | {compute} "
                     f"| {batches} |")
    eq, bal = results["equal_median"], results["balanced_median"]
    verdict = "met" if results["ratio"] >= GOAL else "MISSED"
    lines += ["", f"CPUs per node {' : '.join(results['cpus'])}; global batch {results['global_batch']}; "
              f"median samples/s equal {eq:.0f}, balanced {bal:.0f}; **ratio {results['ratio']:.2f}x** "
              f"(goal >= {GOAL}: {verdict}; ideal {results['ideal']:.2f}x)"]
    u = results["update"]
    lines += ["", f"The update: balanced float64 job {u['job']} (batch sizes seen {u['batch_sizes_seen']}) against one "
              f"process on the global batch: {u['steps']} steps, max |loss delta| {u['max_abs_delta']:.3g}, "
              f"{u['failed']} over {u['tolerance']:g} -> {'PASS' if u['steps'] and not u['failed'] else 'FAIL'}"]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpus", default="0.8,0.4,0.2", help="CPUs of master-node, worker-node-1, worker-node-2")
    p.add_argument("--pairs", type=int, default=2, help="alternating equal/balanced pairs")
    p.add_argument("--batch-size", type=int, default=450,
                   help="per rank when equal (global: x3; the offline digits set has 1,437 training images)")
    p.add_argument("--epochs", type=int, default=120)
    p.add_argument("--warm", type=int, default=40, help="steps left out of the figures (start, first re-balances)")
    p.add_argument("--equal-batch", type=int, default=64, help="per rank, for the float64 comparison")
    p.add_argument("--equal-epochs", type=int, default=10, help="epochs of the float64 comparison")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    cpus = args.cpus.split(",")
    bench = UnequalCluster(cpus)
    common = f"--epochs {args.epochs} --batch-size {args.batch_size} --checkpoint-every 100000 --log-every 50"
    runs = []
    print(f"balance: {args.pairs} pairs of equal and balanced MNIST DDP runs on nodes with {' : '.join(cpus)} CPUs...",
          flush=True)
    try:
        store, _ = bench.start()
        for pair in range(1, args.pairs + 1):
            for mode, extra in (("equal", ""), ("balanced", " --balance --balance-every 10")):
                job_id = bench.run(common + extra)
                wait_completed(store, job_id)
                figures = measure(store.series(job_id), args.batch_size * 3, args.warm)
                runs.append({"mode": mode, "pair": pair, "job": job_id, **figures})
                print(f"  {mode:<8} {pair}: {figures['samples_per_second']:.0f} samples/s, compute per rank "
                      f"{figures['compute_seconds']}, batches {figures['batch_sizes'] or 'equal'}", flush=True)
        report = Path(args.out) / "balance-report"
        job_report.write(store, runs[-1]["job"], report)
        print("  the update: balanced in float64 on the cluster against one process...", flush=True)
        same = f"--epochs {args.equal_epochs} --double --checkpoint-every 100000 --log-every 50"
        job_id = bench.run(f"{same} --batch-size {args.equal_batch} --balance --balance-every 10 --loss-log losses.txt")
        wait_completed(store, job_id)
        rows = compare_losses(bench.single_process(f"{same} --batch-size {args.equal_batch * 3}"), bench.losses(job_id),
                              TOLERANCE)
        batches = [int(e["batch_size"]) for e in store.series(job_id) if "batch_size" in e]
        update = {"job": job_id, "steps": len(rows), "max_abs_delta": max(r["abs_delta"] for r in rows),
                  "failed": sum(not r["pass"] for r in rows), "tolerance": TOLERANCE,
                  "batch_sizes_seen": sorted(set(batches))}
        print(f"  {update}", flush=True)
    finally:
        bench.stop()
    equal = statistics.median(r["samples_per_second"] for r in runs if r["mode"] == "equal")
    balanced = statistics.median(r["samples_per_second"] for r in runs if r["mode"] == "balanced")
    speeds = [float(c) for c in cpus]
    results = {"cpus": cpus, "global_batch": args.batch_size * 3, "runs": runs, "equal_median": equal,
               "balanced_median": balanced, "ratio": balanced / equal,
               "ideal": sum(speeds) / (len(speeds) * min(speeds)), "report": str(report / "rank_step_time.png"),
               "update": update}
    write_results(Path(args.out), "balance", results, table(results))
    print(f"per-rank compute time before and after balancing: {report / 'rank_step_time.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
