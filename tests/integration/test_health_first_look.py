"""The health monitor's first look at the nodes (after its master's start grace): a node that
went DOWN during that grace is reported DOWN, as any other; one already DOWN before the master
started is not reported again."""

from minihpc.core.models import NodeStatus
from minihpc.core.restart_policy import RestartPolicy
from minihpc.master.health import NodeHealth


def kinds(store, node):
    return [i["kind"] for i in reversed(store.incidents(50)) if i["node"] == node]


def test_a_node_that_went_down_during_the_masters_start_grace_is_reported_down_then_back(store):
    health = NodeHealth(store, None, RestartPolicy(), node_timeout=2.5, watching_since=100.0)
    health.step([NodeStatus("n1", "a", alive=False, last_heartbeat=104.0)], now=110.0)
    health.step([NodeStatus("n1", "a", alive=True, last_heartbeat=111.0)], now=111.0)
    assert kinds(store, "n1") == ["down", "back"]


def test_a_node_down_since_before_the_master_started_is_not_reported_again(store):
    health = NodeHealth(store, None, RestartPolicy(), node_timeout=2.5, watching_since=100.0)
    health.step([NodeStatus("n2", "a", alive=False, last_heartbeat=90.0),
                 NodeStatus("n3", "a", alive=False, last_heartbeat=None)], now=110.0)
    assert kinds(store, "n2") == [] and kinds(store, "n3") == []
    health.step([NodeStatus("n2", "a", alive=True, last_heartbeat=111.0)], now=111.0)
    assert kinds(store, "n2") == ["back"]
