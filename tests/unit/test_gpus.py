"""Which GPUs a node offers, a job gets and each task sees (minihpc.core.gpus), and the launch
spec and node record that carry them."""

import pytest

from minihpc.core import gpus
from minihpc.core.config import load_settings
from minihpc.core.errors import UsageError
from minihpc.core.launch_spec import LaunchSpec, job_env


def test_device_lists_parse_as_slurm_writes_them_and_bad_ones_are_named():
    assert gpus.parse_devices("0,1,4-6") == [0, 1, 4, 5, 6]
    assert gpus.parse_devices("") == []
    for bad in ("a", "1-", "3-1", "0,0", "-1"):
        with pytest.raises(UsageError, match="GPU device list"):
            gpus.parse_devices(bad)
    with pytest.raises(UsageError, match="MINIHPC|GPU device list"):
        load_settings(env={"MINIHPC_NODE_GPU_DEVICES": "0,0"})
    assert load_settings(env={"MINIHPC_NODE_GPU_DEVICES": "2-3"}).node_gpu_devices == "2-3"


def test_a_node_offers_its_list_else_its_count_else_what_it_finds():
    assert gpus.node_devices("2,3", -1, 8) == [2, 3]
    assert gpus.node_devices("", 2, 8) == [0, 1]
    assert gpus.node_devices("", -1, 4) == [0, 1, 2, 3]
    assert gpus.node_devices("", 0, 4) == []


def test_local_nodes_split_the_machines_gpus_and_never_share_one():
    assert gpus.split([0, 1, 2, 3, 4, 5, 6, 7], 4) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert gpus.split([0, 1, 2], 2) == [[0, 1], [2]]
    assert gpus.split([0], 3) == [[0], [], []]
    envs = gpus.local_node_env({}, 8, 4)
    assert [e["MINIHPC_NODE_GPU_DEVICES"] for e in envs] == ["0,1", "2,3", "4,5", "6,7"]
    one = gpus.local_node_env({}, 1, 2)
    assert one[0] == {"MINIHPC_NODE_GPU_DEVICES": "0"}
    assert one[1] == {"MINIHPC_NODE_GPU_DEVICES": "", "MINIHPC_NODE_GPUS": "0"}  # none, not "all it finds"
    assert [e["MINIHPC_NODE_GPU_DEVICES"] for e in gpus.local_node_env({"MINIHPC_NODE_GPU_DEVICES": "4-7"}, 8, 2)] \
        == ["4,5", "6,7"]
    assert gpus.local_node_env({"MINIHPC_NODE_GPUS": "2"}, 0, 3) == [{}, {}, {}]  # made-up GPUs: each node's own
    assert gpus.local_node_env({}, 0, 2) == [{"MINIHPC_NODE_GPU_DEVICES": "", "MINIHPC_NODE_GPUS": "0"}] * 2


def test_a_job_gets_the_first_of_its_nodes_gpus_and_never_more_than_there_are():
    assert gpus.allocate([4, 5, 6], 2) == [4, 5]
    assert gpus.allocate([4, 5], 0) == []
    with pytest.raises(ValueError):
        gpus.allocate([0], 2)


def test_tasks_see_the_jobs_gpus_or_with_gpus_per_task_their_own_slice():
    assert gpus.task_devices([2, 3, 4, 5], 0, 1) == [2, 3, 4, 5]
    assert gpus.task_devices([2, 3, 4, 5], 2, 0) == [2, 3]
    assert gpus.task_devices([2, 3, 4, 5], 2, 1) == [4, 5]
    assert gpus.task_devices([2, 3], 1, 3) == [3]  # more tasks than GPUs: they share, in turn
    share = gpus.job_env([2, 3], 1)
    assert share == {"CUDA_VISIBLE_DEVICES": "2,3", "GPU_DEVICE_ORDINAL": "2,3", "SLURM_JOB_GPUS": "2,3",
                     "SLURM_STEP_GPUS": "2,3", "SLURM_GPUS_ON_NODE": "2", "SLURM_GPUS_PER_TASK": "1"}
    assert gpus.task_env(share, 1) == {"CUDA_VISIBLE_DEVICES": "3", "GPU_DEVICE_ORDINAL": "3", "SLURM_STEP_GPUS": "3"}
    assert gpus.task_env(gpus.job_env([2, 3], 0), 1) == {}  # no --gpus-per-task: every task sees both


def test_a_job_without_gpus_sees_none_rather_than_every_gpu_of_the_node():
    spec = LaunchSpec(job_id=1, attempt=1, name="j", node="n1", node_rank=0, nodes=["n1"], master_addr="h",
                      tasks_per_node=1, script="/s.py")
    env = job_env(spec, 29500, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert "SLURM_JOB_GPUS" not in env and "SLURM_GPUS_ON_NODE" not in env
    with_gpus = LaunchSpec.from_payload(dict(spec.to_payload(), gpus=[1], gpus_per_task=0))
    assert job_env(with_gpus, 29500, {})["CUDA_VISIBLE_DEVICES"] == "1"
    assert job_env(with_gpus, 29500, {})["SLURM_GPUS_ON_NODE"] == "1"


def test_counts_in_slurms_forms():
    assert gpus.count("2", "--gpus") == 2
    assert gpus.count("gpu:2", "--gpus") == 2
    assert gpus.count("gpu:h100:4", "--gres") == 4
    with pytest.raises(UsageError, match="--gpus-per-task"):
        gpus.count("tpu:2", "--gpus-per-task")
