"""When the master must plan again (core.replan): only when what a plan reads has changed."""

from minihpc.core import replan
from minihpc.core.models import Job, NodeStatus


def node(name, job=None, alive=True, drain=None):
    return NodeStatus(name, name, alive=alive, job=job, drain_reason=drain, cpus=8)


NODES = [node("n1"), node("n2", job=7)]
CLUSTER = {"partitions": "", "default_partition": "main"}


def test_an_unchanged_cluster_is_not_planned_again():
    last = replan.signature(41, NODES, CLUSTER)
    assert not replan.due(last, replan.signature(41, list(NODES), dict(CLUSTER)), now=100.0, next_begin=None,
                          planned_at=90.0)


def test_a_plan_older_than_the_limit_is_made_again_whatever_the_signature():
    last = replan.signature(41, NODES, CLUSTER)
    assert replan.due(last, last, now=100.0 + replan.REPLAN_MAX, next_begin=None, planned_at=100.0)


def test_the_first_pass_plans():
    assert replan.due(None, replan.signature(0, [], {}), now=0.0, next_begin=None)


def test_any_change_to_jobs_nodes_or_settings_plans_again():
    last = replan.signature(41, NODES, CLUSTER)
    changed = [
        replan.signature(42, NODES, CLUSTER),                                       # a job was written
        replan.signature(41, [node("n1"), node("n2")], CLUSTER),                    # n2 was freed
        replan.signature(41, [node("n1", alive=False), node("n2", job=7)], CLUSTER),  # n1 went down
        replan.signature(41, [node("n1", drain="maintenance"), node("n2", job=7)], CLUSTER),
        replan.signature(41, [*NODES, node("n3")], CLUSTER),                        # a node joined
        replan.signature(41, NODES, dict(CLUSTER, partitions="debug=n1")),          # settings published
    ]
    assert all(replan.due(last, now, now=100.0, next_begin=None, planned_at=99.0) for now in changed)


def test_a_begin_time_coming_plans_again():
    last = replan.signature(41, NODES, CLUSTER)
    assert not replan.due(last, last, now=99.9, next_begin=100.0, planned_at=99.0)
    assert replan.due(last, last, now=100.0, next_begin=100.0)


def test_the_next_begin_is_the_earliest_still_to_come():
    def job(i, begin):
        return Job(i, "j", "u", "s", "s", "x", begin_at=begin)

    assert replan.next_begin([job(1, None), job(2, 50.0), job(3, 300.0), job(4, 200.0)], now=100.0) == 200.0
    assert replan.next_begin([job(1, None), job(2, 50.0)], now=100.0) is None


def test_a_planner_s_last_plan_is_due_again_when_its_inputs_change_the_clock_says_or_it_is_forgotten():
    last, current = replan.LastPlan(), replan.signature(41, NODES, CLUSTER)
    assert last.due(current, now=100.0)  # never planned
    last.made(current, now=100.0, next_due=150.0)
    assert not last.due(replan.signature(41, list(NODES), dict(CLUSTER)), now=120.0)
    assert last.due(replan.signature(42, NODES, CLUSTER), now=120.0)  # a job written
    assert last.due(current, now=150.0)  # a --begin time came
    last.made(current, now=150.0, next_due=None)
    assert last.due(current, now=150.0 + replan.REPLAN_MAX)
    last.signature = None  # Redis came back from its files: plan anew
    assert last.due(current, now=151.0)
