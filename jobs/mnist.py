"""What the MNIST jobs share: the network, the dataset and where things live.

Importable by the job scripts beside it: local mode puts a submitted script's own folder on
PYTHONPATH, and the node image has /opt/minihpc/jobs there.
"""

import os

import torch
from torch import nn

MEAN, STD = 0.1307, 0.3081  # MNIST's pixel statistics, as in torchvision's examples


def data_root(arg: str | None = None) -> str:
    return arg or os.environ.get("MINIHPC_DATA_DIR") or "/shared/data"


def models_root() -> str:
    """The cluster's checkpoint root: a job's own directory's parent."""
    own = os.environ.get("MINIHPC_CHECKPOINT_DIR")
    return os.path.dirname(own) if own else "/shared/models"


def dataset(root: str, train: bool):
    """MNIST from ``root``/MNIST/raw, as prepare_mnist.py writes it (never downloads)."""
    from torchvision import datasets, transforms

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])
    try:
        return datasets.MNIST(root, train=train, download=False, transform=transform)
    except RuntimeError as exc:
        raise SystemExit(f"no MNIST data in {root} ({exc}); run `make prepare-data` first") from None


class Net(nn.Module):
    """A small CNN: two conv blocks and two linear layers (about 60k parameters)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 5 * 5, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
