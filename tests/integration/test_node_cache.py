"""The master's pass reads the nodes' records only when one changed (state.nodes.NodeCache), on
a real redis-server: what it sees is what a fresh read sees -- a registration, a measurement, a
node forgotten, every beat, a silence -- while heartbeats alone read no record."""

import time

import pytest

from minihpc.state import keys
from minihpc.state.nodes import NodeCache

pytestmark = pytest.mark.integration


def _register(store, name, cpus=4):
    store.register_node(name, f"10.0.0.{len(name)}", cpus, 1 << 30, ttl=5.0)


def _commands(store) -> int:
    return int(store.r.info("stats")["total_commands_processed"])


def test_a_cached_read_sees_what_a_fresh_read_sees(store):
    cache = NodeCache()
    for name in ("master-node", "worker-node-1", "worker-node-2"):
        _register(store, name)
    assert store.node_statuses(cache) == store.node_statuses()

    store.heartbeats(["worker-node-1"], ttl=5.0)
    cached = {n.name: n for n in store.node_statuses(cache)}
    assert cached == {n.name: n for n in store.node_statuses()}
    assert cached["worker-node-1"].last_heartbeat > cached["worker-node-2"].last_heartbeat, "every beat is seen"

    _register(store, "worker-node-2", cpus=16)  # re-registered with more CPUs
    assert {n.name: n.cpus for n in store.node_statuses(cache)}["worker-node-2"] == 16
    store.record_speed("worker-node-1", 42.0, time.time())
    assert {n.name: n.gflops for n in store.node_statuses(cache)}["worker-node-1"] == 42.0
    store.record_measures("worker-node-2", {"allreduce_gbps": 3.5})
    assert {n.name: n.allreduce_gbps for n in store.node_statuses(cache)}["worker-node-2"] == 3.5
    assert store.node_statuses(cache) == store.node_statuses()


def test_a_silent_node_keeps_its_last_beat_and_a_forgotten_one_goes(store):
    cache = NodeCache()
    _register(store, "master-node")
    _register(store, "worker-node-1")
    store.node_statuses(cache)
    beat = time.time()
    store.heartbeats(["worker-node-1"], ttl=5.0)
    store.r.delete(keys.node_alive("worker-node-1"))  # its beats stopped and the key lapsed
    [_, silent] = store.node_statuses(cache)
    assert not silent.alive and silent.last_heartbeat == pytest.approx(beat, abs=1.0)
    assert silent == store.node_statuses()[1]

    assert store.forget_node("worker-node-1")
    assert [n.name for n in store.node_statuses(cache)] == ["master-node"]


def test_heartbeats_alone_read_no_record(store):
    cache = NodeCache()
    names = [f"worker-node-{i}" for i in range(1, 51)]
    for name in names:
        _register(store, name)
    store.node_statuses(cache)
    store.heartbeats(names, ttl=5.0)
    before = _commands(store)
    store.node_statuses(cache)
    cached = _commands(store) - before
    before = _commands(store)
    store.node_statuses()
    fresh = _commands(store) - before
    assert cached <= 6 < 50 <= fresh, (cached, fresh)
