"""prepare_mnist.py writes scikit-learn's digits as real MNIST files that torchvision reads."""

import subprocess
import sys
from pathlib import Path

import torch

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def test_digits_are_written_in_mnist_format_and_load_with_torchvision(tmp_path):
    out = subprocess.run(
        [sys.executable, str(JOBS / "prepare_mnist.py"), "--root", str(tmp_path), "--source", "digits"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "1437 training and 360 test images" in out
    from torchvision.datasets import MNIST

    train, test = MNIST(str(tmp_path), train=True), MNIST(str(tmp_path), train=False)
    assert (len(train), len(test)) == (1437, 360)
    assert train.data.shape[1:] == (28, 28) and train.data.dtype == torch.uint8
    assert set(train.targets.tolist()) == set(range(10))
    # The digit sits in MNIST's 20x20 centre box, the 4-pixel border is blank.
    assert train.data[:, :4, :].sum() == 0 and train.data[:, :, 24:].sum() == 0
    assert train.data.max() == 255
    again = subprocess.run(
        [sys.executable, str(JOBS / "prepare_mnist.py"), "--root", str(tmp_path), "--source", "digits"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "already in" in again and "source: digits" in again
