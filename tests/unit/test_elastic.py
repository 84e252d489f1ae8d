"""Elastic jobs' decisions (core.elastic, the scheduler's growth) and what a script reads of its
membership (minihpc.elastic), on hand-built snapshots."""

import io

import pytest

from minihpc.core import elastic
from minihpc.core.launch_spec import LaunchSpec, job_env
from minihpc.core.models import Job, JobState, NodeStatus
from minihpc.core.scheduler import plan
from minihpc.job import elastic as sdk

NOW = 1000.0


def node(name, job=None, alive=True, drain=None):
    return NodeStatus(name, name, alive=alive, job=job, drain_reason=drain)


def job(job_id=1, nodes=("n1", "n2", "n3"), least=2, most=3, is_elastic=True, started=NOW - 60, resized=None,
        limit=None):
    j = Job(job_id, f"j{job_id}", "u", "s", "s", "x", nodes_requested=least, max_nodes=most, elastic=is_elastic,
            submitted_at=float(job_id), time_limit=limit)
    j.state, j.nodes, j.started_at, j.attempts, j.resized_at = JobState.RUNNING, list(nodes), started, 1, resized
    return j


def holding(j, *others):
    """Every node of ``j`` up and holding it, and ``others`` as given."""
    out = {n: node(n, job=j.id) for n in j.nodes}
    out.update({n.name: n for n in others})
    return out


def test_a_lost_node_leaves_an_elastic_job_on_the_others_in_their_order():
    j = job()
    assert elastic.shrink(j, holding(j)) is None  # nobody left
    assert elastic.shrink(j, holding(j, node("n1", job=1, alive=False))) == ["n2", "n3"]
    assert elastic.shrink(j, holding(j, node("n2", job=None))) == ["n1", "n3"]  # its agent restarted, freed
    assert elastic.shrink(j, holding(j, node("n3", job=1, drain="maintenance"))) == ["n1", "n2"]
    gone = {n: v for n, v in holding(j).items() if n != "n2"}  # forgotten by the registry
    assert elastic.shrink(j, gone) == ["n1", "n3"]


def test_below_its_minimum_or_not_elastic_it_is_a_node_failure_as_before():
    j = job()
    assert elastic.shrink(j, holding(j, node("n1", job=1, alive=False), node("n2", job=1, alive=False))) is None
    fixed = job(is_elastic=False)
    assert elastic.shrink(fixed, holding(fixed, node("n1", job=1, alive=False))) is None
    ranged_only = job(least=2, most=2)  # --elastic needs room to change in
    assert not elastic.elastic(ranged_only)


def test_growth_is_due_below_the_most_and_every_so_often_after_a_start_or_a_resize():
    assert elastic.growth_due(job(nodes=("n1", "n2")), NOW, 10.0)
    assert not elastic.growth_due(job(nodes=("n1", "n2", "n3")), NOW, 10.0)  # at its most
    assert not elastic.growth_due(job(nodes=("n1", "n2"), started=NOW - 5), NOW, 10.0)
    assert not elastic.growth_due(job(nodes=("n1", "n2"), resized=NOW - 5), NOW, 10.0)
    assert not elastic.growth_due(job(nodes=("n1", "n2"), is_elastic=False), NOW, 10.0)
    running = [job(1, nodes=("n1", "n2"), resized=NOW - 4), job(2, nodes=("n3", "n4"), started=NOW - 8),
               job(3, nodes=("n5", "n6", "n7"))]
    assert elastic.next_growth(running, NOW, 10.0) == NOW + 2
    assert elastic.next_growth([job(nodes=("n1", "n2"))], NOW, 10.0) is None  # due already: no later time


def test_a_running_elastic_job_grows_onto_idle_nodes_but_never_onto_one_a_pending_job_needs():
    j = job(nodes=("n1", "n2"))
    nodes = [node("n1", job=1), node("n2", job=1), node("n3")]
    assert plan([], nodes, [j], {}, NOW, grow_every=10.0).grows == [(1, ["n1", "n2", "n3"])]
    assert plan([], nodes, [j], {}, NOW).grows == []  # growth not asked for
    assert plan([], nodes, [job(nodes=("n1", "n2"), started=NOW - 3)], {}, NOW, grow_every=10.0).grows == []
    waiting = Job(2, "w", "u", "s", "s", "x", nodes_requested=1, submitted_at=5.0)
    both = plan([waiting], nodes, [j], {}, NOW, grow_every=10.0)
    assert both.starts == [(2, ["n3"])] and both.grows == []
    # A job that cannot start now but is promised n3 (and n4, busy until a time limit ends) keeps it too.
    busy = [*nodes, node("n4", job=9)]
    promised = Job(3, "p", "u", "s", "s", "x", nodes_requested=2, submitted_at=5.0)
    ahead = plan([promised], busy, [j, job(9, nodes=("n4",), least=1, most=1, is_elastic=False, limit=120)], {},
                 NOW, grow_every=10.0)
    assert ahead.starts == [] and ahead.grows == []
    drained = [node("n1", job=1), node("n2", job=1), node("n3", drain="x")]
    assert plan([], drained, [j], {}, NOW, grow_every=10.0).grows == []


def test_a_script_reads_its_membership_and_keeps_one_global_batch_at_every_size():
    env = {"MINIHPC_ELASTIC": "2-4", "MINIHPC_RESIZES": "3", "SLURM_JOB_NUM_NODES": "2",
           "SLURM_NTASKS_PER_NODE": "2", "WORLD_SIZE": "4"}
    size = sdk.membership(env)
    assert size == sdk.Membership(least=2, most=4, nodes=2, tasks_per_node=2, resizes=3)
    assert sdk.global_batch(32, env) == 32 * 8  # the most ranks: 4 nodes x 2
    assert sdk.global_batch(32, dict(env, SLURM_JOB_NUM_NODES="4", WORLD_SIZE="8")) == 256
    assert sdk.membership({"WORLD_SIZE": "4"}) is None
    assert sdk.global_batch(32, {"WORLD_SIZE": "4"}) == 128  # a fixed-size job: per rank x world


def test_rescue_saves_when_a_collective_fails_and_the_rank_still_fails():
    saved, out = [], io.StringIO()
    with pytest.raises(RuntimeError, match="Connection closed by peer"):
        with sdk.rescue(lambda: saved.append("step"), out=out):
            raise RuntimeError("[gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:5000")
    assert saved == ["step"] and "this rank's state saved" in out.getvalue()

    def fenced():
        raise OSError("disk full")

    with pytest.raises(RuntimeError, match="peer"):
        with sdk.rescue(fenced, out=out):
            raise RuntimeError("peer gone")
    assert "saving this rank's state failed too: disk full" in out.getvalue()
    with sdk.rescue(lambda: saved.append("never"), out=out):
        pass
    assert saved == ["step"]


def test_a_resize_is_a_launch_of_its_own_but_not_an_attempt_users_count():
    j = job(nodes=("n1", "n2", "n3"))
    j.first_failure, j.failing_since = "n2", NOW
    j.resize(["n1", "n3"], NOW)
    assert (j.attempts, j.resizes, j.queue_attempts, j.nodes, j.resized_at) == (2, 1, 1, ["n1", "n3"], NOW)
    assert j.first_failure is None and j.failing_since is None  # the held failure was the old gang's
    assert j.to_json()["attempts"] == 1 and Job.from_record(j.to_record()).resizes == 1
    spec = LaunchSpec(job_id=1, attempt=2, name="j", node="n1", node_rank=0, nodes=["n1", "n3"], master_addr="n1",
                      tasks_per_node=1, script="s", resizes=1, elastic="2-3")
    env = job_env(spec, 5000, {})
    assert env["SLURM_RESTART_COUNT"] == "0" and env["MINIHPC_ATTEMPT"] == "2"  # requeues; launches (the fence)
    assert env["MINIHPC_ELASTIC"] == "2-3" and env["MINIHPC_RESIZES"] == "1" and env["SLURM_JOB_NUM_NODES"] == "2"
    assert "MINIHPC_ELASTIC" not in job_env(LaunchSpec(**{**spec.to_payload(), "elastic": ""}), 5000, {})


def test_a_job_waiting_for_nodes_gets_back_what_elastic_jobs_took_beyond_their_minimum():
    grown = job(1, nodes=("n1", "n2", "n3"), least=1, most=3, resized=NOW - 5)  # grew last: gives first
    older = job(2, nodes=("n4", "n5"), least=1, most=2, started=NOW - 100)
    fixed = job(3, nodes=("n6",), least=1, most=1, is_elastic=False)
    nodes = [node(n, job=1) for n in ("n1", "n2", "n3")] + [node(n, job=2) for n in ("n4", "n5")] + \
        [node("n6", job=3), node("n7")]
    everywhere = [f"n{i}" for i in range(1, 8)]

    def waiting(count, nodelist=()):
        return Job(9, "w", "u", "s", "s", "x", nodes_requested=count, submitted_at=5.0, nodelist=list(nodelist))

    running = [grown, older, fixed]
    assert elastic.reclaim(waiting(1), everywhere, nodes, running) == []  # n7 is free: nothing to give
    assert elastic.reclaim(waiting(3), everywhere, nodes, running) == [(1, ["n1"])]  # n7 + n3 + n2
    assert elastic.reclaim(waiting(4), everywhere, nodes, running) == [(1, ["n1"]), (2, ["n4"])]
    assert elastic.reclaim(waiting(5), everywhere, nodes, running) == []  # not enough even then: no shrink
    assert elastic.reclaim(waiting(2, nodelist=["n6"]), everywhere, nodes, running) == []  # n6 is a fixed job's
    assert elastic.reclaim(waiting(2), ["n7", "n5"], nodes, running) == [(2, ["n4"])]  # only what it may use
    assert elastic.reclaim(None, everywhere, nodes, running) == []
    # n2 and n3 given back already (job 1 lists n1 only, their ranks still end): no second shrink.
    shrunk = job(1, nodes=("n1",), least=1, most=3, resized=NOW - 1)
    assert elastic.reclaim(waiting(3), everywhere, nodes, [shrunk, older, fixed]) == []


def test_a_gang_that_lost_a_node_is_killed_sooner_than_one_that_is_whole():
    assert elastic.teardown_grace(3.0, gang_whole=True) == 3.0  # a growth or a drain: they agree and save
    assert elastic.teardown_grace(3.0, gang_whole=False) == elastic.PEER_LOST_GRACE == 0.5
    assert elastic.teardown_grace(0.2, gang_whole=False) == 0.2  # never longer than kill_wait
