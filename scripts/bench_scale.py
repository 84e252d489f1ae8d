"""The control plane's cost against the cluster's size (issue 38), on simulated nodes.

    make bench-scale [NODES="10 100 1000"] [JOBS="1000 10000 100000"]

For each node count a local cluster is started with that many simulated nodes (one real node,
master-node, beside them; core.simulation), and measured idle (heartbeat load on Redis,
memory per node), then with the queue filled to each job count by held jobs of 1-8 nodes at
three priorities in arrays (some with a dependency): submit throughput, the scheduling pass,
the idle master, `squeue`, `GET /jobs`, the exporter's scrape, Redis bytes per pending job;
then short jobs started per second past that full queue, Redis bytes per ended job, and the
time to detect a node's crash and a node's silence. Every figure goes to
bench/results/scale.json, the cost curves to bench/results/scale.svg (log-log), and the goals
are printed with their verdicts (scripts/scale_report.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from minihpc.machine.local_state import LocalState
from minihpc.machine.ports import free_port
from minihpc.ops import local
from minihpc.state.connect import connect
from minihpc.state.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "minihpc.cli"]
SHAPES = [(1, "normal"), (1, "high"), (2, "low"), (4, "normal"), (8, "high"), (1, "low")]
"""Nodes and priority of each successive array of held jobs."""
API_JOBS, API_CLIENTS = 200, 8
"""Jobs submitted one a request through the API, by one client and by API_CLIENTS at once."""
API_ARRAYS, API_ARRAY = 3, 1000
"""Arrays of API_ARRAY tasks submitted through the API, one a request."""
PASS_SAMPLES = 12
"""Changes made (one a second) to measure the scheduling pass at each level."""
GRID_JOBS = 10_000
"""Queue depths measured at every node count; deeper ones on the most nodes only."""
SHORT_JOBS = 2000
"""Short jobs run past the full queue, for the start rate and the bytes an ended job keeps."""


class Bench:
    def __init__(self, nodes: int):
        self.nodes = nodes
        self.state = Path(tempfile.mkdtemp(prefix="minihpc-bench-scale-")) / "state"
        self.script = self.state.parent / "sim.py"
        self.script.write_text("print('simulated')\n")
        started = time.monotonic()
        local.up(self.state, workers=0, port=free_port(), api_port=free_port(), log=lambda *_: None,
                 simulated=nodes)
        self.up_seconds = time.monotonic() - started
        local_state = LocalState(self.state)
        self.env = dict(os.environ, MINIHPC_STATE_DIR=str(self.state))
        self.env.pop("MINIHPC_REDIS_URL", None)
        self.node_env = local_state.node_commands()["master-node"]["env"]
        self.redis = connect(local_state.master_command()["env"]["MINIHPC_REDIS_URL"])
        self.store = Store(self.redis)
        self.pids = local_state.pids()
        api = local_state.api()
        self.api, self.auth = api["url"], {"Authorization": f"Bearer {api['token']}"}
        self.metrics = f"http://{self.store.cluster_info().get('cluster_metrics') or _master_metrics(self.state)}/metrics"
        self.submitted = 0
        self.arrays: list[int] = []  # the held arrays, the last one's tasks cancelled one by one
        self.cancelled = 0

    def close(self) -> None:
        local.down(self.state, log=lambda *_: None)

    def cli(self, *args) -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, *map(str, args)], env=self.env, capture_output=True, text=True, check=True)

    def timed(self, *args, runs: int = 3) -> float:
        """The median wall time of a CLI call."""
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            self.cli(*args)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def memory(self) -> int:
        """Redis's bytes of data (used_memory_dataset: without its own overhead and buffers)."""
        return int(self.redis.info("memory")["used_memory_dataset"])

    def cpu(self, pid: int) -> float:
        """CPU seconds of ``pid`` and its children (the simulated nodes' heartbeat process)."""
        process = psutil.Process(pid)
        total = 0.0
        for each in (process, *process.children(recursive=True)):
            try:
                times = each.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    def settle(self, limit: float = 120.0) -> float:
        """Wait until the master is idle (under a tenth of a core over a second, after taking in
        what was just submitted); the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < limit:
            before = self.cpu(self.pids["master"])
            time.sleep(1.0)
            if self.cpu(self.pids["master"]) - before < 0.1:
                break
        return time.monotonic() - started

    def window(self, seconds: float = 5.0) -> dict:
        """Over ``seconds`` of what runs now: CPU of the master, the simulated nodes and Redis
        (cores), Redis's commands per second, the scheduling passes' p50/p95."""
        procs = {"master": self.pids["master"], "simulated": self.pids["simulated"], "redis": self.pids["redis"]}
        before = {k: self.cpu(p) for k, p in procs.items()}
        commands = int(self.redis.info("stats")["total_commands_processed"])
        time.sleep(seconds)  # nothing of the bench's own meanwhile: a scrape runs in the master
        out = {f"{k}_cores": (self.cpu(p) - before[k]) / seconds for k, p in procs.items()}
        out["redis_commands_per_s"] = (int(self.redis.info("stats")["total_commands_processed"]) - commands) / seconds
        # Passes that plan: the master plans only when something changed, so change something
        # once a second (cancel one held job), as a busy queue would: PASS_SAMPLES of them,
        # so the p95 is not simply the slowest of five.
        passes = scale_report.buckets(httpx.get(self.metrics, timeout=300).text)
        time.sleep(1.0)  # that scrape ran in the master (0.3 s at 10,000 jobs): not beside the first pass
        for _ in range(PASS_SAMPLES):
            if self.arrays:
                self.cli("cancel", f"{self.arrays[-1]}_{self.cancelled}")
                self.cancelled += 1
            time.sleep(1.0)
        after = scale_report.delta(scale_report.buckets(httpx.get(self.metrics, timeout=300).text), passes)
        deadline = time.monotonic() + 60  # a deep queue's pass may outlast the window: wait for one
        while (not after or after[-1][1] == 0) and time.monotonic() < deadline:
            time.sleep(2.0)
            after = scale_report.delta(scale_report.buckets(httpx.get(self.metrics, timeout=300).text), passes)
        passes = after
        out["pass_p50_s"], out["pass_p95_s"] = scale_report.quantile(passes, 0.5), scale_report.quantile(passes, 0.95)
        out["passes"] = passes[-1][1] if passes else 0
        return out

    def fill(self, target: int) -> float:
        """Held jobs (--begin in 2099) until ``target`` are queued; the CLI's jobs per second."""
        started, added, first = time.perf_counter(), 0, None
        while self.submitted < target:
            count = min(1000, target - self.submitted)
            nodes, priority = SHAPES[(self.submitted // 1000) % len(SHAPES)]
            extra = [f"--dependency=afterok:{first}"] if first is not None and (self.submitted // 1000) % 5 == 4 else []
            out = self.cli("submit", "--parsable", "-C", "simulated", f"--array=0-{count - 1}", "-N", nodes,
                           "--priority", priority, "--begin", "2099-01-01", *extra, self.script, "--sim-seconds", 1)
            self.arrays.append(int(out.stdout.strip().split(";")[0]))
            first = first or self.arrays[-1]
            self.submitted += count
            added += count
        return added / (time.perf_counter() - started)

    def reads(self) -> dict:
        out = {"squeue_s": self.timed("queue", runs=1)}
        start = time.perf_counter()
        httpx.get(f"{self.api}jobs", headers=self.auth, timeout=300).raise_for_status()
        out["api_jobs_s"] = time.perf_counter() - start
        start = time.perf_counter()
        httpx.get(self.metrics, timeout=300).raise_for_status()
        out["scrape_s"] = time.perf_counter() - start
        out["master_rss"] = psutil.Process(self.pids["master"]).memory_info().rss
        out["api_rss"] = psutil.Process(self.pids["api"]).memory_info().rss
        return out

    def short_jobs(self, count: int = SHORT_JOBS) -> dict:
        """``count`` one-node jobs of no duration, at the front of the queue: starts per second
        (first start to last start) and Redis bytes each keeps once ended."""
        before = self.memory()
        passes = scale_report.buckets(httpx.get(self.metrics, timeout=300).text)
        ids = []
        for start in range(0, count, 1000):
            n = min(1000, count - start)
            out = self.cli("submit", "--parsable", "-C", "simulated", f"--array=0-{n - 1}", "--priority", "high",
                           self.script, "--sim-seconds", 0)
            ids.append(out.stdout.strip().split(";")[0])
        deadline = time.time() + 600
        while time.time() < deadline:
            jobs = json.loads(self.cli("history", "--json", "--limit", count + 10, "-j", ",".join(ids)).stdout)
            if len(jobs) >= count and all(j["state"] == "COMPLETED" for j in jobs):
                break
            time.sleep(1)
        busy = scale_report.delta(scale_report.buckets(httpx.get(self.metrics, timeout=300).text), passes)
        starts = sorted(j["started_at"] for j in jobs if j.get("started_at"))
        return {"short_started_per_s": (len(starts) - 1) / max(1e-9, starts[-1] - starts[0]),
                "busy_pass_p50_s": scale_report.quantile(busy, 0.5), "busy_pass_p95_s": scale_report.quantile(busy, 0.95),
                "busy_passes": busy[-1][1] if busy else 0,
                "bytes_per_ended_job": (self.memory() - before) / count,
                "short_all_completed": len(jobs) >= count and all(j["state"] == "COMPLETED" for j in jobs)}

    def detection(self) -> dict:
        """Seconds from a node's SIGKILL, and from its SIGSTOP, to the master's `down` incident."""
        out = {}
        for how, sig in (("crash", signal.SIGKILL), ("silence", signal.SIGSTOP)):
            name = f"{how}-0001"
            proc = subprocess.Popen([*CLI, "simulate", "1", "--prefix", f"{how}-"], env=dict(os.environ, **self.node_env),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 60
            while not any(n.name == name and n.alive for n in self.store.node_statuses()) and time.time() < deadline:
                time.sleep(0.1)
            time.sleep(1.0)
            killed = time.time()
            proc.send_signal(sig)
            while time.time() < killed + 60:
                if any(i.get("kind") == "down" and i.get("node") == name and float(i.get("at", 0)) >= killed
                       for i in self.store.incidents(50)):
                    out[f"{how}_detect_s"] = time.time() - killed
                    break
                time.sleep(0.02)
            proc.kill()
            proc.wait()
        return out


def _master_metrics(state: Path) -> str:
    targets = json.loads((state / "prometheus" / "targets.json").read_text())
    for group in targets:
        if group.get("labels", {}).get("role") in ("cluster", "master") or group.get("labels", {}).get("job") == "cluster":
            return group["targets"][0]
    return targets[-1]["targets"][0]


def calls(bench: Bench) -> dict:
    """One sbatch, squeue and scancel at an empty queue; submits one at a time (CLI and API)."""
    held = ("submit", "--parsable", "-C", "simulated", "--begin", "2099-01-01", bench.script)
    out = {"sbatch_s": bench.timed(*held), "squeue_empty_s": bench.timed("queue")}
    cancels = []
    for job in [bench.cli(*held).stdout.strip() for _ in range(3)]:
        start = time.perf_counter()
        bench.cli("cancel", job)
        cancels.append(time.perf_counter() - start)
    out["scancel_s"] = statistics.median(cancels)
    def client(count: int) -> None:
        with httpx.Client(headers=bench.auth, timeout=60) as http:
            for _ in range(count):
                http.post(f"{bench.api}jobs", json={"script": "print(1)\n", "constraint": "simulated",
                                                    "begin": "2099-01-01"}).raise_for_status()

    for clients in (1, API_CLIENTS):
        threads = [threading.Thread(target=client, args=(API_JOBS // clients,)) for _ in range(clients)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out[f"api_submit_per_s_{clients}"] = API_JOBS / (time.perf_counter() - start)
    with httpx.Client(headers=bench.auth, timeout=120) as http:  # many jobs a request: arrays
        start = time.perf_counter()
        arrays = [http.post(f"{bench.api}jobs", json={"script": "print(1)\n", "constraint": "simulated",
                                                      "begin": "2099-01-01", "array": f"0-{API_ARRAY - 1}"}).json()["id"]
                  for _ in range(API_ARRAYS)]
        out["api_array_submit_per_s"] = API_ARRAYS * API_ARRAY / (time.perf_counter() - start)
    bench.cli("cancel", *arrays)  # out of the queue the levels fill
    bench.submitted += 2 * API_JOBS + 6
    return out


def measure(nodes: int, levels: list[int], short: bool) -> dict:
    bench = Bench(nodes)
    try:
        result = {"nodes": nodes, "up_s": bench.up_seconds}
        time.sleep(3)
        idle = bench.window()
        result["idle"] = dict(idle, redis_bytes_per_node=bench.memory() / (nodes + 1))
        result["calls"] = calls(bench)
        result["levels"] = []
        for target in levels:
            before = bench.memory()
            queued = bench.submitted
            rate = bench.fill(target)
            level = {"jobs": target, "cli_submit_per_s": rate, "settle_s": bench.settle(),
                     "bytes_per_pending_job": (bench.memory() - before) / max(1, target - queued)}
            level.update(bench.window())
            level.update(bench.reads())
            result["levels"].append(level)
            print(f"  {nodes} nodes, {target} jobs: {json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in level.items()})}",
                  flush=True)
        if short:  # past the fullest queue, where it is slowest: on the most nodes only
            result.update(bench.short_jobs())
        result.update(bench.detection())
        return result
    finally:
        bench.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10 100 1000", help="node counts (NODES)")
    parser.add_argument("--jobs", default="1000 10000 100000", help="queued job counts (JOBS)")
    parser.add_argument("--full-grid", action="store_true", help="every job count at every node count")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    node_counts = [int(n) for n in args.nodes.replace(",", " ").split()]
    levels = sorted(int(j) for j in args.jobs.replace(",", " ").split())
    started = time.monotonic()
    results = []
    for nodes in node_counts:
        print(f"==> {nodes} simulated nodes", flush=True)
        largest = nodes == node_counts[-1]
        # What a queue costs hardly depends on the nodes: its deepest level only on the most
        # nodes, unless --full-grid (which takes about 5 minutes more a node count).
        mine = levels if largest or args.full_grid else [j for j in levels if j <= GRID_JOBS] or levels[:1]
        results.append(measure(nodes, mine, short=largest))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.json").write_text(json.dumps({"results": results, "seconds": time.monotonic() - started}, indent=2))
    (out / "scale.svg").write_text(scale_report.plot(results))
    met = scale_report.report(results)
    print(f"(bench/results/scale.json, scale.svg; {time.monotonic() - started:.0f} s)")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
