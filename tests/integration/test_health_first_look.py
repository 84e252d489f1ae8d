"""The health monitor's first look at the nodes (after its master's start grace): a node seen
up during that grace and DOWN at the first look is reported DOWN, as any other, from when its
heartbeat lapsed; one never seen up by this master is not reported again."""

import pytest

from minihpc.core.models import NodeStatus
from minihpc.core.restart_policy import RestartPolicy
from minihpc.master.health import NodeHealth

pytestmark = pytest.mark.integration


def incidents(store, node):
    return [i for i in reversed(store.incidents(50)) if i["node"] == node]


def test_a_node_that_went_down_during_the_masters_start_grace_is_reported_down_then_back(store):
    health = NodeHealth(store, None, RestartPolicy(), node_timeout=2.5)
    health.saw([NodeStatus("n1", "a", alive=True, last_heartbeat=101.0)])  # a quiet pass: no judging
    down = NodeStatus("n1", "a", alive=False, last_heartbeat=104.0)
    health.saw([down])
    health.step([down], now=110.0)
    health.step([NodeStatus("n1", "a", alive=True, last_heartbeat=111.0)], now=111.0)
    assert [i["kind"] for i in incidents(store, "n1")] == ["down", "back"]
    # DOWN since its key lapsed (104 + 2.5), not since the monitor first looked (110)
    assert incidents(store, "n1")[1]["down_for"] == pytest.approx(4.5)


def test_a_node_this_master_never_saw_up_is_not_reported_down_again(store):
    health = NodeHealth(store, None, RestartPolicy(), node_timeout=2.5)
    nodes = [NodeStatus("n2", "a", alive=False, last_heartbeat=90.0), NodeStatus("n3", "a", alive=False)]
    health.saw(nodes)
    health.step(nodes, now=110.0)
    assert incidents(store, "n2") == [] and incidents(store, "n3") == []
    health.saw([NodeStatus("n2", "a", alive=True, last_heartbeat=111.0)])
    health.step([NodeStatus("n2", "a", alive=True, last_heartbeat=111.0)], now=111.0)
    assert [i["kind"] for i in incidents(store, "n2")] == ["back"]
