"""Submitted environments are kept once however many jobs carry them (state.environments), on a
real redis-server: an array's tasks and a shell's jobs share one copy, every reader still sees
each job's variables, the job's launch gets them, and the last record forgotten takes the copy."""

import time

import pytest

from minihpc.core.models import Job, JobState
from minihpc.core.outcome import NodeResult
from rq.job import Job as RqJob

from minihpc.core.models import NodeStatus
from minihpc.master.dispatch import dispatcher
from minihpc.state import keys
from minihpc.state.pending import PendingCache, RunningCache
from minihpc.state.queues import SERIALIZER, launch_id

pytestmark = pytest.mark.integration

SHELL = {"WANDB_PROJECT": "mnist", "HF_TOKEN": "hf_secret", "LANG": "C.UTF-8"}


def _job(job_id: int, env: dict, **kw) -> Job:
    return Job(job_id, f"j{job_id}", "alice", "s.sh", "s.sh", "x", environment=dict(env), submitted_at=time.time(), **kw)


def _stored(store) -> dict[str, int]:
    """Every stored environment: its key -> how many records name it."""
    return {k.decode(): int(store.r.hget(k, "refs")) for k in store.r.scan_iter(keys.ENVIRONMENT.format("*"))}


def test_an_array_and_a_shells_jobs_keep_one_copy_and_every_reader_sees_each_jobs_variables(store):
    store.add_jobs([_job(i, SHELL, array_job_id=3, array_task_id=i - 1) for i in (1, 2, 3)])
    store.add_job(_job(4, dict(reversed(list(SHELL.items())))))  # the same variables, another order
    store.add_job(_job(5, {"OTHER": "1"}))
    store.add_job(_job(6, {}))  # --export=NONE

    assert sorted(_stored(store).values()) == [1, 4]
    record = {k.decode(): v.decode() for k, v in store.r.hgetall(keys.job(1)).items()}
    assert "hf_secret" not in str(record), "the record itself holds no value of the environment"
    assert record.get("environment", "") == "" and len(record["environment_id"]) == 32

    assert store.get_job(2).environment == SHELL
    assert [j.environment for j in store.get_jobs([4, 5, 6])] == [SHELL, {"OTHER": "1"}, {}]
    assert store.job_settled(3)[0].environment == SHELL
    assert store.get_job(1).to_json()["environment"] == sorted(SHELL)
    assert "environment_id" not in store.get_job(1).to_json()


def test_a_started_job_launches_with_its_variables(store):
    store.add_job(_job(7, SHELL))
    nodes = {"a": NodeStatus("a", "10.0.0.1", True)}
    store.start(7, ["a"], dispatcher(store, nodes, {"log_dir": "/l", "checkpoint_dir": "/c"}))
    queued = RqJob.fetch(launch_id(7, 1, "a"), connection=store.connection, serializer=SERIALIZER)
    assert queued.kwargs["environment"] == SHELL
    assert store.get_job(7).state is JobState.RUNNING and store.get_job(7).environment == SHELL


def test_the_last_record_forgotten_takes_the_environment_and_a_new_submit_brings_it_back(store):
    store.add_jobs([_job(i, SHELL) for i in (1, 2)])
    for job_id in (1, 2):
        store.start(job_id, [f"n{job_id}"], lambda pipe, job: None)
        store.record_result(job_id, 1, f"n{job_id}", NodeResult(0))
    [key] = _stored(store)

    assert store.forget_ended(1)
    assert _stored(store) == {key: 1}
    store.delete_job(store.get_job(2))
    assert _stored(store) == {}, "no record names it: it is gone"

    store.add_job(_job(3, SHELL))
    assert _stored(store) == {key: 1}
    assert store.get_job(3).environment == SHELL


def test_the_kept_queues_of_the_master_and_the_api_see_each_jobs_variables(store):
    """A long-lived reader's pending and running records (state.pending), read whole and then
    by the changes stream: what GET /jobs lists."""
    pending, running = PendingCache(), RunningCache()
    store.add_job(_job(1, SHELL))
    assert [j.environment for j in pending.read(store)] == [SHELL]
    store.add_jobs([_job(2, {"OTHER": "1"}), _job(3, SHELL)])
    assert sorted((j.id, sorted(j.environment.items())) for j in pending.read(store)) == [
        (1, sorted(SHELL.items())), (2, [("OTHER", "1")]), (3, sorted(SHELL.items()))]
    running.read(store)
    store.start(3, ["a"], lambda pipe, job: None)
    assert [j.environment for j in running.read(store)] == [SHELL]
