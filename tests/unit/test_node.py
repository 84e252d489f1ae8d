import json
import sys

from minihpc.core.config import shared_layout
from minihpc.core.launch_spec import LAUNCH_TASK
from minihpc.core.models import NodeState, NodeStatus, node_state_changes
from minihpc.metrics import discovery
from minihpc.node.agent import task_refusal
from minihpc.node.supervisor import commands, supervise


def test_master_node_runs_the_scheduler_and_an_agent():
    master, agent = commands("master-node", True, "/shared", 9100)
    assert master[-3:] == ["master", "--shared-dir", "/shared"]
    assert agent[-5:] == ["agent", "--name", "master-node", "--metrics-port", "9100"]


def test_worker_runs_only_an_agent():
    (agent,) = commands("worker-node-1", False)
    assert agent[-3:] == ["agent", "--name", "worker-node-1"]


def test_supervise_stops_the_others_when_one_daemon_exits():
    code = supervise(
        [[sys.executable, "-c", "import time; time.sleep(60)"], [sys.executable, "-c", "raise SystemExit(3)"]],
        poll=0.05,
    )
    assert code == 3


def test_a_daemon_killed_by_a_signal_makes_the_node_exit_128_plus_it():
    code = supervise(
        [[sys.executable, "-c", "import time; time.sleep(60)"],
         [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]],
        poll=0.05,
    )
    assert code == 137  # the container's exit code names SIGKILL (Docker's die event carries it)


def test_shared_layout_is_one_tree():
    layout = shared_layout("/shared", "compose")
    assert layout == {
        "mode": "compose",
        "spool_dir": "/shared/jobs/spool",
        "log_dir": "/shared/logs",
        "checkpoint_dir": "/shared/models",
        "data_dir": "/shared/data",
    }


def node(name, metrics=None, alive=True):
    return NodeStatus(name=name, addr=name, alive=alive, metrics=metrics)


def test_discovery_lists_nodes_with_an_exporter():
    groups = discovery.targets([node("worker-node-1", "worker-node-1:9100"), node("b"), node("a", "a:9100")],
                               cluster="master-node:9101")
    assert groups == [
        {"targets": ["a:9100"], "labels": {"node": "a", "component": "node"}},
        {"targets": ["worker-node-1:9100"], "labels": {"node": "worker-node-1", "component": "node"}},
        {"targets": ["master-node:9101"], "labels": {"component": "cluster"}},
    ]


def test_discovery_file_is_rewritten_only_on_change(tmp_path):
    path = str(tmp_path / "sd" / "targets.json")
    groups = discovery.targets([node("a", "a:9100")])
    assert discovery.write_atomically(path, groups) is True
    assert discovery.write_atomically(path, groups) is False
    assert json.loads(open(path).read()) == groups
    assert discovery.write_atomically(path, []) is True


def test_node_state_changes():
    before = {"a": NodeState.IDLE, "b": NodeState.ALLOC}
    after = {"a": NodeState.DOWN, "b": NodeState.ALLOC, "c": NodeState.IDLE}
    assert node_state_changes(before, after) == [("a", NodeState.IDLE, NodeState.DOWN), ("c", None, NodeState.IDLE)]


def test_a_node_runs_only_the_plain_launch_task():
    assert task_refusal(LAUNCH_TASK, [None, None, None], []) is None
    assert "refused task 'os.system'" in task_refusal("os.system", [None, None, None], [])
    assert "refused task 'None'" in task_refusal(None, [], [])
    assert "callbacks shutil.rmtree" in task_refusal(LAUNCH_TASK, [None, "shutil.rmtree", None], [])
    assert "webhooks" in task_refusal(LAUNCH_TASK, [None, None, None], ["http://x"])
