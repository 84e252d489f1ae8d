"""Placement under the sbatch options that constrain it, on hand-built cluster snapshots:
-p/--partition, --mem, --gres=gpu:N, -c/--cpus-per-task, --begin and --array=...%N (man sbatch),
with conservative backfill kept per node."""

import re

from minihpc.core.models import Job, JobState, NodeStatus, Priority
from minihpc.core.partitions import Partitions, parse
from minihpc.core.scheduler import eligible, plan, should_requeue
from minihpc.core.slurm_formats import expected_starts

NOW = 1000.0
G = 1 << 30


def node(name, job=None, gpus=0, mem=0, cpus=0, alive=True):
    return NodeStatus(name, name, alive=alive, job=job, gpus=gpus, memory_bytes=mem, cpus=cpus)


def pending(job_id, nodes=1, priority=Priority.NORMAL, limit=None, **needs):
    return Job(job_id, f"j{job_id}", "u", "s", "s", "x", nodes_requested=nodes, priority=priority,
               time_limit=limit, submitted_at=float(job_id), **needs)


def running(job_id, nodes, limit=None, started=NOW - 10, **fields):
    job = pending(job_id, len(nodes), limit=limit, **fields)
    job.state, job.nodes, job.started_at = JobState.RUNNING, list(nodes), started
    return job


PARTS = parse("debug=n[1-2];gpu=n3")
ALL = Partitions()  # no partitions configured: every node in "main"


def test_a_partition_restricts_the_nodes_and_no_partition_means_the_default():
    """sbatch -p debug runs only on debug's nodes; without -p, the default partition (every
    node, since MINIHPC_PARTITIONS does not name it)."""
    nodes = [node("n1"), node("n2"), node("n3")]
    p = plan([pending(1, nodes=2, partition="gpu"), pending(2, partition="gpu"), pending(3, nodes=2, partition="debug")],
             nodes, [], {}, NOW, PARTS)
    assert p.reasons == {1: "ReqNodeNotAvail"}  # gpu has one node
    assert p.starts == [(2, ["n3"]), (3, ["n1", "n2"])]
    p = plan([pending(4, nodes=3)], nodes, [], {}, NOW, PARTS)
    assert p.starts == [(4, ["n1", "n2", "n3"])]


def test_a_default_partition_named_in_the_setting_has_just_its_nodes():
    parts = parse("main=n1;big=n[1-3]", default="main")
    p = plan([pending(1, nodes=2), pending(2, nodes=2, partition="big")], [node("n1"), node("n2"), node("n3")],
             [], {}, NOW, parts)
    assert p.reasons == {1: "ReqNodeNotAvail"}
    assert p.starts == [(2, ["n1", "n2"])]


def test_mem_gpus_and_cpus_each_rule_out_nodes():
    """--mem is per node; --gres=gpu:N is GPUs per node; -c x --ntasks-per-node CPUs per node
    (unknown memory or CPUs do not rule a node out)."""
    nodes = [node("n1", mem=4 * G, cpus=2), node("n2", mem=16 * G, cpus=8, gpus=2), node("n3")]
    assert eligible(pending(1, mem_bytes=8 * G), nodes, ALL) == ["n3", "n2"]
    assert eligible(pending(1, gpus=1), nodes, ALL) == ["n2"]
    assert eligible(pending(1, gpus=3), nodes, ALL) == []
    assert eligible(pending(1, tasks_per_node=2, cpus_per_task=2), nodes, ALL) == ["n3", "n2"]
    assert eligible(pending(1, tasks_per_node=2, cpus_per_task=2), nodes, ALL, cpus_override=4) == \
        ["n1", "n3", "n2"]  # MINIHPC_MAX_TASKS_PER_NODE stands for every node's CPUs


def test_a_job_without_gpus_leaves_the_gpu_node_to_one_that_needs_it():
    nodes = [node("g1", gpus=1), node("c1"), node("c2")]
    p = plan([pending(1), pending(2, gpus=1)], nodes, [], {}, NOW)
    assert p.starts == [(1, ["c1"]), (2, ["g1"])]


def test_too_few_eligible_nodes_wait_req_node_not_avail_and_block_nobody():
    nodes = [node("n1", gpus=1), node("n2"), node("n3", gpus=1, alive=False)]
    p = plan([pending(1, nodes=2, gpus=1, priority=Priority.HIGH), pending(2)], nodes, [], {}, NOW)
    assert p.reasons == {1: "ReqNodeNotAvail"}
    assert p.starts == [(2, ["n2"])]


def test_backfill_keeps_the_nodes_promised_to_a_constrained_job():
    """Job 1 needs both GPU nodes, g2 busy until NOW+50: it is promised g1+g2 at NOW+50. A
    job behind takes c1 (no GPU needed); the next may use g1 only if it ends by then."""
    nodes = [node("g1", gpus=1), node("g2", gpus=1, job=9), node("c1")]
    blocker = running(9, ["g2"], limit=60)
    jobs = [pending(1, nodes=2, gpus=1, limit=100, priority=Priority.HIGH), pending(2, limit=100),
            pending(3, limit=100), pending(4, limit=40)]
    p = plan(jobs, nodes, [blocker], {}, NOW)
    assert p.starts == [(2, ["c1"]), (4, ["g1"])]
    assert p.reasons == {1: "Resources", 3: "Priority"}
    assert p.promised == {1: NOW + 50, 3: NOW + 100}  # c1, when job 2 ends


def test_a_job_no_start_can_be_promised_holds_only_nodes_it_could_use():
    """n1 runs forever; job 1 (-p debug, both debug nodes) can never be promised a start and
    holds n1+n2 from now on -- but not n3, which is not in its partition: job 2 runs there."""
    nodes = [node("n1", job=9), node("n2"), node("n3")]
    jobs = [pending(1, nodes=2, partition="debug", priority=Priority.HIGH), pending(2, priority=Priority.LOW)]
    p = plan(jobs, nodes, [running(9, ["n1"])], {}, NOW, PARTS)
    assert p.starts == [(2, ["n3"])]
    assert p.promised == {1: None}


def test_begin_time_waits_and_reserves_nothing():
    """sbatch --begin: "defer the allocation of the job until the specified time"; it waits
    with Slurm's reason BeginTime and the jobs behind it take the nodes meanwhile."""
    nodes = [node("n1"), node("n2")]
    jobs = [pending(1, nodes=2, begin_at=NOW + 60, priority=Priority.HIGH), pending(2, nodes=2)]
    p = plan(jobs, nodes, [], {}, NOW)
    assert p.reasons == {1: "BeginTime"}
    assert p.starts == [(2, ["n1", "n2"])]
    p = plan(jobs[:1], nodes, [], {}, NOW + 60)
    assert p.starts == [(1, ["n1", "n2"])]


def test_array_throttle_runs_at_most_n_tasks_at_once():
    """sbatch --array=0-5%2: "a maximum number of simultaneously running tasks" -- the rest
    wait JobArrayTaskLimit; other jobs are not held back by them."""
    task = {"array_job_id": 10, "array_limit": 2}
    nodes = [node(f"n{i}") for i in range(1, 6)] + [node("n6", job=10)]
    jobs = [pending(i, array_task_id=i - 10, **task) for i in (11, 12, 13, 14)] + [pending(20)]
    p = plan(jobs, nodes, [running(10, ["n6"], array_task_id=0, **task)], {}, NOW)
    assert p.starts == [(11, ["n1"]), (20, ["n2"])]
    assert p.reasons == {12: "JobArrayTaskLimit", 13: "JobArrayTaskLimit", 14: "JobArrayTaskLimit"}
    p = plan(jobs, nodes[:5], [], {}, NOW)
    assert [s[0] for s in p.starts] == [11, 12, 20]


def test_expected_starts_follow_partitions():
    """squeue --start: a job waiting on its partition's busy node is expected when that node
    frees, though a node of another partition is idle."""
    nodes = [node("n1", job=9), node("n2", job=9), node("n3")]
    starts = expected_starts([pending(1, partition="debug"), pending(2, begin_at=NOW + 5)], nodes,
                             [running(9, ["n1", "n2"], limit=60)], {}, NOW, PARTS)
    assert starts == {1: NOW + 50, 2: None}


def test_no_requeue_jobs_are_never_requeued_after_a_node_failure():
    """sbatch --no-requeue: "the batch job should never be requeued under any circumstances"."""
    job = running(1, ["n1"], requeue=False)
    job.state = JobState.NODE_FAIL
    assert not should_requeue(job, 3)
    job.requeue = True
    assert should_requeue(job, 3)


def test_nodelist_puts_the_job_on_those_nodes_and_others_up_to_its_count():
    """man sbatch, -w/--nodelist: "The job will contain all of these hosts and possibly
    additional hosts as needed"; a busy named node makes it wait, even with others idle."""
    nodes = [node("n1"), node("n2"), node("n3")]
    p = plan([pending(1, nodelist=["n3"]), pending(2, nodes=2, nodelist=["n2"])], nodes, [], {}, NOW, ALL)
    assert p.starts == [(1, ["n3"]), (2, ["n2", "n1"])]
    busy = [node("n1", job=9), node("n2"), node("n3")]
    p = plan([pending(3, nodelist=["n1"], limit=60)], busy, [running(9, ["n1"], limit=100)], {}, NOW, ALL)
    assert p.starts == [] and p.reasons == {3: "Resources"} and p.promised == {3: NOW + 90}
    p = plan([pending(4, nodelist=["n1"])], [node("n1", alive=False), node("n2")], [], {}, NOW, ALL)
    assert p.reasons == {4: "ReqNodeNotAvail"}  # its node is down: it waits, never elsewhere


def test_exclude_keeps_the_job_off_those_nodes():
    """man sbatch, -x/--exclude: "Explicitly exclude certain nodes from the resources granted"."""
    nodes = [node("n1"), node("n2"), node("n3")]
    p = plan([pending(1, nodes=2, exclude=["n1"]), pending(2, exclude=["n2", "n3"])], nodes, [], {}, NOW, ALL)
    assert p.starts == [(1, ["n2", "n3"]), (2, ["n1"])]
    p = plan([pending(3, nodes=3, exclude=["n1"])], nodes, [], {}, NOW, ALL)
    assert p.reasons == {3: "ReqNodeNotAvail"}


def test_a_nodelist_or_exclude_that_can_never_hold_is_refused_at_submit():
    from minihpc.core.requirements import refusal

    nodes = [node("n1", cpus=2), node("n2", cpus=2), node("n3", cpus=2)]

    def why(n=1, **needs):
        base = dict(mem_bytes=0, gpus=0, tasks_per_node=1, cpus_per_task=1, nodelist=[], exclude=[], constraint="")
        return refusal(pending(0, **{**base, **needs}), n, "", nodes, parse("", features="n1=ib"))

    assert why(nodelist=["n9"]) == "-w/--nodelist: invalid node name specified: n9"
    assert why(exclude=["n1", "x"]) == "-x/--exclude: invalid node name specified: x"
    assert why(nodelist=["n1"], exclude=["n1"]) == "n1 is both required (-w) and excluded (-x)"
    assert why(1, nodelist=["n1", "n2"]) == "-w names 2 nodes, more than the job's 1 (-N)"
    assert why(3, exclude=["n1"]) == "job needs 3 nodes; partition 'main' has 2 besides the ones -x excludes"
    assert why(2, nodelist=["n1"], exclude=["n3"]) is None
    assert why(nodelist=["n2"], tasks_per_node=4) is not None
    assert why(2, constraint="ib") == ("--constraint=ib: 1 node(s) in partition 'main' have these features, the job "
                                       "needs 2 (features there: ib)")
    assert why(1, constraint="ib") is None
    assert why(nodelist=["n2"], constraint="ib").startswith("-w/--nodelist: n2 lacks")


def test_constraint_places_the_job_on_nodes_with_those_features():
    """man sbatch, -C/--constraint: "Nodes can have features assigned to them by the Slurm
    administrator"; & and | with parentheses; matching OR and counts are refused."""
    import pytest

    from minihpc.core.errors import UsageError
    from minihpc.core.features import check_constraint, parse_features, satisfies

    parts = parse("", features="n[1-2]=ib,big;n3=small")
    assert parts.features == {"n1": {"ib", "big"}, "n2": {"ib", "big"}, "n3": {"small"}}
    nodes = [node("n1"), node("n2"), node("n3")]
    p = plan([pending(1, constraint="small"), pending(2, constraint="(ib|opa)&big"), pending(3, constraint="gpu")],
             nodes, [], {}, NOW, parts)
    assert p.starts == [(1, ["n3"]), (2, ["n1"])] and p.reasons == {3: "ReqNodeNotAvail"}
    assert satisfies("", frozenset()) and not satisfies("a&b", frozenset({"a"})) and satisfies("a|b", frozenset("b"))
    for bad, why in (("[a|b]", "matching OR"), ("a*2", "counts"), ("a&", "ends too soon"), ("(a", "not closed"),
                     ("a b", "unexpected 'b'"), ("", "needs a feature")):
        with pytest.raises(UsageError, match=re.escape(why)):
            check_constraint(bad)
    with pytest.raises(UsageError, match="invalid node features 'n1'"):
        parse_features("n1")
    assert Partitions.from_record(parts.to_record()) == parts  # published in the cluster record as it is
