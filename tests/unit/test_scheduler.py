"""Placement and backfill decisions, on hand-built cluster snapshots."""

from minihpc.core.models import Job, JobState, NodeStatus, Priority
from minihpc.core.scheduler import Profile, lost, overdue, plan

NOW = 1000.0


def node(name, job=None, alive=True, drain=None):
    return NodeStatus(name, name, alive=alive, job=job, drain_reason=drain)


def cluster(n=3, busy=None):
    busy = busy or {}
    return [node(f"n{i}", job=busy.get(f"n{i}")) for i in range(1, n + 1)]


def pending(job_id, nodes=1, priority=Priority.NORMAL, limit=None, submitted=None, deps=()):
    return Job(
        job_id, f"j{job_id}", "u", "s", "s", "x",
        nodes_requested=nodes, priority=priority, time_limit=limit,
        submitted_at=submitted if submitted is not None else float(job_id),
        dependency=list(deps),
    )


def running(job_id, nodes, started=NOW - 10, limit=None):
    job = pending(job_id, len(nodes), limit=limit)
    job.state, job.nodes, job.started_at = JobState.RUNNING, list(nodes), started
    return job


def test_a_gang_gets_all_its_nodes_at_once_or_nothing():
    p = plan([pending(1, nodes=3)], cluster(3, busy={"n3": 9}), [running(9, ["n3"])], {}, NOW)
    assert p.starts == []
    assert p.reasons == {1: "Resources"}
    p = plan([pending(1, nodes=3)], cluster(3), [], {}, NOW)
    assert p.starts == [(1, ["n1", "n2", "n3"])]


def test_priority_then_submit_time():
    jobs = [
        pending(1, nodes=2, priority=Priority.LOW, submitted=1),
        pending(2, nodes=2, priority=Priority.NORMAL, submitted=2),
        pending(3, nodes=2, priority=Priority.HIGH, submitted=3),
        pending(4, nodes=2, priority=Priority.HIGH, submitted=4),
    ]
    p = plan(jobs, cluster(3), [], {}, NOW)
    assert [s[0] for s in p.starts] == [3]
    assert p.reasons == {4: "Resources", 2: "Priority", 1: "Priority"}


def test_small_job_does_not_jump_ahead_without_time_limits():
    # n1 is busy forever (no limit); the 3-node high job waits; a 1-node low job would
    # take a node the high job needs the moment n1 frees up, so it must wait too.
    nodes = cluster(3, busy={"n1": 9})
    jobs = [pending(1, nodes=3, priority=Priority.HIGH), pending(2, nodes=1, priority=Priority.LOW, limit=5)]
    p = plan(jobs, nodes, [running(9, ["n1"])], {}, NOW)
    assert p.starts == []
    assert p.reasons[2] == "Priority"


def test_backfill_when_the_small_job_ends_before_the_big_one_could_start():
    nodes = cluster(3, busy={"n1": 9})
    blocker = running(9, ["n1"], started=NOW - 10, limit=60)  # frees n1 at NOW+50
    short = pending(2, nodes=1, priority=Priority.LOW, limit=30)  # ends at NOW+30
    p = plan([pending(1, nodes=3, priority=Priority.HIGH), short], nodes, [blocker], {}, NOW)
    assert p.starts == [(2, ["n2"])]
    assert p.reasons[1] == "Resources"


def test_no_backfill_that_would_delay_the_waiting_job():
    nodes = cluster(3, busy={"n1": 9})
    blocker = running(9, ["n1"], started=NOW - 10, limit=60)  # frees n1 at NOW+50
    long = pending(2, nodes=1, priority=Priority.LOW, limit=120)  # would end at NOW+120
    unlimited = pending(3, nodes=1, priority=Priority.LOW)
    p = plan([pending(1, nodes=3, priority=Priority.HIGH), long, unlimited], nodes, [blocker], {}, NOW)
    assert p.starts == []


def test_backfill_onto_nodes_the_waiting_job_cannot_use():
    # 4 nodes, one busy until NOW+50; the top job needs 2 and gets n2+n3 now... so make it
    # need 4: at NOW+50 all 4 are free. A 1-node job of 100s would delay it; of 40s not.
    nodes = cluster(4, busy={"n1": 9})
    blocker = running(9, ["n1"], limit=60)
    jobs = [
        pending(1, nodes=4, priority=Priority.HIGH),
        pending(2, nodes=1, limit=100),
        pending(3, nodes=2, limit=40),
    ]
    p = plan(jobs, nodes, [blocker], {}, NOW)
    assert p.starts == [(3, ["n2", "n3"])]


def test_every_waiting_job_is_protected_not_only_the_first():
    # n1..n2 busy until NOW+50, n3 idle. Job 1 (2 nodes) can start at NOW+50 on n1+n2 ...
    # job 2 (3 nodes) is promised NOW+50+20. A low job of 100s on n3 would delay job 2.
    nodes = cluster(3, busy={"n1": 9, "n2": 9})
    blocker = running(9, ["n1", "n2"], limit=60)
    jobs = [
        pending(1, nodes=3, priority=Priority.HIGH, limit=20),
        pending(2, nodes=3, priority=Priority.NORMAL, limit=20),
        pending(3, nodes=1, priority=Priority.LOW, limit=100),
        pending(4, nodes=1, priority=Priority.LOW, limit=30),
    ]
    p = plan(jobs, nodes, [blocker], {}, NOW)
    assert p.starts == [(4, ["n3"])]


def test_dependencies():
    jobs = [pending(2, deps=[1]), pending(3, deps=[1, 5]), pending(4, deps=[6])]
    states = {1: JobState.RUNNING, 5: JobState.COMPLETED, 6: JobState.FAILED}
    p = plan(jobs, cluster(3), [], states, NOW)
    assert p.reasons == {2: "Dependency", 3: "Dependency"}
    assert p.cancels == {4: "DependencyNeverSatisfied"}
    states[1] = JobState.COMPLETED
    p = plan(jobs[:2], cluster(3), [], states, NOW)
    assert [s[0] for s in p.starts] == [2, 3]


def test_jobs_larger_than_the_live_cluster_do_not_block_others():
    nodes = [node("n1"), node("n2", alive=False), node("n3", drain="bad disk")]
    p = plan([pending(1, nodes=2, priority=Priority.HIGH), pending(2)], nodes, [], {}, NOW)
    assert p.reasons == {1: "ReqNodeNotAvail"}
    assert p.starts == [(2, ["n1"])]


def test_profile_earliest_start():
    prof = Profile(0.0, {"a": 0.0, "b": 10.0, "c": 20.0})  # 1 free now, 2 at t=10, 3 at t=20
    assert prof.earliest(1, 100) == 0.0
    assert prof.earliest(2, 5) == 10.0
    assert prof.earliest(3, float("inf")) == 20.0
    assert prof.earliest(4, 1) is None
    prof.reserve(10.0, 2, 15)  # 2 nodes held 10..25
    assert prof.earliest(2, 1) == 25.0
    assert prof.earliest(1, 10) == 0.0
    assert prof.earliest(1, 11) == 20.0


def test_overdue_and_lost():
    a = running(1, ["n1"], started=NOW - 30, limit=20)
    b = running(2, ["n2"], started=NOW - 30, limit=60)
    c = running(3, ["n3"])
    assert overdue([a, b, c], NOW) == [1]
    nodes = {"n1": node("n1", job=1), "n2": node("n2", job=2, alive=False), "n3": node("n3")}
    assert lost([a, b, c], nodes) == {2: "n2", 3: "n3"}


def test_requeued_jobs_go_to_the_front_of_their_priority_only():
    from minihpc.core.models import Job, JobState, Priority
    from minihpc.core.scheduler import queue_order_key, should_requeue

    def job(i, priority, requeues=0, submitted=0.0):
        return Job(i, "j", "u", "s", "s", "x", priority=priority, requeues=requeues, submitted_at=submitted)

    jobs = [job(1, Priority.NORMAL, submitted=1), job(2, Priority.NORMAL, requeues=1, submitted=5),
            job(3, Priority.HIGH, submitted=9), job(4, Priority.LOW, requeues=2, submitted=0)]
    assert [j.id for j in sorted(jobs, key=queue_order_key)] == [3, 2, 1, 4]
    failed = job(5, Priority.NORMAL, requeues=2)
    failed.state = JobState.NODE_FAIL
    assert should_requeue(failed, 3)
    failed.requeues = 3
    assert not should_requeue(failed, 3)


def test_only_jobs_that_reported_and_then_went_silent_are_stalled():
    from minihpc.core.models import Job, JobState
    from minihpc.core.scheduler import stalled

    def job(i, attempts=1, timeout=None):
        return Job(i, "j", "u", "s", "s", "x", state=JobState.RUNNING, attempts=attempts, progress_timeout=timeout)

    running = [job(1), job(2), job(3, attempts=2), job(4, timeout=5.0)]
    progress = {
        1: {"attempt": 1, "step": 9, "at": 100.0},   # silent 50 s: stalled at the default 30
        2: {"attempt": 1, "step": 9, "at": 140.0},   # silent 10 s: fine
        3: {"attempt": 1, "step": 9, "at": 10.0},    # an older attempt's report: not watched yet
        4: {"attempt": 1, "step": 9, "at": 144.0},   # its own 5 s timeout: stalled
    }
    assert stalled(running, progress, now=150.0, default_timeout=30.0) == {1: 50.0, 4: 6.0}


def test_a_pending_record_is_read_again_when_new_changed_or_without_a_revision():
    from minihpc.state.jobs import to_refetch

    job = object()
    cached = {1: (3, job), 2: (5, job), 4: (1, job)}
    # 1 unchanged, 2 changed, 3 new, 4 has no revision (written before revisions existed)
    assert to_refetch([1, 2, 3, 4], [b"3", b"6", b"1", None], cached) == [2, 3, 4]


def test_users_take_turns_within_a_priority_so_one_users_flood_holds_no_one_up():
    """Issue 33: alice's 100 queued jobs came first, yet bob's job is first in line while alice
    has one running, second when she has none; priority and requeued jobs still come first, and
    one user alone is FIFO."""
    from minihpc.core.models import Job, JobState, Priority
    from minihpc.core.scheduler import queue_order

    def job(i, user, submitted, priority=Priority.NORMAL, requeues=0, state=JobState.PENDING):
        j = Job(i, "j", user, "s", "s", "x", priority=priority, requeues=requeues, submitted_at=submitted)
        j.state = state
        return j

    flood = [job(i, "alice", float(i)) for i in range(1, 101)]
    bob = job(200, "bob", 500.0)
    running = [job(300, "alice", 0.0, state=JobState.RUNNING)]
    order = [j.id for j in queue_order([*flood, bob], running)]
    assert order[:3] == [200, 1, 2] and order[3:] == list(range(3, 101))
    assert [j.id for j in queue_order([*flood, bob])][:3] == [1, 200, 2]  # none running: turns from 0
    assert [j.id for j in queue_order(flood[:5])] == [1, 2, 3, 4, 5]
    urgent, requeued = job(400, "alice", 900.0, Priority.HIGH), job(401, "carol", 950.0, requeues=1)
    # alice's high job is one of hers ahead: bob's turn comes before her next normal one
    assert [j.id for j in queue_order([*flood[:3], bob, urgent, requeued])][:4] == [400, 401, 200, 1]


def test_the_plan_starts_the_other_users_job_before_the_rest_of_a_flood():
    from minihpc.core.models import Job, NodeStatus
    from minihpc.core.scheduler import plan

    def job(i, user, submitted):
        return Job(i, "j", user, "s", "s", "x", submitted_at=submitted, nodes_requested=1)

    nodes = [NodeStatus(name=f"n{i}", addr="a", alive=True, cpus=8) for i in (1, 2)]
    flood = [job(i, "alice", float(i)) for i in range(1, 6)]
    started = plan([*flood, job(9, "bob", 50.0)], nodes, [], {}, now=100.0).starts
    assert [job_id for job_id, _ in started] == [1, 9]  # not alice's 1 and 2


def test_the_changes_stream_names_what_changed_unless_it_was_trimmed_or_too_long():
    from minihpc.state.pending import START, changed_since

    entries = [("5-0", {"id": "1"}), ("6-0", {"id": "2"}), ("7-0", {"id": "1"})]
    assert changed_since("5-0", entries, 10, 2) == ("7-0", {1, 2})      # the cursor's own entry not again
    assert changed_since("7-0", entries[2:], 10, 0) == ("7-0", set())   # nothing since
    assert changed_since("4-0", entries, 10, 3) is None                 # 4-0 was trimmed: some may be lost
    assert changed_since("5-0", [], 10, 0) is None                      # the stream is gone
    assert changed_since(START, [], 10, 0) == (START, set())            # still empty
    assert changed_since(START, entries, 10, 3) == ("7-0", {1, 2})      # from empty, nothing trimmed yet
    assert changed_since("5-0", entries, 2, 2) is None                  # more than the reader takes at once
    assert changed_since("5-0", entries, 10, 3) is None                 # a write that named no job


def test_a_pending_cache_keeps_pending_records_and_drops_the_rest():
    from minihpc.state.pending import refreshed

    def record(state, rev, name="x"):
        base = Job(id=1, name=name, script="s.py", nodes_requested=1, submitted_at=1.0, user="u",
                   script_source="", script_sha256="", state=JobState(state))
        return {**base.to_record(), "rev": str(rev)}

    old = object()
    cache = {1: (3, old), 2: (1, old), 3: (1, old)}
    refreshed(cache, {1: record("PENDING", 3), 2: record("RUNNING", 2), 4: record("PENDING", 1, "new")}, [1, 2, 3, 4])
    assert cache[1] == (3, old), "an unchanged revision is not parsed again"
    assert 2 not in cache and 3 not in cache, "started, and gone"
    assert cache[4][0] == 1 and cache[4][1].name == "new"


def test_a_cache_reads_whole_only_the_changed_records_of_jobs_in_its_state_at_a_new_revision():
    from minihpc.state.pending import worth_reading

    old = object()
    cache = {1: (3, old), 2: (1, old), 3: (1, old), 5: (-1, old)}
    heads = [(b"PENDING", b"3"), (b"RUNNING", b"2"), (None, None), (b"PENDING", b"1"), ("PENDING", "7"),
             (b"PENDING", None)]
    assert worth_reading([1, 2, 3, 4, 5, 6], heads, cache) == [4, 5, 6]  # new, whole-read (-1), no revision
    assert cache == {1: (3, old), 5: (-1, old)}, "started and gone leave it; an unchanged one stays, unread"
    running = {2: (1, old)}
    assert worth_reading([1, 2], [(b"PENDING", b"3"), (b"RUNNING", b"1")], running, JobState.RUNNING) == []
    assert running == {2: (1, old)}, "a just submitted job is nothing to the running jobs' cache"


def test_a_job_waiting_on_its_own_gives_its_own_reason_and_holds_no_nodes():
    """Slurm names one reason a job waits: a dependency or ``--begin`` comes before the nodes
    (a job no nodes could ever hold but that waits for its begin time says BeginTime), and
    such a job reserves nothing, so the job behind it starts."""
    later = pending(1, nodes=5)
    later.begin_at = NOW + 60
    blocked = pending(2, nodes=5, deps=["afterok:9"])
    p = plan([later, blocked, pending(3, nodes=3)], cluster(3), [], {9: JobState.RUNNING}, NOW)
    assert p.reasons == {1: "BeginTime", 2: "Dependency"}
    assert p.starts == [(3, ["n1", "n2", "n3"])]
    p = plan([later, blocked], cluster(3), [], {9: JobState.COMPLETED}, NOW)
    assert p.reasons == {1: "BeginTime", 2: "ReqNodeNotAvail"}


def test_the_queue_key_kept_with_a_job_follows_every_change_and_stays_out_of_its_record():
    import dataclasses

    from minihpc.core.scheduler import queue_order

    low, normal = pending(1, priority=Priority.LOW, submitted=1), pending(2, submitted=2)
    assert [j.id for j in queue_order([low, normal])] == [2, 1]  # keys worked out and kept
    raised = dataclasses.replace(low, priority=Priority.HIGH)  # `scontrol update`: a new Job
    assert [j.id for j in queue_order([normal, raised])] == [1, 2]
    again = Job.from_record(raised.to_record())  # the record read again
    assert again == raised and again.queue_key == raised.queue_key != low.queue_key
    assert "queue_key" not in dataclasses.asdict(raised) and "queue_key" not in raised.to_record()
    assert raised.to_json() == dataclasses.replace(raised).to_json()
