"""The Compose cluster end to end: healthy services, jobs across three containers, the MNIST
demo job with checkpoints on the shared volume, the make targets users type, and Prometheus."""

import json
import re

from tests.conftest import wait_until

NODES = {"master-node", "worker-node-1", "worker-node-2"}


def test_every_service_becomes_healthy(compose_cluster):
    health = compose_cluster.healthy()
    assert {"redis", "control", "restart-proxy", "prometheus", "alertmanager", "api", *NODES} <= set(health)
    assert set(health.values()) == {"healthy"}, health


def test_make_status_shows_containers_and_idle_nodes(idle):
    out = idle.make("status").stdout
    for node in NODES:
        assert re.search(rf"^{node}\s+idle\s", out, re.M), out
    assert "minihpc-e2e_redis_1" in out or "minihpc-e2e-redis-1" in out, out


def test_hello_runs_one_rank_in_each_of_three_containers(idle):
    job_id = idle.submit("jobs/hello.py", nodes=3)
    job = idle.wait(job_id, timeout=120)
    assert job["state"] == "COMPLETED", job
    assert set(job["nodes"]) == NODES
    logs = idle.make("logs", f"ID={job_id}").stdout
    hosts = set(re.findall(r"\(host ([\w-]+),", logs))
    assert hosts == NODES, logs  # three containers, three hostnames
    assert logs.count("all-reduce sum 6, expected 6") == 3, logs


def test_benchmark_reports_every_node(idle):
    job_id = idle.submit("jobs/benchmark.py", nodes=3, args="--matrix 128 --repeats 3 --max-mib 1")
    assert idle.wait(job_id, timeout=120)["state"] == "COMPLETED"
    logs = idle.make("logs", f"ID={job_id}").stdout
    compute = dict(re.findall(r"^\s+\d\s+([\w-]+)\s+\d+\s+([\d.]+)$", logs, re.M))
    assert set(compute) == NODES and all(float(v) > 0 for v in compute.values()), logs
    assert re.search(r"^\s+1048576\s+[\d.]+\s+[\d.]+\s+[\d.]+$", logs, re.M), logs


def test_make_queue_and_logs_show_a_running_job(idle):
    job_id = idle.submit("tests/e2e/jobs/sleepy.py", nodes=2, args="60")
    wait_until(lambda: idle.show(job_id)["state"] == "RUNNING", timeout=60, interval=0.5,
               message=f"job {job_id} running")
    queue = idle.make("queue").stdout
    assert re.search(rf"^\s*{job_id}\s+sleepy\.py\s+\S+\s+R\s+", queue, re.M), queue
    wait_until(lambda: idle.make("logs", f"ID={job_id}").stdout.count("sleepy rank") == 2,
               timeout=60, interval=1, message="both ranks' log lines")
    assert "Cancelled job" in idle.make("cancel", f"ID={job_id}").stdout
    assert idle.wait(job_id, timeout=60)["state"] == "CANCELLED"


def test_make_submit_without_job_prints_usage(compose_cluster):
    proc = compose_cluster.make("submit", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: make submit JOB=")


def test_prometheus_scrapes_every_node(compose_cluster):
    def scraped():
        targets = compose_cluster.prometheus("/api/v1/targets")["data"]["activeTargets"]
        up = {t["labels"].get("node") for t in targets if t["health"] == "up"}
        return NODES <= up

    wait_until(scraped, timeout=60, interval=1, message="Prometheus scraping all three nodes")
    result = compose_cluster.prometheus("/api/v1/query", query="minihpc_node_cpus")["data"]["result"]
    assert {r["metric"]["node"] for r in result} == NODES
    assert all(float(r["value"][1]) >= 1 for r in result)


def test_a_module_dropped_in_the_jobs_volume_runs_in_no_daemon(idle):
    """Jobs cannot write /shared/jobs (tests/e2e/test_security.py), but an operator's stray
    redis.py there is imported by no daemon: not by a node that restarts, nor by `minihpc`."""
    planted = "open('/shared/jobs/planted-ran', 'w').write('imported')\nraise SystemExit('planted redis.py ran')\n"
    idle.in_master("python3", "-c", f"open('/shared/jobs/redis.py', 'w').write({planted!r})")
    try:
        idle.docker_compose("restart", "worker-node-1")
        assert json.loads(idle.minihpc("queue", "--json").stdout) == []
        job_id = idle.submit("jobs/hello.py", nodes=3)
        assert idle.wait(job_id, timeout=180)["state"] == "COMPLETED", "the restarted node runs jobs"
        ran = idle.in_master("test", "-e", "/shared/jobs/planted-ran", check=False).returncode == 0
        assert not ran, "a daemon imported the module a job planted"
    finally:
        idle.in_master("rm", "-f", "/shared/jobs/redis.py", "/shared/jobs/planted-ran", check=False)


def test_mnist_trains_across_three_containers_and_its_checkpoints_survive_down_up(idle):
    # Last in this file: it restarts the whole cluster.
    assert "MNIST" in idle.prepare_data()
    job_id = idle.submit("jobs/train_mnist_distributed.py", nodes=3, args="--epochs 4 --checkpoint-every 10")
    job = idle.wait(job_id, timeout=600)
    assert job["state"] == "COMPLETED", idle.make("logs", f"ID={job_id}").stdout
    assert set(job["nodes"]) == NODES
    logs = idle.make("logs", f"ID={job_id}").stdout
    assert re.search(r"step \d+/\d+ loss [\d.]+ samples/s \d+", logs), logs

    def listing():
        return sorted(idle.in_master("ls", f"/shared/models/job-{job_id}").stdout.split())

    before = listing()
    assert "LATEST" in before and sum(name.endswith(".pt") for name in before) >= 2, before
    accuracy = float(re.search(r"test accuracy ([\d.]+)", idle.make("validate-model", f"ID={job_id}").stdout)[1])
    assert accuracy >= 0.90

    idle.make("down")
    assert idle.docker_compose("ps", "-q").stdout.strip() == ""
    idle.make("up", timeout=600)
    assert listing() == before
    assert idle.show(job_id)["state"] == "COMPLETED"  # Redis's AOF survived too
    again = float(re.search(r"test accuracy ([\d.]+)", idle.make("validate-model", f"ID={job_id}").stdout)[1])
    assert again == accuracy


def test_the_api_serves_the_page_and_runs_a_job_across_the_containers(idle):
    """`make up` serves the web page and REST API on 127.0.0.1; a token from `make token` submits
    a 3-node job whose log stream ends with its final state."""
    import httpx

    url = f"http://127.0.0.1:{idle.env['MINIHPC_API_PORT']}"
    assert httpx.get(f"{url}/health", timeout=10).json()["nodes_up"] == 3
    assert "<title>minihpc" in httpx.get(url, timeout=10).text
    assert httpx.get(f"{url}/docs-assets/swagger-ui-bundle.js", timeout=10).status_code == 200, "offline /docs"
    assert httpx.get(f"{url}/jobs", timeout=10).status_code == 401
    token = idle.make("token", "USER=e2e").stdout.strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {token}"}
    with open("jobs/hello.py") as fh:
        r = httpx.post(f"{url}/jobs", json={"script": fh.read(), "script_name": "hello.py", "nodes": 3},
                       headers=auth, timeout=30)
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    with httpx.stream("GET", f"{url}/jobs/{job_id}/logs/stream", headers=auth, timeout=180) as stream:
        text = "".join(stream.iter_text())
    assert text.count("all-reduce sum 6, expected 6") == 3, text
    assert '"state":"COMPLETED"' in text.split("event: end")[-1], text
    assert idle.show(job_id)["user"] == "e2e"


def test_a_bash_sbatch_script_with_srun_runs_across_the_containers(idle):
    """man sbatch / man srun: a bash batch script runs once on the first node; ``srun`` starts
    its tasks in every container (block distribution); ``scontrol show hostnames`` lists them."""
    job_id = idle.submit("tests/integration/jobs/srun_layout.sh", nodes=3)
    job = idle.wait(job_id, timeout=120)
    logs = idle.make("logs", f"ID={job_id}").stdout
    assert job["state"] == "COMPLETED" and job["launch"] == "batch", logs
    assert "batch: node=master-node first=master-node nodelist=master-node,worker-node-[1-2] nnodes=3 " \
           "tasks_per_node=2(x3) procid=0" in logs, logs
    tasks = sorted(re.findall(r"step=0 task=(\d)/6 local=(\d) nodeid=(\d) node=([\w-]+)", logs))
    assert tasks == [(str(t), str(t % 2), str(t // 2), sorted(NODES)[t // 2]) for t in range(6)], logs


def test_a_heredoc_on_srun_runs_on_every_container_and_sruns_output_comes_back(idle):
    """The issue's silent false success: ``srun python3 - <<'PY'`` ran an empty program on every
    task (stdin was /dev/null) and the job said COMPLETED. man srun: stdin goes to all tasks;
    every task's output comes back through srun, so ``out=$(srun -N3 hostname | sort)`` holds
    the three containers' names."""
    job_id = idle.submit("tests/e2e/jobs/srun_heredoc.sh", nodes=3)
    job = idle.wait(job_id, timeout=180)
    logs = idle.make("logs", f"ID={job_id}").stdout
    assert job["state"] == "COMPLETED", logs
    tasks = sorted(re.findall(r"heredoc task (\d) of 3 on ([\w-]+): all-reduce sum (\d+)", logs))
    assert tasks == [(str(r), sorted(NODES)[r], "6") for r in range(3)], logs
    assert f"hostnames: {' '.join(sorted(NODES))}" in logs, logs


def test_a_published_ddp_sbatch_script_runs_unchanged(idle):
    """``srun torchrun --nnodes $SLURM_NNODES --rdzv-backend c10d --rdzv-endpoint $head:29500``
    with ``head`` from ``scontrol show hostnames | head -n 1``: node names resolve between the
    containers, and each rank's all-reduce is checked by hello.py."""
    job_id = idle.submit("jobs/ddp_sbatch.sh", nodes=2)
    job = idle.wait(job_id, timeout=180)
    logs = idle.make("logs", f"ID={job_id}").stdout
    assert job["state"] == "COMPLETED", logs
    assert "rendezvous at master-node:29500" in logs, logs
    hosts = set(re.findall(r"of 2 on node [\w-]+ \(host ([\w-]+),", logs))
    assert hosts == {"master-node", "worker-node-1"} and logs.count("all-reduce sum 3, expected 3") == 2, logs


def test_an_array_with_its_tree_and_output_files_runs_across_the_containers(idle, tmp_path):
    """``make submit JOB=... TREE=dir``: the job's folder travels into the cluster (the containers
    do not see this machine's files); man sbatch --array=0-2 with -o %x-%A_%a.out: one file per
    task, on the logs volume (the working tree is read-only there), written by the job's user."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "lrs.txt").write_text("0.1\n0.2\n0.3\n")
    (tmp_path / "sweep.sh").write_text(
        "#!/bin/bash\n#SBATCH --array=0-2 -o %x-%A_%a.out\n"
        'echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT lr $(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" '
        'conf/lrs.txt) as $(id -un)"\n')
    out = idle.make("submit", f"JOB={tmp_path / 'sweep.sh'}", f"TREE={tmp_path}").stdout
    array = int(re.search(r"Submitted batch job (\d+)", out).group(1))
    assert idle.minihpc("wait", array, "--timeout", 120, check=False, timeout=150).returncode == 0, \
        idle.minihpc("queue", "-t", "all").stdout
    for index, lr, own in zip(range(3), ("0.1", "0.2", "0.3"), (array + 1, array + 2, array)):
        shown = idle.minihpc("scontrol", "show", "job", f"{array}_{index}").stdout
        path = re.search(r"StdOut=(\S+)", shown).group(1)
        assert path == f"/shared/logs/job-{own}/output/sweep.sh-{array}_{index}.out", shown
        # As the uid the cluster gave the submitter (`minihpc`, the daemons' account, is never a
        # job's user), named on the node so `id -un` answers: u<uid>, its own name being taken.
        assert re.fullmatch(rf"task {index} of 3 lr {lr} as u2\d{{5}}\n", idle.in_master("cat", path).stdout)
