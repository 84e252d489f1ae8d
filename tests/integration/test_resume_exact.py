"""A deterministic CPU training run that loses a node and resumes from its checkpoint computes
the same per-step loss as the run that was never interrupted, from the resume step on."""

import subprocess
import sys
from pathlib import Path

import pytest

from minihpc.job import tensorboard
from tests.conftest import wait_until
from tests.integration.test_requeue import kill_node

pytestmark = pytest.mark.integration

TRAIN = Path(__file__).resolve().parents[2] / "jobs" / "train_mnist_distributed.py"
PREPARE = TRAIN.with_name("prepare_mnist.py")


def losses(path: Path) -> dict[tuple[int, int], float]:
    out = {}
    for line in path.read_text().splitlines():
        attempt, step, loss = line.split()
        out[(int(attempt), int(step))] = float(loss)
    return out


def test_a_resumed_run_reproduces_the_uninterrupted_losses(idle_cluster, tmp_path):
    c = idle_cluster
    subprocess.run([sys.executable, str(PREPARE), "--root", str(c.state_dir / "shared" / "data"), "--source", "digits"],
                   check=True, capture_output=True)
    args = ["--epochs", "6", "--checkpoint-every", "5"]
    clean = c.submit("-N", 3, TRAIN, *args, "--loss-log", tmp_path / "clean.txt", "--tensorboard", tmp_path / "tb")
    assert c.wait(clean, timeout=300)["state"] == "COMPLETED"
    # TensorBoard got every step's loss (the same as the loss log), samples/s and gradient norm.
    (events,) = (tmp_path / "tb").glob("events.out.tfevents.*")
    scalars = tensorboard.read_scalars(events)[1]
    logged = {step: loss for (_, step), loss in losses(tmp_path / "clean.txt").items()}
    assert {step: value for step, tag, value in scalars if tag == "loss"} == pytest.approx(logged, rel=1e-6)
    for tag in ("samples_per_second", "grad_norm"):
        assert sorted(step for step, t, _ in scalars if t == tag) == sorted(logged), tag

    interrupted = c.submit("-N", 3, TRAIN, *args, "--loss-log", tmp_path / "cut.txt")
    cut = tmp_path / "cut.txt"
    wait_until(lambda: cut.exists() and len(cut.read_text().splitlines()) >= 22, timeout=120, interval=0.02,
               message="22 steps")
    kill_node(c, "worker-node-2")
    job = c.wait(interrupted, timeout=300)
    assert job["state"] == "COMPLETED" and job["attempts"] == 2

    reference = {step: loss for (_, step), loss in losses(tmp_path / "clean.txt").items()}
    resumed = {step: loss for (attempt, step), loss in losses(cut).items() if attempt == 2}
    first = min(resumed)
    assert 1 < first <= 23, first  # resumed from a checkpoint, not from the start
    assert sorted(resumed) == list(range(first, max(reference) + 1))
    worst = max(abs(resumed[s] - reference[s]) for s in resumed)
    assert worst <= 1e-6, worst
