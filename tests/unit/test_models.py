import dataclasses

import pytest

from minihpc.core.models import (
    Job,
    JobState,
    NodeState,
    NodeStatus,
    Priority,
    can_transition,
)


def test_codes_are_slurms():
    assert [s.code for s in JobState] == ["PD", "R", "CD", "F", "CA", "TO", "NF"]


@pytest.mark.parametrize(
    "a,b",
    [
        (JobState.PENDING, JobState.RUNNING),
        (JobState.PENDING, JobState.CANCELLED),
        (JobState.RUNNING, JobState.COMPLETED),
        (JobState.RUNNING, JobState.FAILED),
        (JobState.RUNNING, JobState.TIMEOUT),
        (JobState.RUNNING, JobState.NODE_FAIL),
        (JobState.RUNNING, JobState.CANCELLED),
        (JobState.NODE_FAIL, JobState.PENDING),
    ],
)
def test_allowed_transitions(a, b):
    assert can_transition(a, b)


@pytest.mark.parametrize(
    "a,b",
    [
        (JobState.PENDING, JobState.COMPLETED),
        (JobState.COMPLETED, JobState.RUNNING),
        (JobState.CANCELLED, JobState.RUNNING),
        (JobState.FAILED, JobState.COMPLETED),
        (JobState.TIMEOUT, JobState.CANCELLED),
        (JobState.COMPLETED, JobState.CANCELLED),
    ],
)
def test_ended_jobs_cannot_change(a, b):
    assert not can_transition(a, b)


def test_job_round_trips_through_redis_hash():
    job = Job(
        id=7,
        name="train",
        user="ada",
        script="/spool/job-7/t.py",
        script_source="/home/ada/t.py",
        script_sha256="ab" * 32,
        args=["--lr", "0.1"],
        nodes_requested=3,
        priority=Priority.HIGH,
        time_limit=90.0,
        dependency=[5, 6],
        state=JobState.FAILED,
        exit_code=137,
        signal="SIGKILL",
        nodes=["master-node", "worker-node-1"],
        submitted_at=1.5,
        started_at=2.5,
    )
    assert Job.from_record(job.to_record()) == job


def test_node_state_precedence():
    assert NodeStatus("n", "a", alive=False, job=3).state is NodeState.DOWN
    assert NodeStatus("n", "a", alive=True, job=3, drain_reason="x").state is NodeState.ALLOC
    assert NodeStatus("n", "a", alive=True, drain_reason="x").state is NodeState.DRAIN
    assert NodeStatus("n", "a", alive=True).state is NodeState.IDLE


def test_a_compact_record_leaves_out_the_defaults_and_reads_back_the_same_job():
    fresh = Job(7, "train", "alice", "s.sh", "s.sh", "x", environment={"A": "1"}, environment_id="ab" * 16)
    record = fresh.to_record(compact=True)
    assert {"id", "state", "attempts", "reason"} <= set(record), "what is read alone (HGET) is always there"
    assert "exit_code" not in record and "held_by" not in record and "environment" not in record
    assert len(record) < len(fresh.to_record()) / 2
    assert Job.from_record(record) == dataclasses.replace(fresh, environment={})  # the environment is apart

    ran = Job(8, "train", "bob", "s.sh", "s.sh", "x", nodes_requested=2, exit_code=3, signal="SIGKILL", cold=True,
              state=JobState.FAILED, attempts=2, nodes=["a", "b"], dependency=["afterok:3"], time_limit=60.0)
    assert Job.from_record(ran.to_record(compact=True)) == ran


def test_a_record_reads_back_as_the_constructor_builds_it_without_sharing_defaults():
    """Job.from_record builds a job without calling __init__ (squeue reads 100,000): it must be
    what Job(**fields) builds, each job with lists and dicts of its own."""
    record = Job(9, "t", "carol", "s.sh", "s.sh", "x").to_record(compact=True)
    first, second = Job.from_record(record), Job.from_record(record)
    assert first == Job(9, "t", "carol", "s.sh", "s.sh", "x") and vars(first) == vars(second)
    first.nodes.append("a")
    first.args.append("--x")
    assert second.nodes == [] and second.args == []
    assert Job.from_record({**record, "not_a_field": "1"}) == second  # a field of a newer version: left alone
    with pytest.raises(TypeError, match="without user"):
        Job.from_record({k: v for k, v in record.items() if k != "user"})
