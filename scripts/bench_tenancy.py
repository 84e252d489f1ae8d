"""What running each job as its own user costs (issue 33), on the Compose cluster: submit ->
every rank of a 3-node job past its first barrier, with MINIHPC_JOB_USER=job (every job as one
account, the design before) and =%u (each job as its owner: a uid, a passwd entry, a home, and
the sweep of what the job left when it ends), side by side in one run, SAMPLES each in turn.

The barrier time is what each rank wrote into its checkpoint folder (scripts/bench_barrier.py);
the submit time is the job record's. Prints the table and writes bench/results/tenancy.json.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = int(os.environ.get("SAMPLES", "5"))
COMPOSE = ["docker", "compose"] if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0 \
    else ["docker-compose"]
MODES = ("job", "%u")


def sh(*argv: str, env: dict | None = None, check: bool = True) -> str:
    proc = subprocess.run(argv, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=900)
    if check and proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def minihpc(*args: str) -> str:
    return sh(*COMPOSE, "exec", "-T", "control", "minihpc", *args)


def one(mode: str) -> float:
    out = sh("make", "--no-print-directory", "submit", "JOB=scripts/bench_barrier.py", "NODES=3",
             env={"MINIHPC_JOB_USER": mode})
    job_id = re.search(r"Submitted batch job (\d+)", out).group(1)
    minihpc("wait", job_id, "--timeout", "120")
    job = json.loads(minihpc("show", job_id, "--json"))
    if job["state"] != "COMPLETED":
        sys.exit(f"job {job_id} ended {job['state']}: {minihpc('logs', job_id)[-2000:]}")
    times = sh(*COMPOSE, "exec", "-T", "control", "sh", "-c",
               f"for f in /shared/models/job-{job_id}/rank*; do cat \"$f\"; echo; done").split()
    return max(float(t) for t in times) - job["submitted_at"]


def main() -> int:
    results: dict[str, list[float]] = {m: [] for m in MODES}
    for mode in MODES:
        print(f"==> MINIHPC_JOB_USER={mode}: make up, then {SAMPLES} 3-node barrier jobs", flush=True)
        # Down first (volumes kept): docker-compose v1 cannot recreate a running container.
        sh("make", "--no-print-directory", "down")
        sh("make", "--no-print-directory", "up", env={"MINIHPC_JOB_USER": mode})
        time.sleep(5)  # the warm launchers are up
        one(mode)  # the first job of a fresh node (its home, its passwd entry) is not the steady state
        for _ in range(SAMPLES):
            results[mode].append(one(mode))
            print(f"    {results[mode][-1]:.3f} s", flush=True)
    print(f"\nsubmit -> every rank past its first barrier, 3 nodes, {SAMPLES} samples after one warm-up:")
    print(f"{'MINIHPC_JOB_USER':<18} {'p50 s':>8} {'min s':>8} {'max s':>8}")
    for mode, values in results.items():
        print(f"{mode:<18} {statistics.median(values):>8.3f} {min(values):>8.3f} {max(values):>8.3f}")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "tenancy.json").write_text(json.dumps(results, indent=2))
    sh("make", "--no-print-directory", "down")
    sh("make", "--no-print-directory", "up")  # back to the .env's setting
    return 0


if __name__ == "__main__":
    sys.exit(main())
