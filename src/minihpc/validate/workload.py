"""What a validation run trains: the deterministic synthetic regression set (or MNIST), the
model, and how the global batch is split over ranks.

Rank r of N takes dataset positions r, r+N, r+2N, ... (DistributedSampler, shuffle off), in
local batches of B/N; local batch k of every rank together is global batch k, positions
[k*B, (k+1)*B) -- exactly the batch a single process of batch B trains on at step k. With equal
local batches, DDP's averaged gradient is the single process's gradient of the mean loss.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from minihpc.core.errors import UsageError

WORKLOADS = ("synthetic", "mnist")
MODELS = ("mlp", "net")
"""The MLP (--hidden), or the MNIST job's CNN (``jobs/mnist.py``'s Net, MNIST only)."""
SAMPLES = 4096
"""Samples in the synthetic set (rounded down to a multiple of the global batch)."""
IN_FEATURES = 16
MNIST_TRAIN = 60000
MNIST_FEATURES = 784
OUTPUTS = {"synthetic": 1, "mnist": 10}
"""The model's outputs each workload needs: a regression target, ten digit classes."""
EVAL_SAMPLES = 1000
"""Held-out samples ``--eval-steps`` evaluates on (MNIST: the first of its test set)."""
TEST_SEED_OFFSET = 1_000_003
"""The synthetic test inputs' seed: the training seed plus this, the same target function."""


def check_batch(batch_size: int, workers: int) -> int:
    """The local batch size; UsageError unless the global batch splits evenly over workers."""
    if batch_size < 1 or workers < 1:
        raise UsageError(f"--batch-size and --workers must be positive, got {batch_size} and {workers}")
    if batch_size % workers:
        raise UsageError(f"--batch-size {batch_size} is not divisible by {workers} workers; "
                         "each rank must take an equal share of the global batch")
    return batch_size // workers


def dataset_size(samples: int, batch_size: int) -> int:
    """Samples used: a whole number of global batches, so every epoch splits the same way."""
    return max(batch_size, samples - samples % batch_size)


def local_positions(step: int, rank: int, world: int, batch_size: int, size: int) -> list[int]:
    """Dataset positions rank ``rank`` trains on at ``step`` (what DistributedSampler yields)."""
    local = batch_size // world
    start = (step * batch_size) % size
    return [start + rank + world * j for j in range(local)]


def parse_hidden(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in str(text).split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--hidden {text!r} is not a comma-separated list of layer sizes") from None
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--hidden {text!r}: give 1 or more positive layer sizes, e.g. 64,64")
    return sizes


def model_kind(model: str | None, name: str) -> str:
    """The model a workload trains: ``--model``, or the workload's own (MLP; MNIST: its CNN)."""
    kind = model or ("net" if name == "mnist" else "mlp")
    if kind not in MODELS:
        raise UsageError(f"--model {kind!r} is not one of {', '.join(MODELS)}")
    if kind == "net" and name != "mnist":
        raise UsageError("--model net (model.type Net) is the MNIST CNN; the synthetic workload trains the MLP")
    return kind


def check_shape(name: str, in_features: int | None, out_features: int | None) -> None:
    """UsageError where the model's inputs or outputs (model.input_dim / model.out) cannot fit
    the workload's data."""
    if name == "mnist" and in_features not in (None, MNIST_FEATURES):
        raise UsageError(f"--in-features {in_features}: MNIST images have {MNIST_FEATURES} inputs")
    if in_features is not None and in_features < 1:
        raise UsageError(f"--in-features {in_features} must be at least 1")
    if out_features is not None and (isinstance(out_features, bool) or out_features != OUTPUTS[name]):
        raise UsageError(f"model.out {out_features}: the {name} workload's model has {OUTPUTS[name]} output(s)")


def steps_per_epoch(name: str, samples: int, batch_size: int, workers: int) -> int:
    """Steps in one pass over the training data, as :func:`loader` batches it."""
    if name == "mnist":
        return (MNIST_TRAIN // workers) // (batch_size // workers)
    return dataset_size(samples, batch_size) // batch_size


def jobs_dir() -> Path:
    """<repo>/jobs, or MINIHPC_JOBS_DIR."""
    if os.environ.get("MINIHPC_JOBS_DIR"):
        return Path(os.environ["MINIHPC_JOBS_DIR"])
    return Path(__file__).resolve().parents[3] / "jobs"


def mnist_root(data_dir: str | None) -> str:
    """Where MNIST is; UsageError naming how to put it there when it is missing."""
    root = data_dir or os.environ.get("MINIHPC_DATA_DIR") or "/shared/data"
    if not (Path(root) / "MNIST" / "raw").is_dir():
        raise UsageError(f"no MNIST data in {root}; run `make prepare-data` (jobs/prepare_mnist.py) "
                         "or pass --data-dir")
    return root


def _synthetic(seed: int, samples: int, in_features: int):
    """(X, the target function's weights, the generator after them)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, in_features, generator=gen)
    w1 = torch.randn(in_features, 32, generator=gen) / in_features ** 0.5
    w2 = torch.randn(32, 1, generator=gen) / 32 ** 0.5
    return x, (w1, w2), gen


def _target(x, weights, gen):
    import torch

    w1, w2 = weights
    return torch.tanh(x @ w1) @ w2 + 0.3 * torch.sin(x[:, :1] * 2) + 0.01 * torch.randn(x.shape[0], 1, generator=gen)


def synthetic(seed: int, samples: int, in_features: int):
    """X ~ N(0, 1); y = a fixed random two-layer tanh function of X plus 1% noise."""
    import torch

    x, weights, gen = _synthetic(seed, samples, in_features)
    return torch.utils.data.TensorDataset(x, _target(x, weights, gen))


def synthetic_test(seed: int, samples: int, in_features: int, test_samples: int = EVAL_SAMPLES):
    """Held-out samples of the same function as ``synthetic(seed, samples, in_features)``."""
    import torch

    _x, weights, _gen = _synthetic(seed, samples, in_features)
    gen = torch.Generator().manual_seed(seed + TEST_SEED_OFFSET)
    x = torch.randn(test_samples, in_features, generator=gen)
    return torch.utils.data.TensorDataset(x, _target(x, weights, gen))


def mlp(in_features: int, hidden: list[int], out: int = 1):
    from torch import nn

    layers, width = [], in_features
    for size in hidden:
        layers += [nn.Linear(width, size), nn.Tanh()]
        width = size
    return nn.Sequential(*layers, nn.Linear(width, out))


def _mnist():
    sys.path.insert(0, str(jobs_dir()))
    import mnist  # jobs/mnist.py: the MNIST job's network and dataset

    return mnist


def build(args):
    """(dataset, model, loss function) for the worker's arguments; the model is seeded so
    every rank starts from the same weights."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    if args.workload == "mnist":
        mnist = _mnist()
        data = mnist.dataset(mnist_root(args.data_dir), train=True)
        torch.manual_seed(args.seed)
        if model_kind(args.model, "mnist") == "net":
            return data, mnist.Net(), F.cross_entropy
        return data, nn.Sequential(nn.Flatten(), mlp(MNIST_FEATURES, parse_hidden(args.hidden), 10)), F.cross_entropy
    size = dataset_size(args.samples, args.batch_size)
    features = args.in_features or IN_FEATURES
    data = synthetic(args.seed, size, features)
    torch.manual_seed(args.seed)
    return data, mlp(features, parse_hidden(args.hidden)), F.mse_loss


def test_batch(args):
    """The held-out set ``--eval-steps`` evaluates on, as one batch (inputs, targets)."""
    import torch

    if args.workload == "mnist":
        full = _mnist().dataset(mnist_root(args.data_dir), train=False)
        data = torch.utils.data.Subset(full, range(min(EVAL_SAMPLES, len(full))))
    else:
        size = dataset_size(args.samples, args.batch_size)
        data = synthetic_test(args.seed, size, args.in_features or IN_FEATURES)
    x, y = next(iter(torch.utils.data.DataLoader(data, batch_size=len(data))))
    return x.to(torch.get_default_dtype()), y


def loader(data, rank: int, world: int, batch_size: int, epoch: int = 0):
    """Local batches of B/world in DistributedSampler order (no shuffle, whole batches only)."""
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False, drop_last=True)
    sampler.set_epoch(epoch)
    local = batch_size // world
    return DataLoader(data, batch_size=local, sampler=sampler, drop_last=True,
                      generator=torch.Generator().manual_seed(0))


def batches(data, rank: int, world: int, batch_size: int):
    """Endless local batches, epoch after epoch."""
    epoch = 0
    while True:
        for batch in loader(data, rank, world, batch_size, epoch):
            yield batch
        epoch += 1
