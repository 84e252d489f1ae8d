"""A node that heartbeats but takes no work (core.stuck): which launches are overdue, which of
them still wait, and when the drain made for it is lifted."""

from minihpc.core import stuck
from minihpc.core.models import Job, JobState, NodeState, NodeStatus
from minihpc.restart import rules


def _running(job_id, nodes, started_at, attempts=1):
    return Job(id=job_id, name="j", user="alice", script="/s.py", script_source="/s.py", script_sha256="0" * 64,
               state=JobState.RUNNING,
               nodes=list(nodes), nodes_requested=len(nodes), attempts=attempts, started_at=started_at)


def test_only_launches_past_the_timeout_and_not_yet_seen_taken_are_asked_about():
    running = [_running(1, ["a", "b"], 100.0), _running(2, ["c"], 150.0), _running(3, ["d"], 100.0, attempts=2)]
    assert stuck.overdue(running, 165.0, 60.0, taken={(1, 1, "a")}) == [(1, 1, "b", 65.0), (3, 2, "d", 65.0)]
    assert stuck.overdue(running, 159.0, 60.0, taken=set()) == []
    # An elastic job relaunched at 150 on the nodes it has left: its launch is timed from then.
    resized = _running(4, ["e", "f"], 100.0, attempts=2)
    resized.resize(["e"], 150.0)
    assert stuck.overdue([resized], 165.0, 60.0, taken=set()) == []
    assert stuck.overdue([resized], 211.0, 60.0, taken=set()) == [(4, 3, "e", 61.0)]


def test_a_launch_still_in_its_queue_makes_its_node_stuck():
    launches = [(1, 1, "a", 65.0), (1, 1, "b", 65.0)]
    assert stuck.stuck(launches, [False, True]) == {"b": (1, 1, 65.0)}
    assert stuck.stuck(launches, [False, False]) == {}


def test_the_drain_is_lifted_once_the_node_registered_after_it_was_found_stuck():
    reason = stuck.drain_reason(61.4)
    assert reason == "stuck: took no launch for 61s while heartbeating" and stuck.is_stuck(reason)
    assert not stuck.is_stuck("maintenance") and not stuck.is_stuck(None)
    node = NodeStatus(name="b", addr="b", alive=True, drain_reason=reason, registered_at=200.0)
    assert stuck.back(node, found_at=190.0)
    assert not stuck.back(node, found_at=210.0)  # registered before it was found: the stuck agent
    assert not stuck.back(node, found_at=None)
    assert not stuck.back(NodeStatus(name="b", addr="b", alive=False, drain_reason=reason, registered_at=200.0), 190.0)
    admins = NodeStatus(name="b", addr="b", alive=True, drain_reason="maintenance", registered_at=200.0)
    assert not stuck.back(admins, 190.0)


def test_the_restart_proxy_restarts_a_stuck_node_though_it_is_up():
    reason = stuck.drain_reason(61)
    assert rules.state_refusal("worker-node-1", NodeState.ALLOC, reason) is None
    assert rules.state_refusal("worker-node-1", NodeState.DRAIN, reason) is None
    assert rules.state_refusal("worker-node-1", NodeState.DRAIN, "maintenance") == \
        "worker-node-1 is drain, not DOWN; not restarting"
