#!/usr/bin/env python
"""Engine benchmark: minihpc beside its raw baselines, measured side by side in one run.

1. submit -> all ranks running, for 1-node and 3-node jobs, against a bare torchrun launch
   plus a raw rq enqueue -> start (one SimpleWorker);
2. throughput of N tiny 1-node jobs against raw rq with as many workers as we have nodes,
   each raw task doing the same torchrun launch (and, for scale, a no-op).

Writes bench/results/engine.json and engine.md and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis
from rq import Queue
from rq.serializers import JSONSerializer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from minihpc.client.submit import Request, submit  # noqa: E402
from minihpc.core.models import JobState  # noqa: E402
from minihpc.machine.ports import free_port  # noqa: E402
from minihpc.ops import local  # noqa: E402
from minihpc.state.store import Store  # noqa: E402

PROBE = str(ROOT / "scripts" / "bench_probe.py")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(values: list[float]) -> dict:
    return {"n": len(values), "p50": pct(values, 0.5), "p95": pct(values, 0.95),
            "mean": statistics.mean(values), "max": max(values)}


def ranks_started(out: Path, count: int, timeout: float = 120) -> float:
    deadline = time.time() + timeout
    while time.time() < deadline:
        files = list(out.glob("rank*"))
        if len(files) == count:
            try:
                return max(float(f.read_text()) for f in files)
            except ValueError:
                pass
        time.sleep(0.005)
    raise RuntimeError(f"only {len(list(out.glob('rank*')))} of {count} ranks started in {out}")


def wait_done(store: Store, ids: list[int], timeout: float) -> None:
    deadline = time.time() + timeout
    pending = set(ids)
    while pending:
        states = store.job_states(pending)
        for job_id, state in states.items():
            if state is not None and state.terminal:
                if state is not JobState.COMPLETED:
                    raise RuntimeError(f"job {job_id} ended {state.value}")
                pending.discard(job_id)
        if time.time() > deadline:
            raise RuntimeError(f"{len(pending)} jobs not done after {timeout}s")
        time.sleep(0.02)


# -- minihpc ----------------------------------------------------------------------------------


def ours_latency(store: Store, nodes: int, samples: int, tmp: Path) -> list[float]:
    out = []
    for i in range(samples):
        d = tmp / f"ours-{nodes}-{i}"
        t0 = time.time()
        job = submit(store, Request(script=PROBE, args=[str(d)], nodes=nodes))
        out.append(ranks_started(d, nodes) - t0)
        wait_done(store, [job.id], 120)
    return out


def ours_throughput(store: Store, jobs: int, tmp: Path) -> float:
    t0 = time.time()
    ids = [submit(store, Request(script=PROBE, args=[str(tmp / f"tp-{i}")])).id for i in range(jobs)]
    wait_done(store, ids, 3600)
    return jobs / (time.time() - t0)


# -- baselines ---------------------------------------------------------------------------------


def torchrun_latency(nodes: int, samples: int, tmp: Path) -> list[float]:
    out = []
    for i in range(samples):
        d = tmp / f"torchrun-{nodes}-{i}"
        port = free_port()
        t0 = time.time()
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--node-rank={r}",
                 "--nproc-per-node=1", "--master-addr=127.0.0.1", f"--master-port={port}",
                 "--rdzv-backend=static", "--monitor-interval=0.1", PROBE, str(d)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            for r in range(nodes)
        ]
        out.append(ranks_started(d, nodes) - t0)
        for p in procs:
            p.wait()
    return out


def start_workers(url: str, queue: str, count: int) -> list[subprocess.Popen]:
    code = (
        "import sys, redis; from rq import Queue, SimpleWorker; from rq.serializers import JSONSerializer;"
        "c = redis.Redis.from_url(sys.argv[1]);"
        "q = Queue(sys.argv[2], connection=c, serializer=JSONSerializer);"
        "SimpleWorker([q], connection=c, serializer=JSONSerializer).work(logging_level='WARNING')"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, "-c", code, url, queue], env=env) for _ in range(count)]
    time.sleep(2.0)
    return procs


def rq_latency(url: str, samples: int) -> list[float]:
    client = redis.Redis.from_url(url)
    workers = start_workers(url, "bench-latency", 1)
    q = Queue("bench-latency", connection=client, serializer=JSONSerializer)
    out = []
    try:
        for i in range(samples):
            key = f"bench:rq:{i}"
            t0 = time.time()
            q.enqueue("bench_tasks.record_start", url, key)
            _, value = client.blpop([key], timeout=30)
            out.append(float(value) - t0)
    finally:
        for w in workers:
            w.terminate()
    return out


def rq_throughput(url: str, workers: int, jobs: int, task: str, tmp: Path) -> float:
    client = redis.Redis.from_url(url)
    name = f"bench-tp-{task.split('.')[-1]}"
    procs = start_workers(url, name, workers)
    q = Queue(name, connection=client, serializer=JSONSerializer)
    try:
        t0 = time.time()
        handles = [
            q.enqueue(task, *( [PROBE, str(tmp / f"rq-{i}")] if task.endswith("run_torchrun") else []),
                      job_timeout=600)
            for i in range(jobs)
        ]
        for job in handles:
            while True:
                status = job.get_status(refresh=True)
                if status.value in ("finished", "failed"):
                    if status.value == "failed":
                        raise RuntimeError(f"raw rq task failed: {job.id}")
                    break
                time.sleep(0.02)
        return jobs / (time.time() - t0)
    finally:
        for p in procs:
            p.terminate()


# -- report -----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10, help="latency samples per case")
    parser.add_argument("--jobs", type=int, default=200, help="jobs in the throughput run")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="minihpc-bench-"))
    state = tmp / "state"
    url = local.up(state, workers=2, port=free_port(), log=lambda *_: None)
    store = Store(redis.Redis.from_url(url))
    nodes = 3
    results: dict = {"machine": {"cpus": os.cpu_count()}, "started_at": time.time()}
    try:
        print("warming up (one job of each kind)...", flush=True)
        ours_latency(store, 1, 1, tmp / "warm")
        torchrun_latency(1, 1, tmp / "warm")
        for n in (1, 3):
            print(f"latency, {n}-node jobs...", flush=True)
            ours = ours_latency(store, n, args.samples, tmp)
            bare = torchrun_latency(n, args.samples, tmp)
            rq = rq_latency(url, args.samples)
            results[f"latency_{n}node"] = {
                "minihpc": summary(ours),
                "torchrun": summary(bare),
                "rq": summary(rq),
                "baseline_p50": pct(bare, 0.5) + pct(rq, 0.5),
                "baseline_p95": pct(bare, 0.95) + pct(rq, 0.95),
            }
        print(f"throughput, {args.jobs} tiny 1-node jobs...", flush=True)
        results["throughput"] = {
            "jobs": args.jobs,
            "workers": nodes,
            "minihpc_jobs_per_s": ours_throughput(store, args.jobs, tmp),
            "rq_torchrun_jobs_per_s": rq_throughput(url, nodes, args.jobs, "bench_tasks.run_torchrun", tmp),
            "rq_noop_jobs_per_s": rq_throughput(url, nodes, args.jobs, "bench_tasks.noop", tmp),
        }
    finally:
        local.down(state, log=lambda *_: None)
    write_results(Path(args.out), "engine", results, table(results))
    return 0


def table(results: dict) -> str:
    """The markdown table of the engine's figures against the raw baselines."""
    lines = [
        "| measure | minihpc | raw baseline | ratio |",
        "|---|---|---|---|",
    ]
    for n in (1, 3):
        r = results[f"latency_{n}node"]
        for q in ("p50", "p95"):
            ours, base = r["minihpc"][q], r[f"baseline_{q}"]
            lines.append(
                f"| submit -> all ranks running, {n}-node, {q} (s) | {ours:.3f} | {base:.3f} "
                f"(torchrun {r['torchrun'][q]:.3f} + rq {r['rq'][q]:.4f}) | {ours / base:.2f}x |"
            )
    t = results["throughput"]
    lines.append(
        f"| throughput, {t['jobs']} tiny 1-node jobs, {t['workers']} nodes (jobs/s) | "
        f"{t['minihpc_jobs_per_s']:.2f} | {t['rq_torchrun_jobs_per_s']:.2f} (rq running torchrun) | "
        f"{t['rq_torchrun_jobs_per_s'] / t['minihpc_jobs_per_s']:.2f}x |"
    )
    lines.append(f"| throughput, raw rq no-op tasks (jobs/s, for scale) | - | {t['rq_noop_jobs_per_s']:.1f} | - |")
    return "\n".join(lines)


def write_results(out: Path, name: str, results: dict, table: str) -> None:
    """NAME.json (every figure) and NAME.md (the table) in ``out``; print the table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(results, indent=2))
    (out / f"{name}.md").write_text(table + "\n")
    print(table)
    print(f"\nwritten: {out / f'{name}.json'}, {out / f'{name}.md'}")


if __name__ == "__main__":
    sys.exit(main())
