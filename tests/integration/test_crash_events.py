"""A crash is an event: a node agent that dies is DOWN the moment its process ends (local mode's
watcher in the master), not after its heartbeat lapses; a report about an agent that has been
replaced since ends nothing."""

import json
import os
import signal
import time

import pytest
import redis

from minihpc.core.crashes import Crash
from minihpc.master.crashes import CrashInbox
from minihpc.state import keys
from minihpc.state.store import Store
from tests.conftest import free_port, wait_until

pytestmark = pytest.mark.integration

NODE_TIMEOUT = 2.5  # minihpc.core.config's default, which the test cluster keeps


def test_a_crash_report_ends_the_agent_that_crashed_and_not_a_newer_one(store):
    store.heartbeat("n1", 30)
    assert store.end_crashed(Crash("n1", time.time(), "its process ended"))
    assert not store.r.exists(keys.node_alive("n1"))
    assert not store.end_crashed(Crash("n1", time.time(), "its process ended"))  # already DOWN
    before = time.time() - 1
    store.heartbeat("n1", 30)  # a newer agent beat after that crash
    assert not store.end_crashed(Crash("n1", before, "its process ended"))
    assert store.r.exists(keys.node_alive("n1"))


def test_crashes_reported_by_other_processes_wait_in_redis_for_the_master(store):
    store.report_crash(Crash("n2", 5.0, "its unit's process was killed by SIGKILL"))
    store.report_crash(Crash("n3", 6.0, "its unit's process exited with status 1"))
    store.r.rpush(keys.CRASHES, "not json")  # a bad record is dropped, the others kept
    assert store.take_crashes() == [Crash("n2", 5.0, "its unit's process was killed by SIGKILL"),
                                    Crash("n3", 6.0, "its unit's process exited with status 1")]
    assert store.take_crashes() == []
    assert store.r.lrange(keys.EVENTS, 0, -1) == [b"crash n2", b"crash n3"]  # the master was woken


def test_the_master_s_inbox_ends_crashed_nodes_and_keeps_reports_while_redis_is_away(store):
    store.heartbeat("n1", 30)
    store.heartbeat("n2", 30)
    inbox = CrashInbox(store)
    inbox.report(Crash("n1", time.time(), "its process was killed by SIGKILL"))
    store.report_crash(Crash("n2", time.time(), "its unit's process exited with status 1"))
    inbox.report(Crash("n3", time.time(), "its process ended"))  # never beat: nothing to end
    assert inbox.apply() == {"n1": "its process was killed by SIGKILL", "n2": "its unit's process exited with status 1"}
    assert not store.r.exists(keys.node_alive("n1"), keys.node_alive("n2"))
    away = CrashInbox(Store(redis.Redis(port=free_port(), socket_connect_timeout=0.2)))
    crash = Crash("n1", time.time(), "its process ended")
    away.report(crash)  # the wake-up fails quietly
    assert away.apply() == {} and away.pending == [crash]  # kept for the next pass


def incidents(c, node: str, since: float) -> list[dict]:
    out = json.loads(c.cli("incidents", "--json", "--limit", 200).stdout)
    return [i for i in out if i["node"] == node and i["at"] >= since]


def agent_pid(c, node: str) -> int:
    return json.loads((c.state_dir / "pids.json").read_text())[node]


def kill_and_wait_back(c, node: str) -> dict:
    """SIGKILL the node's agent; its `down` incident once it is back."""
    pid, since = agent_pid(c, node), time.time()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: any(i["kind"] == "back" for i in incidents(c, node, since)), timeout=60,
               message=f"{node} back")
    wait_until(lambda: agent_pid(c, node) != pid, timeout=10, message="the new agent's pid")
    seen = incidents(c, node, since)
    down = [i for i in seen if i["kind"] == "down"]
    assert down, f"no down incident for {node}: {seen}"
    return down[-1]


def test_a_killed_agent_is_down_before_its_heartbeat_could_lapse_and_the_cause_is_named(idle_cluster):
    c = idle_cluster
    # The agent `up` started is not the master's child: its status cannot be known, only its end.
    down = kill_and_wait_back(c, "worker-node-1")
    assert down["cause"] in ("its process ended", "its process was killed by SIGKILL"), down
    assert down["silent_for"] < NODE_TIMEOUT, down  # judged by the event, not by the silence
    # The agent the master respawned is its child: the signal is read, not guessed.
    down = kill_and_wait_back(c, "worker-node-1")
    assert down["cause"] == "its process was killed by SIGKILL", down
    assert down["silent_for"] < NODE_TIMEOUT, down
    wait_until(c.idle, timeout=30, message="an idle cluster")
