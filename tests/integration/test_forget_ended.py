"""The master forgets old ended jobs against a real redis-server: records, per-attempt results,
the spooled script and the logs go; the newest, a job a pending job depends on and an undecided
node failure stay; checkpoints are never touched."""

import logging
import threading
import time

import pytest
import redis

from minihpc.core.config import Settings
from minihpc.core.models import Job, JobState
from minihpc.core.outcome import NodeResult
from minihpc.core.retention import DAY
from minihpc.master import retention
from minihpc.state import keys
from minihpc.state.store import Store
from tests.conftest import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def store(redis_port, tmp_path):
    s = Store(redis.Redis(port=redis_port))
    s.set_cluster_info({"mode": "local", "spool_dir": str(tmp_path / "spool"), "log_dir": str(tmp_path / "logs"),
                        "checkpoint_dir": str(tmp_path / "models")})
    return s


def _files(tmp_path, job_id):
    """A job's spooled script, log and checkpoint folders, as submit and the agents leave them."""
    out = {}
    for kind in ("spool", "logs", "models"):
        folder = tmp_path / kind / f"job-{job_id}"
        folder.mkdir(parents=True)
        (folder / "x").write_text("x")
        out[kind] = folder
    return out


def _completed(store, tmp_path, job_id, dependency=(), attempts=1):
    """A job that ran ``attempts`` times on one node and completed, with its files."""
    store.add_job(Job(job_id, f"j{job_id}", "u", "s", "s", "x", dependency=list(dependency), submitted_at=time.time()))
    for attempt in range(1, attempts + 1):
        job = store.start(job_id, ["a"], lambda pipe, job: None)
        if attempt < attempts:
            assert store.transition(job_id, JobState.NODE_FAIL, "node a failed", only_from=[JobState.RUNNING])
            store.record_result(job_id, attempt, "a", NodeResult(143, "SIGTERM"))  # its teardown
            assert store.requeue(job_id, attempt, "Requeued")
        else:
            assert store.record_result(job_id, job.attempts, "a", NodeResult(0)).state is JobState.COMPLETED
    return _files(tmp_path, job_id)


def _remembered(store, job_id):
    return store.r.exists(keys.job(job_id)) == 1 and store.r.zscore(keys.JOBS_ENDED, job_id) is not None


def test_the_oldest_beyond_the_count_are_forgotten_with_their_files(store, tmp_path, caplog):
    folders = {i: _completed(store, tmp_path, i, attempts=2 if i == 1 else 1) for i in range(1, 6)}
    assert store.r.exists(keys.job_results(1, 1), keys.job_results(1, 2)) == 2
    store.add_job(Job(6, "waits", "u", "s", "s", "x", dependency=[2], submitted_at=time.time()))  # pending on 2

    with caplog.at_level(logging.INFO, logger="minihpc.master.retention"):
        retention.forget_ended(store, Settings(keep_ended_jobs=2, keep_ended_days=0), time.time())

    for gone in (1, 3):
        assert not _remembered(store, gone)
        assert store.r.exists(keys.job_results(gone, 1), keys.job_results(gone, 2), keys.job_starts(gone)) == 0
        assert not folders[gone]["spool"].exists() and not folders[gone]["logs"].exists()
        assert (folders[gone]["models"] / "x").exists()  # checkpoints are the user's
    for kept in (2, 4, 5):  # 2: job 6 depends on it; 4 and 5: the newest two
        assert _remembered(store, kept) and store.job_results(kept, 1)
        assert folders[kept]["spool"].exists() and folders[kept]["logs"].exists()
    assert store.get_job(6).state is JobState.PENDING
    assert "master: forgot 2 ended jobs (kept the newest 2, no age limit)" in caplog.messages


def test_jobs_older_than_the_days_are_forgotten_and_a_lost_record_leaves_the_set(store, tmp_path, caplog):
    folders = {i: _completed(store, tmp_path, i) for i in range(1, 4)}
    now = time.time()
    store.r.zadd(keys.JOBS_ENDED, {1: now - 31 * DAY, 2: now - 29 * DAY})  # as if they ended then
    store.r.zadd(keys.JOBS_ENDED, {99: now - 40 * DAY})  # its record is gone (a restore, a crash)

    with caplog.at_level(logging.INFO, logger="minihpc.master.retention"):
        retention.forget_ended(store, Settings(keep_ended_jobs=100, keep_ended_days=30), now)

    assert not _remembered(store, 1) and not folders[1]["spool"].exists() and not folders[1]["logs"].exists()
    assert store.r.zscore(keys.JOBS_ENDED, 99) is None
    assert _remembered(store, 2) and _remembered(store, 3)
    assert "master: forgot 2 ended jobs (kept the newest 100, none older than 30 days)" in caplog.messages
    caplog.clear()
    retention.forget_ended(store, Settings(keep_ended_jobs=100, keep_ended_days=30), now)  # nothing left to do
    assert not caplog.messages and _remembered(store, 2)


def test_an_undecided_node_failure_is_kept_for_its_requeue(store, tmp_path):
    _completed(store, tmp_path, 1)
    store.add_job(Job(2, "nf", "u", "s", "s", "x", submitted_at=time.time()))
    store.start(2, ["a"], lambda pipe, job: None)
    assert store.transition(2, JobState.NODE_FAIL, "node a failed", only_from=[JobState.RUNNING])
    store.r.zadd(keys.JOBS_ENDED, {2: 1.0})  # the oldest of all

    retention.forget_ended(store, Settings(keep_ended_jobs=1, keep_ended_days=0), time.time())
    job, over = store.job_settled(2)
    assert _remembered(store, 2) and job.state is JobState.NODE_FAIL and not over  # still undecided
    assert store.requeue(2, 1, "Requeued")


def test_a_backlog_is_forgotten_a_batch_a_pass(store, tmp_path, monkeypatch):
    monkeypatch.setattr(retention, "PRUNE_BATCH", 2)
    for i in range(1, 6):
        _completed(store, tmp_path, i)
    settings, now = Settings(keep_ended_jobs=1, keep_ended_days=0), time.time()
    assert retention.forget_ended(store, settings, now) == now + retention.PRUNE_BACKLOG_INTERVAL
    assert [i for i in range(1, 6) if _remembered(store, i)] == [3, 4, 5]
    assert retention.forget_ended(store, settings, now) == now + retention.PRUNE_BACKLOG_INTERVAL
    assert retention.forget_ended(store, settings, now) == now + retention.PRUNE_INTERVAL
    assert [i for i in range(1, 6) if _remembered(store, i)] == [5]


def test_the_master_loop_forgets_as_it_runs(store, tmp_path, redis_port):
    from minihpc.master.loop import Master

    folders = {i: _completed(store, tmp_path, i) for i in range(1, 4)}
    master = Master(Settings(redis_url=f"redis://127.0.0.1:{redis_port}/0", keep_ended_jobs=1, keep_ended_days=0))
    thread = threading.Thread(target=master.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: not _remembered(store, 2) and not folders[2]["logs"].exists(), timeout=10,
                   message="the master to forget jobs 1 and 2")
    finally:
        master.stop.set()
        thread.join(timeout=10)
    assert not _remembered(store, 1) and _remembered(store, 3)


def test_folders_another_process_could_not_remove_are_removed_by_the_master(store, tmp_path, caplog):
    # The API (a uid of its own on Ansible hosts) forgot jobs 11 and 12 but could not remove the
    # spool folder a node had lent to the job's group: it named them in keys.FILES_LEFT.
    folders = {i: _files(tmp_path, i) for i in (11, 12)}
    (folders[12]["spool"] / "tree").mkdir()
    (folders[12]["spool"] / "tree" / "train.py").write_text("print()")
    store.leave_files(11)
    store.leave_files(12)

    with caplog.at_level(logging.INFO, logger="minihpc.master.retention"):
        assert retention.remove_left_files(store) == 2

    for i in (11, 12):
        assert not folders[i]["spool"].exists() and not folders[i]["logs"].exists()
        assert (folders[i]["models"] / "x").exists()  # checkpoints are the user's
    assert store.r.scard(keys.FILES_LEFT) == 0
    assert "master: removed the folders of 2 forgotten job(s)" in caplog.messages
    assert store.take_left_files(10) == []
