"""A node agent asked to stop is DOWN from that moment and stays DOWN: a heartbeat that was in
flight when the stop came must not bring it back (the master would give the stopping node the
requeued job, and that job would fail a second time when the node went)."""

import threading

import pytest
import redis

from minihpc.core.config import Settings
from minihpc.node.agent import NodeAgent
from minihpc.state import keys
from minihpc.state.store import Store
from tests.conftest import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def agent(redis_port):
    settings = Settings(redis_url=f"redis://127.0.0.1:{redis_port}/0", heartbeat_interval=0.05,
                        node_timeout=2.5, warm_launcher=False)
    return NodeAgent(settings, "node-a")


def test_a_heartbeat_in_flight_when_the_agent_goes_down_does_not_bring_it_back(agent, redis_port, monkeypatch):
    r = redis.Redis(port=redis_port)
    in_flight, land = threading.Event(), threading.Event()
    beat = Store.heartbeat

    def slow_beat(self, name, ttl):  # the heartbeat thread is preempted inside its call
        in_flight.set()
        land.wait(10)
        beat(self, name, ttl)

    monkeypatch.setattr(Store, "heartbeat", slow_beat)
    beating = threading.Thread(target=agent._heartbeat_loop, daemon=True)
    beating.start()
    assert in_flight.wait(10)
    stopping = threading.Thread(target=agent.going_down)  # what the agent's SIGTERM handler calls
    stopping.start()
    stopping.join(0.3)  # going_down has started; the beat has not landed yet
    land.set()
    stopping.join(10)
    beating.join(10)
    assert not stopping.is_alive() and not beating.is_alive()
    assert not r.exists(keys.node_alive("node-a")), "the stopping node is alive again"
    assert agent.shutting_down.is_set()


def test_heartbeats_keep_the_node_alive_until_it_goes_down(agent, redis_port):
    r = redis.Redis(port=redis_port)
    beating = threading.Thread(target=agent._heartbeat_loop, daemon=True)
    beating.start()
    wait_until(lambda: r.exists(keys.node_alive("node-a")), timeout=10, message="a first heartbeat")
    agent.going_down()
    beating.join(10)
    assert not beating.is_alive()
    assert not r.exists(keys.node_alive("node-a"))


def test_a_stop_waits_for_a_stuck_heartbeat_no_longer_than_one_call_may_take(agent, redis_port, monkeypatch):
    import minihpc.node.agent as agent_module

    r = redis.Redis(port=redis_port)
    r.set(keys.node_alive("node-a"), "1")
    in_flight, land = threading.Event(), threading.Event()
    monkeypatch.setattr(agent_module, "BEAT_CALL_MAX", 0.3)
    monkeypatch.setattr(Store, "heartbeat", lambda self, name, ttl: (in_flight.set(), land.wait(10)))  # Redis hangs
    beating = threading.Thread(target=agent._heartbeat_loop, daemon=True)
    beating.start()
    assert in_flight.wait(10)
    stopping = threading.Thread(target=agent.going_down)
    stopping.start()
    stopping.join(5)
    try:
        assert not stopping.is_alive(), "the stop waits on the stuck heartbeat"
        assert not r.exists(keys.node_alive("node-a"))
    finally:
        land.set()
