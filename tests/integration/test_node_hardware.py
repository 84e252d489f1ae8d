"""Hardware discovery on a real local cluster of its own, with the speed probe on (the suite's
shared cluster turns it off): every node registers its CPU model and, once its agent's probe
has run, a GFLOP/s figure; a benchmark job on two nodes records its all-reduce bus bandwidth
on both; ``nodes --long`` and the node exporter show them. The node registry's own bookkeeping
is checked first, on a bare Redis."""

import json
import time
import urllib.request
from pathlib import Path

import pytest

from minihpc.ops.faults import LocalFaults
from tests.conftest import wait_until
from tests.integration.conftest import start_cluster, stop_cluster

pytestmark = pytest.mark.integration

BENCHMARK = Path(__file__).parents[2] / "jobs" / "benchmark.py"
NAMES = ("master-node", "worker-node-1", "worker-node-2")


def test_the_registry_keeps_measures_across_registrations_but_not_an_old_cpu_limit(store):
    store.register_node("n1", "a", cpus=1, memory_bytes=1 << 30, ttl=5, cpu_model="AMD EPYC", cpu_limit=0.5,
                        gpu_model="NVIDIA H100", gpus=1)
    store.record_speed("n1", 40.0, time.time())
    store.record_measures("n1", {"allreduce_gbps": 1.5, "allreduce_measured_at": time.time(), "allreduce_job": 7,
                                 "gflops": 55.0, "gflops_measured_at": time.time(), "gflops_job": 7})
    node = store.node_status("n1")
    assert (node.cpu_model, node.cpu_limit, node.gpu_model, node.gflops, node.allreduce_gbps) == (
        "AMD EPYC", 0.5, "NVIDIA H100", 55.0, 1.5)
    store.register_node("n1", "a", cpus=4, memory_bytes=1 << 30, ttl=5, cpu_model="AMD EPYC")  # the limit was lifted
    store.record_speed("n1", 41.0, time.time())  # the probe again: its figure, no job's
    node = store.node_status("n1")
    assert (node.cpus, node.cpu_limit, node.gflops, node.allreduce_gbps) == (4, None, 41.0, 1.5)
    assert store.r.hget("minihpc:node:n1", "gflops_job") is None
    assert [n.gflops for n in store.node_statuses()] == [41.0]
    assert store.node_status("nope") is None


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """master-node, worker-node-1 and worker-node-2, each agent running its speed probe (the
    shared cluster runs without: agents restart there in drills, and a probe is a second of
    busy CPU). Its agents write their measures as the node's Redis user: never refused."""
    c = start_cluster(tmp_path_factory.mktemp("probed"), MINIHPC_SPEED_PROBE="1")
    wait_until(lambda: len(c.nodes()) == 3 and all(n["state"] == "idle" for n in c.nodes()), timeout=60,
               message="three idle nodes")
    yield c
    stop_cluster(c)


def long_view(c) -> dict[str, list[str]]:
    """``nodes --long`` by node: NODE STATE CPUS CPU-LIMIT MEMORY GPUS GFLOPS ALLREDUCE-GB/S, then the models."""
    header, *lines = c.cli("nodes", "--long").stdout.splitlines()
    assert header.split()[:8] == ["NODE", "STATE", "CPUS", "CPU-LIMIT", "MEMORY", "GPUS", "GFLOPS", "ALLREDUCE-GB/S"]
    return {line.split()[0]: line.split() for line in lines}


def test_every_node_registers_its_cpu_model_and_a_measured_speed(probed):
    c = probed
    wait_until(lambda: all((n["gflops"] or 0) > 0 for n in c.nodes()), timeout=60,
               message="every node's speed probe")
    rows = long_view(c)
    assert sorted(rows) == sorted(NAMES)
    for name, row in rows.items():
        assert row[1] == "idle" and int(row[2]) >= 1, row
        assert float(row[6]) > 0, f"{name} has no GFLOPS: {row}"
        assert row[8] != "-", f"{name} has no CPU model: {row}"
    assert c.cli("nodes").stdout.split()[:8] == ["NODE", "STATE", "PARTITION", "CPUS", "MEMORY", "GRES", "JOB",
                                                 "LAST-HEARTBEAT"], "the plain view is unchanged"
    node = {n["name"]: n for n in c.nodes()}["worker-node-1"]
    body = urllib.request.urlopen(f"http://{node['metrics']}/metrics", timeout=5).read().decode()
    assert 'minihpc_node_compute_flops{node="worker-node-1"}' in body
    assert f'minihpc_node_info{{cpu_model="{node["cpu_model"]}",gpu_model="",node="worker-node-1"}} 1.0' in body


def test_an_agent_back_from_a_crash_keeps_its_figure_and_does_not_probe_again(probed):
    """The same CPUs and limit need no second measurement: a recovering node never competes
    with a second of busy CPU."""
    c, node = probed, "worker-node-2"
    wait_until(lambda: all((n["gflops"] or 0) > 0 for n in c.nodes()), timeout=60, message="the speed probes")
    before = {n["name"]: n for n in c.nodes()}[node]
    log = c.state_dir / "run" / f"{node}.log"
    probes = lambda: log.read_text(errors="replace").count("(speed probe)")  # noqa: E731
    assert probes() == 1
    since = time.time()
    LocalFaults(c.state_dir).inject("kill", node)
    # DOWN and back within a second (the master sees the agent's process end): read the
    # incidents rather than catch the state in passing.
    wait_until(lambda: {"down", "back"} <= {i["kind"] for i in json.loads(c.cli("incidents", "--json").stdout)
                                            if i["node"] == node and i["at"] >= since},
               timeout=60, message=f"{node} down and back")
    wait_until(lambda: {n["name"]: n for n in c.nodes()}[node]["state"] == "idle", timeout=60, message=f"{node} back")
    time.sleep(3)  # a probe, had one started, would have reported by now (it takes about 2 s here)
    after = {n["name"]: n for n in c.nodes()}[node]
    assert after["gflops"] == before["gflops"] and probes() == 1, (before, after, log.read_text()[-1500:])


def test_a_benchmark_job_records_the_allreduce_bandwidth_on_its_nodes(probed):
    c = probed
    job = c.submit("-N", 2, BENCHMARK, "--matrix", 128, "--repeats", 3, "--max-mib", 1)
    done = c.wait(job, timeout=120)
    assert done["state"] == "COMPLETED", (done, c.cli("logs", job, check=False).stdout[-2000:])
    assert "busbw GB/s" in c.cli("logs", job).stdout
    nodes = {n["name"]: n for n in c.nodes()}
    ran = set(done["nodes"])
    for name in ran:
        assert nodes[name]["allreduce_gbps"] > 0, nodes[name]
        assert float(long_view(c)[name][7]) > 0
    [idle] = set(NAMES) - ran
    assert nodes[idle]["allreduce_gbps"] is None and long_view(c)[idle][7] == "-"
    body = urllib.request.urlopen(f"http://{nodes[min(ran)]['metrics']}/metrics", timeout=5).read().decode()
    assert f'minihpc_node_allreduce_busbw_bytes_per_second{{node="{min(ran)}"}}' in body
    record = json.loads(c.cli("nodes", "--json").stdout)
    assert all(n["allreduce_gbps"] is None or n["allreduce_gbps"] > 0 for n in record)
