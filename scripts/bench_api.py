"""The REST API under load: CLIENTS concurrent SSE clients follow one running 3-node job's log
while /health is timed; every client must receive every line, and /health's p95 is the figure.

    make bench-api [CLIENTS=50]

A local-mode cluster is started for it (and stopped after); results go to bench/results/api.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from minihpc.machine.ports import free_port
from minihpc.ops import local

ROOT = Path(__file__).resolve().parent.parent
HEALTH_GOAL_MS = 100.0
SCRIPT = """
import os, time
for i in range(1, {lines} + 1):
    print(f"rank {{os.environ['RANK']}} line {{i}}", flush=True)
    time.sleep({pause})
"""


def follow(url: str, token: str, job_id: int, got: list, ready: threading.Barrier) -> None:
    """One SSE client: count the job's lines until its end event."""
    lines, ended = 0, False
    with httpx.stream("GET", f"{url}jobs/{job_id}/logs/stream", headers={"Authorization": f"Bearer {token}"},
                      timeout=300) as stream:
        ready.wait()
        event = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "line":
                lines += 1
            elif line.startswith("data: ") and event == "end":
                ended = True
                break
    got.append((lines, ended))


def time_health(url: str, stop: threading.Event, samples: list) -> None:
    with httpx.Client(timeout=10) as client:
        while not stop.is_set():
            start = time.perf_counter()
            assert client.get(f"{url}health").status_code == 200
            samples.append((time.perf_counter() - start) * 1000)
            time.sleep(0.05)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(clients: int, lines: int, pause: float, out: Path) -> int:
    state = Path(tempfile.mkdtemp(prefix="minihpc-bench-api-")) / "state"
    local.up(state, workers=2, port=free_port(), api_port=free_port(), log=lambda *_: None)
    try:
        api = json.loads((state / "api.json").read_text())
        url, token = api["url"], api["token"]
        auth = {"Authorization": f"Bearer {token}"}
        idle = [httpx.get(f"{url}health", timeout=10).elapsed.total_seconds() * 1000 for _ in range(50)]
        job = httpx.post(f"{url}jobs", headers=auth, timeout=30, json={
            "script": SCRIPT.format(lines=lines, pause=pause), "script_name": "lines.py", "nodes": 3}).json()
        got: list = []
        ready = threading.Barrier(clients + 1)
        threads = [threading.Thread(target=follow, args=(url, token, job["id"], got, ready)) for _ in range(clients)]
        for t in threads:
            t.start()
        ready.wait()
        stop, loaded = threading.Event(), []
        timer = threading.Thread(target=time_health, args=(url, stop, loaded))
        timer.start()
        for t in threads:
            t.join()
        stop.set()
        timer.join()
        logs = httpx.get(f"{url}jobs/{job['id']}/logs", headers=auth, timeout=30).json()["logs"]
        expected = sum(len(entry["text"].splitlines()) for entry in logs)
    finally:
        local.down(state, log=lambda *_: None)
    complete = sum(1 for n, ended in got if n == expected and ended)
    result = {
        "clients": clients, "lines_per_client": expected, "clients_with_every_line": complete,
        "health_idle_ms": {"p50": statistics.median(idle), "p95": pct(idle, 0.95)},
        "health_under_load_ms": {"p50": statistics.median(loaded), "p95": pct(loaded, 0.95),
                                 "max": max(loaded), "samples": len(loaded)},
        "goal_p95_ms": HEALTH_GOAL_MS,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "api.json").write_text(json.dumps(result, indent=2))
    load = result["health_under_load_ms"]
    print(f"{'case':<44}{'p50 ms':>9}{'p95 ms':>9}  goal")
    print(f"{'/health, idle':<44}{result['health_idle_ms']['p50']:>9.1f}{result['health_idle_ms']['p95']:>9.1f}")
    print(f"{f'/health, {clients} SSE clients on one job':<44}{load['p50']:>9.1f}{load['p95']:>9.1f}"
          f"  p95 <= {HEALTH_GOAL_MS:.0f} ms: {'met' if load['p95'] <= HEALTH_GOAL_MS else 'MISSED'}")
    print(f"clients that received all {expected} lines and the end event: {complete}/{clients}")
    return 0 if complete == clients and load["p95"] <= HEALTH_GOAL_MS else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--lines", type=int, default=200, help="lines each rank prints")
    parser.add_argument("--pause", type=float, default=0.05, help="seconds between a rank's lines")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    return run(args.clients, args.lines, args.pause, Path(args.out))


if __name__ == "__main__":
    raise SystemExit(main())
