"""Ansible provisions real hosts into a minihpc cluster: systemd hosts reached over real SSH.

One control host (also a node) and two nodes are provisioned from scratch with `make
ansible-setup`; a second run changes nothing; the 3-node MNIST DDP job runs on them and
Prometheus scrapes every host; an agent killed with -9, stopped with systemctl, and stopped
behind a dead sshd comes back (systemd, or the master's SSH restarter); a host removed from the
inventory is drained and gone, and a new one added joins (after the removed one's container is
deleted: each host holds a multi-GB venv, and four at once filled a CI machine's disk). The tests run in order on one set of
hosts (tests/ansible/hosts.py), which is removed at the end of the module.
"""

import json
import re
import time
import urllib.parse
import urllib.request

import pytest

from tests.ansible.hosts import ROOT, Hosts, recap
from tests.conftest import docker_answers, wait_until

pytestmark = pytest.mark.ansible

NODES = ("head", "node1", "node2")
"""The control host, also a node, and two nodes: inventory names, hostnames and node names."""


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    if not docker_answers():
        pytest.skip("no Docker engine answers: the Ansible suite's hosts are containers")
    h = Hosts(tmp_path_factory.mktemp("ansible"))
    h.build()
    h.setup()
    try:
        h.start(*NODES)
        h.write_inventory("head", {"node1": {}, "node2": {}})
        yield h
    finally:
        h.teardown()


@pytest.fixture(scope="module")
def first_run(hosts):
    return hosts.provision()


def minihpc(hosts, *args, check=True, input=None):
    """The minihpc CLI on the control host, as an operator runs it there (over SSH, with sudo)."""
    return hosts.ssh("head", "sudo minihpc " + " ".join(map(str, args)), check=check, input=input)


def nodes(hosts) -> dict[str, dict]:
    return {n["name"]: n for n in json.loads(minihpc(hosts, "nodes", "--json").stdout)}


def incidents(hosts, node: str, since: float) -> list[dict]:
    items = json.loads(minihpc(hosts, "incidents", "--json", "-n", 300).stdout)
    return sorted((i for i in items if i["node"] == node and i["at"] >= since), key=lambda i: i["at"])


def wait_job(hosts, job_id: int, timeout=600) -> dict:
    minihpc(hosts, "wait", job_id, check=False)
    return wait_until(lambda: (j := json.loads(minihpc(hosts, "show", job_id, "--json").stdout))["state"]
                      in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL") and j,
                      timeout=timeout, interval=1, message=f"job {job_id} to end")


def submit(hosts, *args) -> int:
    return int(minihpc(hosts, "submit", "--parsable", *args).stdout.strip().split(";")[0])


def prometheus(hosts, query: str) -> list[dict]:
    url = f"http://{hosts.address('head')}:9090/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)["data"]["result"]


def prepare_data(hosts) -> None:
    hosts.ssh("head", "sudo runuser -u minihpc -- env PYTHONPATH=/opt/minihpc/src /opt/minihpc/venv/bin/python "
                         "/opt/minihpc/jobs/prepare_mnist.py --root /shared/data")


def up_nodes(hosts) -> set[str]:
    return {name for name, n in nodes(hosts).items() if n["state"] not in ("down", "DOWN")}


def test_a_first_run_provisions_one_control_host_and_two_nodes(hosts, first_run):
    out = first_run.stdout + first_run.stderr
    assert first_run.returncode == 0, out[-6000:]
    figures = recap(out)
    assert set(figures) == set(NODES), out[-3000:]
    assert all(f["failed"] == 0 and f["unreachable"] == 0 and f["changed"] > 0 for f in figures.values()), figures
    for name in NODES:
        assert hosts.exec(name, "systemctl", "is-active", "minihpc-node").stdout.strip() == "active"
    for unit in ("redis-server", "prometheus", "minihpc-master", "minihpc-api"):
        assert hosts.exec("head", "systemctl", "is-active", unit).stdout.strip() == "active", unit
    registered = wait_until(lambda: set(n := nodes(hosts)) == set(NODES) and n, timeout=60, message="3 nodes")
    assert {name: n["addr"] for name, n in registered.items()} == {name: hosts.address(name) for name in NODES}
    # Redis: the cluster address and loopback only; the default user is off.
    listening = hosts.exec("head", "ss", "-Hltn", "sport = :6379").stdout.split()
    assert sorted(a for a in listening if a.endswith(":6379")) == sorted([f"{hosts.address('head')}:6379", "127.0.0.1:6379"])
    refused = hosts.exec("node1", "python3", "-c", "import socket; s=socket.create_connection(('%s', 6379)); "
                         "s.sendall(b'PING\\r\\n'); print(s.recv(200).decode())" % hosts.address("head")).stdout
    assert "NOAUTH" in refused, refused
    # A job's uid (any but root's and the daemons') cannot even connect: the agent's firewall rule.
    probe = "import socket; socket.create_connection(('%s', 6379), timeout=3)" % hosts.address("head")
    as_job = hosts.exec("node1", "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        "python3", "-c", probe, check=False)
    assert as_job.returncode != 0 and "ConnectionRefusedError" in as_job.stderr, as_job
    secrets = hosts.inventory.parent / "group_vars" / "all" / "minihpc_secrets.yml"
    assert secrets.stat().st_mode & 0o777 == 0o600
    # The daemons' credentials: root only on every host.
    for name, path in [("head", "/etc/minihpc/master.env"), ("node1", "/etc/minihpc/node.env")]:
        assert hosts.exec(name, "stat", "-c", "%a %U", path).stdout.split() == ["600", "root"]


def test_a_second_run_changes_nothing_and_check_mode_works(hosts, first_run):
    assert first_run.returncode == 0
    again = hosts.provision()
    figures = recap(again.stdout)
    assert again.returncode == 0 and set(figures) == set(NODES), again.stdout[-4000:]
    assert all(f["changed"] == 0 and f["failed"] == 0 for f in figures.values()), (figures, again.stdout[-6000:])
    check = hosts.provision("--check", "--diff")
    figures = recap(check.stdout)
    assert check.returncode == 0 and all(f["changed"] == 0 for f in figures.values()), (figures, check.stdout[-6000:])


def test_the_mnist_ddp_job_runs_on_the_three_hosts_and_prometheus_scrapes_every_host(hosts, first_run):
    assert first_run.returncode == 0
    prepare_data(hosts)
    job_id = submit(hosts, "-N", 3, "/opt/minihpc/jobs/train_mnist_distributed.py", "--epochs", 1)
    job = wait_job(hosts, job_id)
    logs = minihpc(hosts, "logs", job_id).stdout
    assert job["state"] == "COMPLETED", logs[-3000:]
    assert sorted(job["nodes"]) == sorted(NODES)
    print(f"job {job_id} {job['state']} on {', '.join(job['nodes'])} in {job['ended_at'] - job['started_at']:.1f}s")
    # Every host's exporter and the master's, through the targets file the master keeps.
    expected = {f"{hosts.address(n)}:9100" for n in NODES} | {f"{hosts.address('head')}:9101"}
    def all_up():
        up = {r["metric"]["instance"]: r["value"][1] for r in prometheus(hosts, 'up{job="minihpc"}')}
        return expected <= {instance for instance, value in up.items() if value == "1"} and up

    up = wait_until(all_up, timeout=60, interval=1, message="every exporter up in Prometheus")
    assert set(up) == expected, up


def test_an_alert_goes_through_alertmanager_to_minihpcs_receiver(hosts, first_run):
    """Prometheus knows the Alertmanager beside it, and an alert Alertmanager gets reaches the
    API's /alerts (with the cluster's alert token) and shows in `minihpc alerts`."""
    assert first_run.returncode == 0
    assert hosts.exec("head", "systemctl", "is-active", "prometheus-alertmanager").stdout.strip() == "active"
    head = hosts.address("head")
    with urllib.request.urlopen(f"http://{head}:9090/api/v1/alertmanagers", timeout=10) as resp:
        active = json.load(resp)["data"]["activeAlertmanagers"]
    assert [a["url"] for a in active] == [f"http://{head}:9093/api/v2/alerts"], active
    alert = [{"labels": {"alertname": "MinihpcRouteCheck", "severity": "info", "node": "node1"},
              "annotations": {"summary": "a test alert, straight to Alertmanager"}}]
    request = urllib.request.Request(f"http://{head}:9093/api/v2/alerts", data=json.dumps(alert).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200

    def arrived():
        firing = json.loads(minihpc(hosts, "alerts", "--json").stdout)["firing"]
        return [a for a in firing if a["alertname"] == "MinihpcRouteCheck"]
    got, = wait_until(arrived, timeout=60, interval=1, message="the alert at minihpc's receiver")
    assert (got["node"], got["summary"]) == ("node1", "a test alert, straight to Alertmanager"), got
    assert hosts.exec("head", "stat", "-c", "%a %U %G", "/etc/prometheus/alert-token").stdout.split() == \
        ["640", "root", "prometheus"]


def api(hosts, token: str, method: str, path: str, body: dict | None = None) -> dict:
    """A request to the REST API on the control host, as a user's client sends it."""
    request = urllib.request.Request(f"http://{hosts.address('head')}:8080{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.load(resp)


def test_the_api_runs_as_a_user_of_its_own_and_the_master_removes_what_it_spooled(hosts, first_run):
    """The API is not the master's uid: it cannot read the master's environment (its Redis
    credentials) nor the CLI's; what it spools, a node lends the job, and the master removes it
    when the API deletes the job."""
    assert first_run.returncode == 0

    def process(unit):
        pid = hosts.exec("head", "systemctl", "show", "-p", "MainPID", "--value", unit).stdout.strip()
        return pid, hosts.exec("head", "stat", "-c", "%U", f"/proc/{pid}").stdout.strip()

    (_, api_user), (master_pid, master_user) = process("minihpc-api"), process("minihpc-master")
    assert (api_user, master_user) == ("minihpc-api", "minihpc")
    assert hosts.exec("head", "stat", "-c", "%a %U %G", "/etc/minihpc/cli.env").stdout.split() == \
        ["640", "root", "minihpc-cli"]
    for secret in ("/etc/minihpc/cli.env", "/etc/minihpc/master.env", f"/proc/{master_pid}/environ"):
        read = hosts.exec("head", "runuser", "-u", "minihpc-api", "--", "cat", secret, check=False)
        assert read.returncode != 0 and "Permission denied" in read.stderr, (secret, read)

    token = minihpc(hosts, "token", "create", "alice").stdout.strip()
    script = "import os\nprint('spooled by the api; gid', os.getgid())\n"
    job_id = api(hosts, token, "POST", "/jobs", {"script": script, "script_name": "hi.py"})["id"]
    job = wait_job(hosts, job_id)
    text = "".join(log["text"] for log in api(hosts, token, "GET", f"/jobs/{job_id}/logs")["logs"])
    assert job["state"] == "COMPLETED", text[-3000:]
    gid = re.search(r"spooled by the api; gid (\d+)", text)
    assert gid and gid[1] not in ("0", "10001"), text[-3000:]
    spool, logs = f"/shared/jobs/spool/job-{job_id}", f"/shared/logs/job-{job_id}"
    # Lent to alice's group by the node that ran it: the daemons' to own, no other user's to read.
    assert hosts.exec("head", "stat", "-c", "%U %g %a", spool).stdout.split() == ["minihpc", gid[1], "750"]

    assert api(hosts, token, "DELETE", f"/jobs/{job_id}") == {"deleted": job_id}
    wait_until(lambda: hosts.exec("head", "ls", "-d", spool, logs, check=False).returncode == 2,
               timeout=30, interval=0.5, message="the master to remove the deleted job's folders")


def start_training(hosts, epochs=12) -> int:
    job_id = submit(hosts, "-N", 3, "/opt/minihpc/jobs/train_mnist_distributed.py", "--epochs", epochs, "--checkpoint-every", 5)
    wait_until(lambda: hosts.exec("head", "test", "-f", f"/shared/models/job-{job_id}/LATEST", check=False).returncode == 0,
               timeout=180, interval=0.5, message="a first checkpoint")
    return job_id


def test_an_agent_killed_with_sigkill_mid_job_comes_back_and_the_job_resumes(hosts, first_run):
    assert first_run.returncode == 0
    job_id = start_training(hosts)
    pid = hosts.exec("node1", "systemctl", "show", "-p", "MainPID", "--value", "minihpc-node").stdout.strip()
    since = time.time()
    hosts.exec("node1", "kill", "-9", pid)
    job = wait_job(hosts, job_id)
    # The unit's ExecStopPost told the master at once, before systemd started the agent again.
    seen = incidents(hosts, "node1", since)
    down = [i for i in seen if i["kind"] == "down"]
    assert down and down[0].get("cause") == "its unit's process was killed by SIGKILL", seen
    logs = minihpc(hosts, "logs", job_id).stdout
    assert job["state"] == "COMPLETED", logs[-3000:]
    assert job["attempts"] == 2, job
    assert re.search(r"resumed from /shared/models/job-\d+/ckpt-\d+\.pt at step [1-9]\d*", logs), logs[-3000:]
    new_pid = hosts.exec("node1", "systemctl", "show", "-p", "MainPID", "--value", "minihpc-node").stdout.strip()
    assert new_pid not in ("0", pid)


def test_a_stopped_agent_is_restarted_by_the_master_over_ssh(hosts, first_run):
    assert first_run.returncode == 0
    since = time.time()
    # The master sees the agent leave and restarts it over SSH at once, which may replace the
    # stop job before systemctl returns ("Job for minihpc-node.service canceled."): both are fine.
    stopped = hosts.exec("node2", "systemctl", "stop", "minihpc-node", check=False)
    assert stopped.returncode == 0 or "canceled" in stopped.stderr + stopped.stdout, stopped
    kinds = wait_until(lambda: "back" in (k := [i["kind"] for i in incidents(hosts, "node2", since)]) and k,
                       timeout=60, interval=0.5, message="node2 back")
    assert kinds.index("down") < kinds.index("restart") < kinds.index("back"), kinds
    assert hosts.exec("node2", "systemctl", "is-active", "minihpc-node").stdout.strip() == "active"
    # The restart came over SSH, as the daemons' user with the master's key.
    journal = hosts.exec("node2", "journalctl", "-u", "ssh", "--since", "-2min", "--no-pager").stdout
    assert re.search(r"Accepted publickey for minihpc from " + re.escape(hosts.address("head")), journal), journal[-2000:]


def test_a_host_whose_sshd_is_down_is_reported_and_restarted_once_sshd_is_back(hosts, first_run):
    assert first_run.returncode == 0
    since = time.time()
    hosts.exec("node2", "systemctl", "stop", "ssh")
    hosts.exec("node2", "systemctl", "stop", "minihpc-node")
    failed = wait_until(lambda: [i for i in incidents(hosts, "node2", since) if i["kind"] == "restart_failed"],
                        timeout=60, interval=0.5, message="a failed restart of node2")
    assert "does not answer SSH" in failed[0]["error"], failed
    hosts.exec("node2", "systemctl", "start", "ssh")
    wait_until(lambda: "back" in [i["kind"] for i in incidents(hosts, "node2", failed[0]["at"])],
               timeout=120, interval=0.5, message="node2 back once sshd runs")
    assert hosts.exec("node2", "systemctl", "is-active", "minihpc-node").stdout.strip() == "active"


def test_a_removed_host_is_drained_and_gone_and_an_added_one_joins(hosts, first_run):
    assert first_run.returncode == 0
    # A job on all three nodes: removing node2 waits for it (drained first), and it completes.
    sleepy = (ROOT / "tests/e2e/jobs/sleepy.py").read_text()
    job_id = int(minihpc(hosts, "submit", "--parsable", "-N", 3, "--script-name", "sleepy.py", "-", 20, input=sleepy).stdout.split(";")[0])
    wait_until(lambda: json.loads(minihpc(hosts, "show", job_id, "--json").stdout)["state"] == "RUNNING",
               timeout=60, interval=0.5, message="the 3-node job running")
    hosts.write_inventory("head", {"node1": {}, "node2": {"minihpc_state": "absent"}})
    removed = hosts.provision()
    assert removed.returncode == 0, removed.stdout[-6000:]
    job = json.loads(minihpc(hosts, "show", job_id, "--json").stdout)
    assert (job["state"], job["attempts"]) == ("COMPLETED", 1), job
    assert set(nodes(hosts)) == {"head", "node1"}
    assert hosts.exec("node2", "systemctl", "is-enabled", "minihpc-node", check=False).returncode != 0
    assert "node2" not in hosts.exec("head", "cat", "/etc/minihpc/ssh_config").stdout
    drained = [i for i in incidents(hosts, "node2", 0) if i["kind"] == "drained"]
    assert drained and "removed" in drained[0]["reason"], drained
    # The machine is decommissioned (its disk freed: each host holds a multi-GB venv), and a new
    # one is added to the inventory: a re-run joins it and changes nothing on the others but
    # the master's SSH config.
    hosts.remove("node2")
    hosts.start("node3")
    hosts.write_inventory("head", {"node1": {}, "node3": {}})
    added = hosts.provision()
    figures = recap(added.stdout)
    assert added.returncode == 0 and figures["node3"]["changed"] > 0, added.stdout[-6000:]
    assert figures["node1"]["changed"] == 0, figures
    wait_until(lambda: up_nodes(hosts) == {"head", "node1", "node3"}, timeout=60, message="node3 up")
    hosts_of = json.loads(minihpc(hosts, "nodes", "--json").stdout)
    assert {n["name"]: n["addr"] for n in hosts_of}["node3"] == hosts.address("node3"), hosts_of
