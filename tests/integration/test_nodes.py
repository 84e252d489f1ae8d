"""What the containers rely on, checked on the local cluster: a script piped on stdin (how
`make submit` hands a host file to the master container), node health checks, and each
node's Prometheus exporter."""

import json
import urllib.request

from tests.conftest import wait_until


def test_a_script_on_stdin_runs_under_its_given_name_without_the_daemons_credentials(idle_cluster):
    text = ("import os\nprint('from stdin on', os.environ['MINIHPC_NODE'])\n"
            "print('credentials:', sorted(k for k in os.environ if 'REDIS' in k or 'TOKEN' in k))\n")
    out = idle_cluster.cli("submit", "--parsable", "-N", 2, "--script-name", "piped.py", "-", input=text)
    job_id = int(out.stdout)
    job = idle_cluster.wait(job_id)
    assert job["state"] == "COMPLETED", job
    assert job["name"] == "piped.py" and job["script"].endswith("/piped.py")
    logs = idle_cluster.cli("logs", job_id).stdout
    assert logs.count("from stdin on") == 2
    assert logs.count("credentials: []") == 2, "the agents' MINIHPC_REDIS_URL stays out of a job's environment"


def test_an_empty_stdin_script_is_refused(idle_cluster):
    proc = idle_cluster.cli("submit", "-", input="", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "minihpc submit: error: the script on standard input is empty"
    assert idle_cluster.cli("queue", "--json").stdout.strip() == "[]"


def test_node_check_tells_up_from_unknown(cluster):
    ok = cluster.cli("nodes", "--check", "worker-node-1")
    assert ok.stdout.strip() == "worker-node-1 idle" or ok.stdout.startswith("worker-node-1 ")
    missing = cluster.cli("nodes", "--check", "worker-node-9", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "minihpc nodes: node worker-node-9 is not registered"


def test_every_node_serves_its_metrics_and_registers_where(cluster):
    nodes = {n["name"]: n for n in json.loads(cluster.cli("nodes", "--json").stdout)}
    for name in ("master-node", "worker-node-1", "worker-node-2"):
        addr = nodes[name]["metrics"]
        assert addr and addr.startswith("127.0.0.1:"), nodes[name]
        body = urllib.request.urlopen(f"http://{addr}/metrics", timeout=5).read().decode()
        assert f'minihpc_node_cpus{{node="{name}"}}' in body
        assert f'minihpc_node_allocated{{node="{name}"}}' in body


def test_allocated_gauge_follows_the_job(idle_cluster, tmp_path):
    script = tmp_path / "hold.py"
    script.write_text("import time\ntime.sleep(30)\n")
    job_id = idle_cluster.submit("-N", 1, script)
    wait_until(lambda: idle_cluster.show(job_id)["state"] == "RUNNING", timeout=30, message="running")
    node = idle_cluster.show(job_id)["nodes"][0]
    addr = {n["name"]: n for n in json.loads(idle_cluster.cli("nodes", "--json").stdout)}[node]["metrics"]

    def allocated():
        body = urllib.request.urlopen(f"http://{addr}/metrics", timeout=5).read().decode()
        return f'minihpc_node_allocated{{node="{node}"}} 1.0' in body

    wait_until(allocated, timeout=10, message="the allocated gauge at 1")
    idle_cluster.cli("cancel", job_id)
