"""The GPU suite's cluster: the integration suite's real local cluster (redis-server, the master
and node agents as processes, driven through the CLI), started once for the session by the same
fixtures, and the node of it that registered the most GPUs."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.conftest import cluster, idle_cluster  # noqa: F401  (the fixtures, reused)

JOBS = Path(__file__).parent / "jobs"
ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "jobs" / "train_mnist_distributed.py"
PREPARE = ROOT / "jobs" / "prepare_mnist.py"


@dataclass(frozen=True)
class GpuNode:
    name: str
    gpus: int


@pytest.fixture
def gpu_node(idle_cluster) -> GpuNode:  # noqa: F811  (the fixture imported above)
    """The node with the most GPUs; a failure, not a skip, when torch sees GPUs here and no node
    registered one (local nodes share the machine's GPUs among them)."""
    import torch

    nodes = idle_cluster.nodes()
    best = max(nodes, key=lambda n: n.get("gpus", 0))
    if best.get("gpus", 0) < 1:
        pytest.fail(f"torch sees {torch.cuda.device_count()} GPU(s) on this machine but no node registered one: "
                    f"{[(n['name'], n.get('gpus')) for n in nodes]}")
    return GpuNode(best["name"], best["gpus"])
