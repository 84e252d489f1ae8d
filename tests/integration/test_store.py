"""The store's atomic steps against a real redis-server, with no agents: reservations of
several nodes are all-or-nothing, and nodes are released only when the job is over. Each test
runs on both clients the store is given: redis-py (the daemons') and state.wire (the commands')."""

import threading

import pytest

from minihpc.core.models import JobState
from minihpc.core.outcome import NodeResult
from minihpc.state import keys

from tests.integration.conftest import add_pending

pytestmark = pytest.mark.integration


@pytest.fixture(params=["redis-py", "wire"])
def store(request, redis_port):
    from minihpc.state.connect import connect, connect_command
    from minihpc.state.store import Store

    url = f"redis://127.0.0.1:{redis_port}/0"
    return Store(connect(url) if request.param == "redis-py" else connect_command(url))


def test_competing_reservations_for_overlapping_nodes_never_split(store):
    for n in range(200):
        store.r.flushdb()
        add_pending(store, 1)
        add_pending(store, 2)
        results = {}
        barrier = threading.Barrier(2)

        def go(job_id, nodes):
            barrier.wait()
            results[job_id] = store.start(job_id, nodes, lambda pipe, job: None)

        threads = [
            threading.Thread(target=go, args=(1, ["a", "b"])),
            threading.Thread(target=go, args=(2, ["b", "c"])),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [j for j, r in results.items() if r is not None]
        assert len(winners) == 1, results
        winner = winners[0]
        loser = 2 if winner == 1 else 1
        held = {n: store.r.get(keys.node_alloc(n)) for n in "abc"}
        expected_nodes = ["a", "b"] if winner == 1 else ["b", "c"]
        assert {n for n, v in held.items() if v is not None} == set(expected_nodes)
        assert store.get_job(loser).state is JobState.PENDING
        assert store.get_job(winner).state is JobState.RUNNING


def test_nodes_stay_held_until_every_node_of_the_job_reports(store):
    add_pending(store, 1, nodes=2)
    job = store.start(1, ["a", "b"], lambda pipe, job: None)
    assert store.record_result(1, job.attempts, "a", NodeResult(0)) is None
    assert store.r.get(keys.node_alloc("a")) == b"1"  # a finished but the job has not
    outcome = store.record_result(1, job.attempts, "b", NodeResult(0))
    assert outcome.state is JobState.COMPLETED
    assert store.r.get(keys.node_alloc("a")) is None and store.r.get(keys.node_alloc("b")) is None
    assert store.r.sismember(keys.JOBS_ACTIVE, 1) == 0
    assert store.r.zscore(keys.JOBS_ENDED, 1) is not None


def test_a_failure_is_held_then_ends_the_job_and_later_reports_only_release(store):
    from minihpc.core.outcome import held_failure

    add_pending(store, 1, nodes=2)
    job = store.start(1, ["a", "b"], lambda pipe, job: None)
    assert store.record_result(1, job.attempts, "b", NodeResult(134, "SIGABRT")) is None
    held = store.get_job(1)
    assert held.state is JobState.RUNNING and held.first_failure == "b" and held.failing_since
    assert store.r.get(keys.node_alloc("b")) == b"1"  # held with the job until it is decided
    outcome = held_failure(held, store.job_results(1, held.attempts), held.failing_since + 5, grace=4)
    assert store.end_held_failure(held, outcome)
    assert store.r.get(keys.node_alloc("b")) is None  # it had reported: freed with the end
    assert store.r.get(keys.node_alloc("a")) == b"1"  # its ranks are still being torn down
    assert store.record_result(1, job.attempts, "a", NodeResult(143, "SIGTERM")) is None
    assert store.r.get(keys.node_alloc("a")) is None
    final = store.get_job(1)
    assert (final.state, final.exit_code, final.failed_node) == (JobState.FAILED, 134, "b")


def test_a_node_failure_frees_the_nodes_that_reported_and_requeues(store):
    add_pending(store, 1, nodes=3)
    job = store.start(1, ["a", "b", "c"], lambda pipe, job: None)
    store.record_result(1, job.attempts, "a", NodeResult(1))  # a peer died under its collective
    assert store.transition(1, JobState.NODE_FAIL, "node c failed", only_from=[JobState.RUNNING], failed_node="c")
    assert store.r.get(keys.node_alloc("a")) is None
    assert store.r.get(keys.node_alloc("b")) == b"1"  # still tearing down
    assert [j.id for j in store.node_failed_jobs()] == [1]
    assert store.requeue(1, job.attempts, "Requeued")
    assert not store.requeue(1, job.attempts, "Requeued")  # once per failed attempt
    again = store.get_job(1)
    assert (again.state, again.requeues, again.ended_at) == (JobState.PENDING, 1, None)
    assert store.r.sismember(keys.JOBS_PENDING, 1) and store.r.zscore(keys.JOBS_ENDED, 1) is None
    assert store.node_failed_jobs() == []
    store.record_result(1, job.attempts, "b", NodeResult(143, "SIGTERM"))  # the old attempt's teardown
    assert store.r.get(keys.node_alloc("b")) is None
    assert store.get_job(1).state is JobState.PENDING  # it changed no state
    store.release_node("c")  # c's agent restarted
    restarted = store.start(1, ["a", "b", "c"], lambda pipe, job: None)
    assert restarted.attempts == 2
    # A late report of attempt 1 (a node paused through the failure) is fenced off too.
    assert store.record_result(1, 1, "c", NodeResult(0)) is None
    assert not store.transition(1, JobState.FAILED, "late", attempt=1)
    assert store.get_job(1).state is JobState.RUNNING
    assert store.r.get(keys.node_alloc("c")) == b"1"  # held by attempt 2


def test_an_incident_is_written_with_the_change_it_reports_and_never_without_it(store):
    add_pending(store, 1, nodes=1)
    job = store.start(1, ["a"], lambda pipe, job: None)
    stalled = {"kind": "stalled", "job": 1, "silent_for": 12.0}
    assert store.transition(1, JobState.NODE_FAIL, "no progress", only_from=[JobState.RUNNING], incident=stalled)
    assert not store.transition(1, JobState.NODE_FAIL, "no progress", only_from=[JobState.RUNNING], incident=stalled)
    requeued = {"kind": "requeued", "node": "a", "job": 1, "attempt": job.attempts, "reason": "no progress"}
    assert store.requeue(1, job.attempts, "Requeued", requeued)
    assert not store.requeue(1, job.attempts, "Requeued", requeued)  # refused: no second incident
    store.drain("a", "bad disk", {"kind": "drained", "node": "a", "reason": "bad disk"})
    assert store.undrain("a", {"kind": "resumed", "node": "a"})
    kinds = [(i["kind"], i["job"], i["node"]) for i in reversed(store.incidents())]
    assert kinds == [("stalled", 1, None), ("requeued", 1, "a"), ("drained", None, "a"), ("resumed", None, "a")], kinds
    assert store.get_job(1).state is JobState.PENDING and store.r.get(keys.node_drain("a")) is None


def test_a_node_failure_is_not_an_end_until_the_master_decides_and_a_requeued_one_never_was(store):
    """minihpc wait, logs -f and the API's stream end on ended_for_good. A NODE_FAIL job read
    just before the master requeued it must not count as ended: the requeue clears the
    undecided mark at once, so a second, separate read of the mark said "decided" (seen: wait
    returned while the requeued job ran again)."""
    from minihpc.client.jobs import ended_for_good, wait

    add_pending(store, 1, nodes=1)
    store.start(1, ["a"], lambda pipe, job: None)
    assert store.transition(1, JobState.NODE_FAIL, "node a failed", only_from=[JobState.RUNNING], failed_node="a")
    failed = store.get_job(1)
    assert store.job_settled(1)[1] is False and not ended_for_good(store, failed)
    assert store.requeue(1, failed.attempts, "Requeued")
    assert not ended_for_good(store, failed)  # the record read before the requeue
    store.release_node("a")
    store.start(1, ["a"], lambda pipe, job: None)
    assert not ended_for_good(store, failed) and wait(store, 1, timeout=0.3) == (store.get_job(1), False)
    assert store.transition(1, JobState.NODE_FAIL, "node a failed", only_from=[JobState.RUNNING], failed_node="a")
    store.settle_node_failure(1)  # the master decided: it stays failed
    job, over = wait(store, 1, timeout=5)
    assert over and (job.state, job.attempts) == (JobState.NODE_FAIL, 2) and ended_for_good(store, job)


def test_ended_jobs_refuse_new_states(store):
    add_pending(store, 1, nodes=1)
    assert store.transition(1, JobState.CANCELLED, "by test")
    assert not store.transition(1, JobState.RUNNING, "x")
    assert store.start(1, ["a"], lambda pipe, job: None) is None
    assert store.get_job(1).state is JobState.CANCELLED


def test_reconcile_puts_every_job_in_the_set_its_state_says(store):
    add_pending(store, 1, nodes=1)
    add_pending(store, 2, nodes=1)
    store.r.set(keys.JOB_SEQ, 2)
    store.transition(2, JobState.CANCELLED, "test")
    store.r.srem(keys.JOBS_PENDING, 1)  # as if a write was lost
    store.r.sadd(keys.JOBS_ACTIVE, 2)
    fixed = store.reconcile()
    assert set(fixed) == {1, 2}
    assert store.r.sismember(keys.JOBS_PENDING, 1)
    assert not store.r.sismember(keys.JOBS_ACTIVE, 2) and store.r.zscore(keys.JOBS_ENDED, 2) is not None
    assert store.reconcile() == {}


def test_the_masters_pending_cache_sees_every_change_and_rereads_only_changed_records(store):
    from minihpc.core.job_control import Update
    from minihpc.core.models import Priority

    for job_id in (1, 2, 3, 5):
        add_pending(store, job_id)
    cache: dict = {}
    first = store.pending_jobs(cache)
    assert sorted(j.id for j in first) == [1, 2, 3, 5] and set(cache) == {1, 2, 3, 5}

    store.hold(1, "u")
    store.update_job(2, Update(2, priority=Priority.HIGH), admin=True, capacity=3)
    store.set_reasons({5: "Priority"})
    add_pending(store, 4)
    store.start(3, ["a", "b"], lambda pipe, job: None)
    cached = {j.id: j for j in store.pending_jobs(cache)}
    fresh = {j.id: j for j in store.pending_jobs()}
    assert cached == fresh and sorted(cached) == [1, 2, 4, 5] and set(cache) == {1, 2, 4, 5}
    assert cached[1].held and cached[2].priority is Priority.HIGH and cached[5].reason == "Priority"

    # A record is read again only when its revision changed: a write that bypasses the store
    # (and so its revision) is not seen -- every write of the product goes through write_job.
    store.r.hset(keys.job(4), "name", "renamed behind the store's back")
    assert {j.id: j.name for j in store.pending_jobs(cache)}[4] == "j4"
    store.release(1)
    assert not {j.id: j for j in store.pending_jobs(cache)}[1].held


def test_a_pending_cache_follows_the_changes_stream_and_reads_whole_when_it_cannot_tell(store):
    """Issue 38: after one whole read, a reader reads only the records the stream names; what it
    returns is always what a fresh read returns, also when the stream was trimmed or deleted."""
    from minihpc.state import pending
    from minihpc.state.pending import PendingCache

    for job_id in (1, 2, 3):
        add_pending(store, job_id)
    cache = PendingCache()
    assert sorted(j.id for j in cache.read(store)) == [1, 2, 3]
    assert cache.cursor == store.latest_change()[0] != pending.START

    original = store.pending_jobs

    def fresh():
        return {j.id: (j.name, j.held, j.state) for j in original()}

    reads = []
    store.pending_jobs = lambda records=None: reads.append(1) or original(records)
    try:
        store.hold(1, "u")
        add_pending(store, 4)
        store.start(3, ["a", "b"], lambda pipe, job: None)
        got = {j.id: (j.name, j.held, j.state) for j in cache.read(store)}
        assert got == fresh() and sorted(got) == [1, 2, 4] and got[1][1]
        assert reads == [], "the changes were read from the stream, not the whole queue"
        assert cache.read(store) and reads == [], "nothing changed: nothing read"

        store.r.delete(keys.JOBS_CHANGES)  # the entry it stopped at is gone: read whole
        add_pending(store, 5)
        assert sorted(j.id for j in cache.read(store)) == [1, 2, 4, 5] and reads == [1]
        store.transition(2, JobState.CANCELLED, "test")
        assert sorted(j.id for j in cache.read(store)) == [1, 4, 5] and reads == [1]

        # A writer older than the stream bumps the revisions but names no job: read whole.
        with store.r.pipeline() as pipe:
            pipe.hset(keys.job(4), "name", "renamed by an old client")
            pipe.hincrby(keys.job(4), keys.JOB_REVISION, 1)
            pipe.incr(keys.JOBS_REVISION)
            pipe.execute()
        assert {j.id: j.name for j in cache.read(store)}[4] == "renamed by an old client" and reads == [1, 1]
        assert cache.read(store) and reads == [1, 1]
    finally:
        store.pending_jobs = original


def test_a_submit_checked_against_recently_read_nodes_is_never_refused_by_a_stale_read(store, tmp_path):
    """Issue 38: the API checks submits against nodes read at most 2 s ago (a thousand nodes
    took longer to read than the rest of a submit). A node that registered since must not get
    a job refused: a refusal is made again on the nodes as they are."""
    from minihpc.client.submit import Request, submit
    from minihpc.core.errors import UsageError
    from minihpc.state.nodes import RecentNodes

    store.set_cluster_info({"spool_dir": str(tmp_path / "spool"), "log_dir": str(tmp_path / "logs")})
    store.register_node("n1", "n1", cpus=2, memory_bytes=2**30, ttl=30)
    script = tmp_path / "job.py"
    script.write_text("print(1)\n")
    recent = RecentNodes(max_age=3600)
    cluster, nodes = recent.read(store)
    assert [n.name for n in nodes] == ["n1"] and cluster["spool_dir"] == str(tmp_path / "spool")
    store.register_node("n2", "n2", cpus=2, memory_bytes=2**30, ttl=30)
    job = submit(store, Request(script=str(script), nodes=2, user="u"), lambda: recent.read(store))
    assert store.get_job(job.id).nodes_requested == 2 and len(recent.read(store)[1]) == 1, "the cache itself stays"
    with pytest.raises(UsageError, match="3 node"):
        submit(store, Request(script=str(script), nodes=3, user="u"), lambda: recent.read(store))


def test_jobs_started_together_start_all_in_one_transaction_but_those_that_cannot(store):
    """Issue 38: a pass starts its jobs in batches (one append-only-file sync each), yet each
    job is judged as alone: one held, one whose node was taken meanwhile, one gone stay as
    they are, and the others are RUNNING with their nodes and launches."""
    for job_id in (1, 2, 3, 4):
        add_pending(store, job_id, nodes=1)
    store.hold(2, "u")
    store.r.set(keys.node_alloc("c"), 99)  # taken since the plan was made
    launched = []
    add_pending(store, 6, nodes=1)
    started = store.start_many([(1, ["a"]), (2, ["b"]), (3, ["c"]), (5, ["e"]), (4, ["d"]), (6, ["a"])],
                               lambda pipe, job: launched.append(job.id))
    assert [j.id for j in started] == [1, 4] and launched == [1, 4], "6 was given 1's node: never both"
    assert store.get_job(6).state is JobState.PENDING
    assert store.get_job(1).state is JobState.RUNNING and store.get_job(4).nodes == ["d"]
    assert store.get_job(2).state is JobState.PENDING and store.get_job(3).state is JobState.PENDING
    assert store.node_job("a") == 1 and store.node_job("d") == 4 and store.node_job("b") is None
    assert store.r.sismember(keys.JOBS_ACTIVE, 4) and not store.r.sismember(keys.JOBS_PENDING, 4)


def test_a_running_cache_follows_jobs_that_start_and_end(store):
    """The master reads the running jobs twice a pass through the changes stream too."""
    from minihpc.core.outcome import NodeResult
    from minihpc.state.pending import RunningCache

    for job_id in (1, 2, 3):
        add_pending(store, job_id, nodes=1)
    cache = RunningCache()
    assert cache.read(store) == []
    store.start_many([(1, ["a"]), (2, ["b"])], lambda pipe, job: None)
    assert sorted(j.id for j in cache.read(store)) == [1, 2]
    store.record_result(1, 1, "a", NodeResult(exit_code=0))
    store.start(3, ["c"], lambda pipe, job: None)
    got = {j.id: j.nodes for j in cache.read(store)}
    assert got == {2: ["b"], 3: ["c"]} == {j.id: j.nodes for j in store.running_jobs()}
