#!/usr/bin/env python
"""Engine benchmark: minihpc beside its raw baselines, measured side by side in one run.

1. submit -> every rank past its first barrier() for a 3-node job, forked from the nodes' warm
   launchers, started cold (--cold), and one bare ``torchrun --standalone --nproc-per-node 3``
   of the same script, samples taken in turn (goal: warm <= 0.3x bare, p50 and p95);
2. submit -> all ranks running, for 1-node and 3-node jobs, against a bare torchrun launch
   plus a raw rq enqueue -> start (one SimpleWorker);
3. throughput of N tiny 1-node jobs on 3 nodes (goal: >= 20 jobs/s), cold for scale, against
   raw rq with as many workers as we have nodes, each raw task doing the same torchrun launch
   (and, for scale, a no-op);
4. MNIST DDP samples/s through the cluster (3 nodes) against the same script under a bare
   torchrun of 3 processes, alternating pairs (goal: the median of the pairs' ratios >= 0.95x;
   BENCH_MNIST_COLD=1: the cluster starts them cold, to compare).

``--only PART`` (repeatable: barrier, latency, throughput, mnist) measures just those.

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
from minihpc.client.logs import log_files  # noqa: E402
from minihpc.client.submit import Request, submit  # noqa: E402
from minihpc.core.models import JobState  # noqa: E402
from minihpc.machine.ports import free_port  # noqa: E402
from minihpc.ops import local  # noqa: E402
from minihpc.state.connect import wait_until_answers  # noqa: E402
from minihpc.state.store import Store  # noqa: E402
from bench_table import PARTS, mnist_summary, table  # noqa: E402

PROBE = str(ROOT / "scripts" / "bench_probe.py")
BARRIER = str(ROOT / "scripts" / "bench_barrier.py")
MNIST = str(ROOT / "jobs" / "train_mnist_distributed.py")


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


def ours_throughput(store: Store, jobs: int, tmp: Path, cold: bool = False) -> float:
    t0 = time.time()
    ids = [submit(store, Request(script=PROBE, args=[str(tmp / f"tp{'c' if cold else ''}-{i}")], cold=cold)).id
           for i in range(jobs)]
    wait_done(store, ids, 3600)
    return jobs / (time.time() - t0)


def ours_barrier(store: Store, tmp: Path, i: int, cold: bool) -> float:
    d = tmp / f"barrier-{'cold' if cold else 'warm'}-{i}"
    t0 = time.time()
    job = submit(store, Request(script=BARRIER, args=[str(d)], nodes=3, cold=cold))
    seconds = ranks_started(d, 3) - t0
    wait_done(store, [job.id], 120)
    return seconds


MNIST_ARGS = ["--epochs", "8", "--log-every", "5", "--batch-size", "32"]


def samples_per_s(log: str) -> float:
    """Mean of rank 0's samples/s lines, the first (which holds the start) left out."""
    values = [float(line.rsplit("samples/s", 1)[1]) for line in log.splitlines() if "samples/s" in line]
    if len(values) < 2:
        raise RuntimeError(f"fewer than 2 samples/s lines in:\n{log[-2000:]}")
    return statistics.mean(values[1:])


def ours_mnist(store: Store, data: Path) -> float:
    job = submit(store, Request(script=MNIST, args=[*MNIST_ARGS, "--data-root", str(data)], nodes=3,
                                cold=bool(os.environ.get("BENCH_MNIST_COLD"))))
    wait_done(store, [job.id], 900)
    record = store.get_job(job.id)
    return samples_per_s("\n".join(path.read_text(errors="replace") for _, path in log_files(store, record)))


def torchrun_mnist(data: Path, tmp: Path, i: int) -> float:
    ckpt = tmp / f"mnist-bare-{i}"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3", MNIST, *MNIST_ARGS,
         "--data-root", str(data), "--checkpoint-dir", str(ckpt)],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bare torchrun MNIST exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return samples_per_s(proc.stdout)


def torchrun_barrier(tmp: Path, i: int) -> float:
    d = tmp / f"barrier-bare-{i}"
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3",
                             "--monitor-interval=0.1", BARRIER, str(d)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = ranks_started(d, 3) - t0
    proc.wait()
    return seconds


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


def raw_redis(tmp: Path) -> tuple[subprocess.Popen, str]:
    """A redis-server of the raw baselines' own, without users or a password."""
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--dir", str(tmp)], stdout=subprocess.DEVNULL)
    problem = wait_until_answers(f"redis://127.0.0.1:{port}/0", 10, interval=0.05)
    if problem:
        raise RuntimeError(f"the baselines' redis-server: {problem}")
    return proc, f"redis://127.0.0.1:{port}/0"


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
    parser.add_argument("--cold-jobs", type=int, default=30, help="jobs in the cold throughput run")
    parser.add_argument("--mnist-pairs", type=int, default=5, help="alternating MNIST pairs (0: none)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--only", choices=PARTS, action="append",
                        help="measure only this part (repeatable); the results go to engine-partial.{json,md}")
    args = parser.parse_args()
    parts = set(args.only or PARTS)

    tmp = Path(tempfile.mkdtemp(prefix="minihpc-bench-"))
    state = tmp / "state"
    url = local.up(state, workers=2, port=free_port(), log=lambda *_: None)
    store = Store(redis.Redis.from_url(url))
    raw, raw_url = raw_redis(tmp)  # the rq baselines' own: the cluster's users may touch only its keys
    nodes = 3
    results: dict = {"machine": {"cpus": os.cpu_count()}, "started_at": time.time()}
    try:
        print("warming up (one job of each kind)...", flush=True)
        ours_latency(store, 1, 1, tmp / "warm")
        torchrun_latency(1, 1, tmp / "warm")
        if "barrier" in parts:
            results["barrier_3node"] = barrier_samples(store, tmp, args.samples)
        for n in (1, 3) if "latency" in parts else ():
            print(f"latency, {n}-node jobs...", flush=True)
            ours = ours_latency(store, n, args.samples, tmp)
            bare = torchrun_latency(n, args.samples, tmp)
            rq = rq_latency(raw_url, args.samples)
            results[f"latency_{n}node"] = {
                "minihpc": summary(ours),
                "torchrun": summary(bare),
                "rq": summary(rq),
                "baseline_p50": pct(bare, 0.5) + pct(rq, 0.5),
                "baseline_p95": pct(bare, 0.95) + pct(rq, 0.95),
            }
        if "throughput" in parts:
            results["throughput"] = throughput(store, raw_url, args, nodes, tmp)
        if args.mnist_pairs and "mnist" in parts:
            results["mnist"] = mnist_summary(mnist_pairs(store, tmp, args.mnist_pairs))
    finally:
        local.down(state, log=lambda *_: None)
        raw.terminate()
    write_results(Path(args.out), "engine" if parts == set(PARTS) else "engine-partial", results, table(results))
    return 0


def throughput(store: Store, raw_url: str, args, nodes: int, tmp: Path) -> dict:
    print(f"throughput, {args.jobs} tiny 1-node jobs warm, {args.cold_jobs} cold...", flush=True)
    return {
        "jobs": args.jobs,
        "cold_jobs": args.cold_jobs,
        "workers": nodes,
        "minihpc_jobs_per_s": ours_throughput(store, args.jobs, tmp),
        "minihpc_cold_jobs_per_s": ours_throughput(store, args.cold_jobs, tmp, cold=True),
        "rq_torchrun_jobs_per_s": rq_throughput(raw_url, nodes, args.jobs, "bench_tasks.run_torchrun", tmp),
        "rq_noop_jobs_per_s": rq_throughput(raw_url, nodes, args.jobs, "bench_tasks.noop", tmp),
    }


def barrier_samples(store: Store, tmp: Path, samples: int) -> dict:
    print("submit -> every rank past its first barrier, 3 nodes: warm, cold, bare torchrun in turn...", flush=True)
    warm, cold, bare = [], [], []
    for i in range(samples):
        warm.append(ours_barrier(store, tmp, i, cold=False))
        cold.append(ours_barrier(store, tmp, i, cold=True))
        bare.append(torchrun_barrier(tmp, i))
    return {"warm": summary(warm), "cold": summary(cold), "torchrun": summary(bare)}


def mnist_pairs(store: Store, tmp: Path, count: int) -> list[dict]:
    """Through the cluster and bare, in turn, the order swapped every pair (timings drift)."""
    print(f"MNIST DDP samples/s, {count} alternating pairs...", flush=True)
    data = tmp / "data"
    subprocess.run([sys.executable, str(ROOT / "jobs" / "prepare_mnist.py"), "--root", str(data),
                    "--source", "digits"], check=True, capture_output=True)
    pairs = []
    for i in range(count):
        runs = {}
        for who in (("minihpc", "torchrun") if i % 2 == 0 else ("torchrun", "minihpc")):
            runs[who] = ours_mnist(store, data) if who == "minihpc" else torchrun_mnist(data, tmp, i)
        pairs.append({**runs, "ratio": runs["minihpc"] / runs["torchrun"]})
    return pairs


def write_results(out: Path, name: str, results: dict, table: str) -> None:
    """NAME.json (every figure) and NAME.md (the table) in ``out``; print the table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(results, indent=2))
    (out / f"{name}.md").write_text(table + "\n")
    print(table)
    print(f"\nwritten: {out / f'{name}.json'}, {out / f'{name}.md'}")


if __name__ == "__main__":
    sys.exit(main())
