"""The cluster exporter's series, scraped from a fresh registry over a store that holds a
small cluster: a job's series carry job_id and nothing free-text, minihpc_job_info names each
live job, and the alerts' inputs (node up/drained, startable jobs, jobs started, Redis memory)
are there."""

import re

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from minihpc.core.errors import ClusterUnavailable
from minihpc.core.models import Job, JobState, NodeStatus
from minihpc.metrics.cluster import ClusterCollector


def job(job_id: int, **fields) -> Job:
    fields = {"name": f"job-{job_id}", "user": "alice", "submitted_at": 1.0, **fields}
    return Job(id=job_id, script="s", script_source="s.py", script_sha256="0", **fields)


class FakeStore:
    """What ClusterCollector reads, as the Store would answer (see minihpc.state.store)."""

    def __init__(self):
        running = job(7, name="train resnet", nodes_requested=2, state=JobState.RUNNING, attempts=2,
                      nodes=["n2", "n4"])
        self.nodes = [NodeStatus("n1", "a", True, cpus=2), NodeStatus("n2", "a", True, job=7, cpus=2),
                      NodeStatus("n3", "a", False, drain_reason="flapping: 5 restarts within 600s", cpus=2),
                      NodeStatus("n4", "a", True, job=7, cpus=2)]
        self.running = [running]
        self.pending = [job(8), job(9, held_by="alice"), job(10, nodes_requested=5, partition="big")]
        self.cluster: dict | None = {"default_partition": "main", "partitions": "big=n1,n2,n3,n4"}
        self.revision = 1
        self.memory: tuple | Exception = (1000, 0)
        phases = {"data_seconds": 0.01, "forward_seconds": 0.1, "backward_seconds": 0.2, "optimizer_seconds": 0.01}
        self.reports = [{"attempt": 2, "rank": r, "node": n, **phases} for r, n in ((0, "n2"), (1, "n4"))]

    def node_statuses(self):
        return self.nodes

    def jobs_revision(self):
        return self.revision  # bumped by every write to a job record

    def latest_change(self):
        return None, 0  # no changes stream: PendingCache reads the queue whole each time

    def pending_jobs(self, cache=None):
        return self.pending

    def running_jobs(self):
        return self.running

    def cluster_info(self):
        if self.cluster is None:
            raise ClusterUnavailable("no cluster")
        return self.cluster

    def dependency_states(self, refs):
        return {}

    def counters(self):
        return {"jobs_started": {"": 5}, "jobs_ended": {"COMPLETED": 3}, "job_requeues": {}, "node_restarts": {"n3": 2}}

    def histogram(self, name):
        return [("+Inf", 0.0)], 0.0

    def redis_memory(self):
        if isinstance(self.memory, Exception):
            raise self.memory
        return self.memory

    def progress(self, job_ids):
        return {7: {"step": 10, "at": 100.0, "total": 20, "loss": 0.5, "forward_seconds": 0.1}}

    def series(self, job_id, last=None):
        return self.reports if job_id == 7 else []


def scrape(store: FakeStore) -> str:
    registry = CollectorRegistry()
    registry.register(ClusterCollector(store))
    return generate_latest(registry).decode()


def samples(body: str) -> list[str]:
    return [line for line in body.splitlines() if line and not line.startswith("#")]


def test_a_jobs_series_carry_job_id_and_its_name_only_in_job_info():
    body = scrape(FakeStore())
    assert 'minihpc_job_info{job_id="7",name="train resnet",partition="main",state="RUNNING",user="alice"} 1.0' in body
    assert 'minihpc_job_info{job_id="8",name="job-8",partition="main",state="PENDING",user="alice"} 1.0' in body
    assert 'minihpc_job_info{job_id="10",name="job-10",partition="big",state="PENDING",user="alice"} 1.0' in body
    assert len([s for s in samples(body) if s.startswith("minihpc_job_info{")]) == 4  # one per live job
    assert 'minihpc_job_loss{job_id="7"} 0.5' in body
    assert 'minihpc_job_progress_ratio{job_id="7"} 0.5' in body
    assert 'minihpc_job_attempt{job_id="7"} 2.0' in body
    assert 'minihpc_job_step_phase_seconds{job_id="7",phase="forward"} 0.1' in body
    assert re.search(r'minihpc_job_rank_step_seconds\{job_id="7",node="n4",rank="1"\} 0\.3', body), body
    # Every live job counted by user and state, a series per user (not per job).
    assert 'minihpc_jobs_by_user{state="RUNNING",user="alice"} 1.0' in body
    assert 'minihpc_jobs_by_user{state="PENDING",user="alice"} 3.0' in body
    # No series but the info one has a free-text label (the per-user count: a user's name only),
    # and none has Prometheus's own `job` label.
    for line in samples(body):
        if line.startswith("minihpc_jobs_by_user{"):
            assert not re.search(r'[{,]name="', line), line
        elif not line.startswith("minihpc_job_info{"):
            assert not re.search(r'[{,](name|user)="', line), line
        assert not re.search(r'[{,]job="', line), line


def test_the_alerts_inputs_node_up_and_drained_startable_jobs_jobs_started_and_redis_memory():
    body = scrape(FakeStore())
    assert 'minihpc_node_up{node="n1"} 1.0' in body and 'minihpc_node_up{node="n3"} 0.0' in body
    # Drained whatever its state (n3 is DOWN too); minihpc_nodes counts it as down.
    assert 'minihpc_node_drained{node="n3"} 1.0' in body and 'minihpc_node_drained{node="n1"} 0.0' in body
    assert 'minihpc_nodes{state="down"} 1.0' in body and 'minihpc_nodes{state="drain"} 0.0' in body
    # Job 8 fits on idle n1; 9 is held and 10 needs more nodes than are up: only 8 could start.
    assert "minihpc_queue_startable_jobs 1.0" in body
    assert "minihpc_jobs_started_total 5.0" in body
    assert 'minihpc_jobs_ended_total{state="COMPLETED"} 3.0' in body
    assert 'minihpc_node_restarts_total{node="n3"} 2.0' in body
    assert "minihpc_redis_memory_used_bytes 1000.0" in body and "minihpc_redis_memory_max_bytes 0.0" in body


def test_nothing_startable_while_the_only_idle_node_is_drained():
    store = FakeStore()
    store.nodes[0] = NodeStatus("n1", "a", True, cpus=2, drain_reason="maintenance")
    body = scrape(store)
    assert "minihpc_queue_startable_jobs 0.0" in body
    assert 'minihpc_node_drained{node="n1"} 1.0' in body and 'minihpc_nodes{state="drain"} 1.0' in body


@pytest.mark.parametrize("missing", ["cluster", "memory"])
def test_the_rest_of_the_scrape_comes_without_a_cluster_record_or_redis_info(missing):
    store = FakeStore()
    if missing == "cluster":
        store.cluster = None
    else:
        store.memory = redis.ResponseError("NOPERM this user has no permissions to run the 'info' command")
    body = scrape(store)
    assert ("minihpc_queue_startable_jobs" in body) is (missing != "cluster")
    assert ("minihpc_redis_memory_used_bytes" in body) is (missing != "memory")
    assert 'minihpc_job_info{job_id="7"' in body and "minihpc_jobs_started_total 5.0" in body


def test_a_scrape_plans_the_queue_again_only_when_a_job_a_node_or_the_settings_changed(monkeypatch):
    # A deep queue planned at every scrape (every 5 s) cost the master's process a second a time.
    from minihpc.metrics import cluster

    planned = []
    plan = cluster.scheduler.plan
    monkeypatch.setattr(cluster.scheduler, "plan", lambda *a, **k: planned.append(1) or plan(*a, **k))
    store = FakeStore()
    registry = CollectorRegistry()
    registry.register(ClusterCollector(store))
    startable = lambda: re.search(r"^minihpc_queue_startable_jobs (\S+)$", generate_latest(registry).decode(), re.M)[1]  # noqa: E731
    assert (startable(), startable(), len(planned)) == ("1.0", "1.0", 1)  # nothing changed: the last plan's count
    store.pending = [job(8, held_by="alice")]
    store.revision += 1  # a write to a job record (scontrol hold)
    assert (startable(), len(planned)) == ("0.0", 2)
    store.pending = [job(8)]
    store.revision += 1
    store.nodes[0] = NodeStatus("n1", "a", True, cpus=2, drain_reason="maintenance")  # and a node drained
    assert (startable(), len(planned)) == ("0.0", 3)
