#!/usr/bin/env python
"""Recovery benchmark: --drills drills each of `stop` and `kill` on the worker nodes of a
cluster training MNIST with DDP on three nodes, with p50 / p95 / max of:

- detected: fault -> the master declares the node DOWN;
- node back: fault -> the restarted node heartbeats again;
- resumed: fault -> the job's next attempt reports its first training step;
- steps lost: steps trained past the checkpoint the job resumed from.

Targets (p95): detected <= 3 s, node back <= 10 s, resumed <= 15 s.

It uses its own cluster, so it never disturbs yours: the Compose project minihpc-bench (real
containers; the default when Docker answers) or a local-mode cluster (--cluster local). Its
restart budget and max requeues are raised, since one job is drilled over and over, and each
node's restart history is cleared before each drill, so every drill is a first failure.

Writes bench/results/recovery.json and recovery.md and prints the table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench import summary, write_results  # noqa: E402

from minihpc.machine.ports import free_port  # noqa: E402
from minihpc.ops import drill, faults, local  # noqa: E402
from minihpc.state.connect import connect  # noqa: E402
from minihpc.state.store import Store  # noqa: E402

TARGETS = {"detected": 3.0, "back": 10.0, "resumed": 15.0}
PROJECT = "minihpc-bench"
WORKERS = ("worker-node-1", "worker-node-2")
# One job drilled again and again: it must never run out of requeues or restarts.
ENDURANCE = {"MINIHPC_RESTART_BUDGET": "1000", "MINIHPC_MAX_REQUEUES": "1000"}


def docker_answers() -> bool:
    return shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True).returncode == 0


class ComposeBench:
    def __init__(self):
        self.env = dict(os.environ, COMPOSE_PROJECT_NAME=PROJECT, MINIHPC_CONTAINER_PREFIX=f"{PROJECT}-", REDIS_PORT=str(free_port()),
                        PROMETHEUS_PORT=str(free_port()), GRAFANA_PORT=str(free_port()), **ENDURANCE)
        self.env.pop("MINIHPC_REDIS_URL", None)

    def make(self, *args) -> str:
        return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=self.env, check=True,
                              capture_output=True, text=True, timeout=3600).stdout

    def start(self) -> tuple[Store, faults.ComposeFaults]:
        self.make("up")
        self.make("prepare-data")
        password = subprocess.run(["bash", "-c", "source scripts/dotenv.sh && setting REDIS_CLI_PASSWORD"], cwd=ROOT,
                                  env=self.env, capture_output=True, text=True, check=True).stdout.strip()
        store = Store(connect(f"redis://cli:{password}@127.0.0.1:{self.env['REDIS_PORT']}/0"))
        return store, faults.ComposeFaults(PROJECT)

    def submit(self, epochs: int) -> int:
        out = self.make("submit", "JOB=jobs/train_mnist_distributed.py", "NODES=3",
                        f"ARGS=--epochs {epochs} --checkpoint-every 5")
        return int(out.split()[-1])

    def stop(self) -> None:
        compose = ["docker", "compose"] if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0 \
            else ["docker-compose"]
        subprocess.run([*compose, "down", "--volumes", "--remove-orphans"], cwd=ROOT, env=self.env, capture_output=True)


class LocalBench:
    def __init__(self):
        self.state = Path(tempfile.mkdtemp(prefix="minihpc-bench-"))
        os.environ.update(ENDURANCE)  # the master and agents inherit it

    def start(self) -> tuple[Store, faults.LocalFaults]:
        url = local.up(self.state, workers=2, port=free_port(), log=lambda *_: None)
        subprocess.run([sys.executable, str(ROOT / "jobs" / "prepare_mnist.py"), "--root",
                        str(self.state / "shared" / "data"), "--source", "digits"], check=True, capture_output=True)
        self.store = Store(connect(url))
        return self.store, faults.LocalFaults(self.state)

    def submit(self, epochs: int) -> int:
        from minihpc.client.submit import Request, submit

        script = ROOT / "jobs" / "train_mnist_distributed.py"
        return submit(self.store, Request(script=str(script), nodes=3,
                                          args=["--epochs", str(epochs), "--checkpoint-every", "5"])).id

    def stop(self) -> None:
        local.down(self.state, log=lambda *_: None)
        shutil.rmtree(self.state, ignore_errors=True)


def ready(store: Store, job_id: int, steps: int = 8, timeout: float = 300) -> None:
    """Wait until the job's current attempt has trained ``steps`` steps (so it has checkpointed)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = store.get_job(job_id)
        if job.state.value not in ("RUNNING", "PENDING"):
            raise SystemExit(f"bench: job {job_id} ended ({job.state.value}); see its logs")
        marks = store.attempt_steps(job_id).get(job.attempts, {})
        if job.state.value == "RUNNING" and "first" in marks and marks["last"]["step"] - marks["first"]["step"] >= steps:
            return
        time.sleep(0.2)
    raise SystemExit(f"bench: job {job_id} made no progress for {timeout:.0f}s")


def table(results: dict) -> str:
    lines = ["| drill | figure | n | p50 | p95 | max | target p95 |", "|---|---|---|---|---|---|---|"]
    for kind, figures in results["drills"].items():
        for name, s in figures.items():
            if name == "steps_lost":
                lines.append(f"| {kind} | steps lost | {s['n']} | {s['p50']:.0f} | {s['p95']:.1f} | {s['max']:.0f} | - |")
            else:
                target = TARGETS[name]
                verdict = "met" if s["p95"] <= target else "MISSED"
                lines.append(f"| {kind} | {name} (s) | {s['n']} | {s['p50']:.2f} | {s['p95']:.2f} | {s['max']:.2f} "
                             f"| <= {target:g} s: {verdict} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--drills", type=int, default=10, help="drills of each kind")
    p.add_argument("--cluster", choices=("compose", "local"), default=None,
                   help="default: compose when a Docker engine answers, else local")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    kind_of_cluster = args.cluster or ("compose" if docker_answers() else "local")
    bench = ComposeBench() if kind_of_cluster == "compose" else LocalBench()
    print(f"recovery: {args.drills} drills each of stop and kill, {kind_of_cluster} cluster...", flush=True)
    raw: dict[str, list[dict]] = {"stop": [], "kill": []}
    try:
        store, injector = bench.start()
        job_id = bench.submit(epochs=100000)
        for i in range(args.drills * 2):
            kind, node = ("kill", "stop")[i % 2], WORKERS[(i // 2) % 2]
            ready(store, job_id)
            # Every drill measures a node's first failure: without this, the restart backoff
            # for a node that keeps failing (1, 2, 4, ... s) would grow from drill to drill.
            store.undrain(node)
            d = drill.run(store, injector, kind, node, job_id, timeout=120, log=lambda *_: None)
            print(f"  {i + 1:>2}. {kind:<4} {node}: detected {d.detected}, back {d.back}, resumed {d.resumed}, "
                  f"steps lost {d.steps_lost}" + (f" ({'; '.join(d.notes)})" if d.notes else ""), flush=True)
            raw[kind].append(d.to_dict())
    finally:
        bench.stop()

    results = {"cluster": kind_of_cluster, "drills": {}, "raw": raw}
    for kind, items in raw.items():
        results["drills"][kind] = {}
        for name in ("detected", "back", "resumed", "steps_lost"):
            values = [float(d[name]) for d in items if d[name] is not None]
            if len(values) < len(items):
                raise SystemExit(f"bench: {len(items) - len(values)} {kind} drills never measured {name}: {items}")
            results["drills"][kind][name] = summary(values)
    write_results(Path(args.out), "recovery", results, table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
