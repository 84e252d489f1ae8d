#!/usr/bin/env python
"""Load a trained MNIST checkpoint and print its accuracy on the held-out test images.

    python jobs/validate_mnist.py [--job ID | --checkpoint-dir DIR] [--min-accuracy 0.9]

Without --job or --checkpoint-dir it takes the most recently written job directory under the
models volume. Exits 1 when the accuracy is below --min-accuracy.
"""
import argparse
import os
import sys

import torch

import mnist
from minihpc import checkpoint


def newest_job_dir(root: str) -> str | None:
    dirs = [os.path.join(root, d) for d in os.listdir(root) if d.startswith("job-")] if os.path.isdir(root) else []
    dirs = [d for d in dirs if checkpoint.steps(d)]
    return max(dirs, key=lambda d: os.path.getmtime(os.path.join(d, checkpoint.LATEST)), default=None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job", type=int, default=None, help="the training job's id")
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--models-root", default=os.environ.get("MINIHPC_MODELS_DIR") or mnist.models_root())
    p.add_argument("--data-root", default=None)
    p.add_argument("--min-accuracy", type=float, default=0.0)
    args = p.parse_args()

    directory = args.checkpoint_dir or (
        os.path.join(args.models_root, f"job-{args.job}") if args.job else newest_job_dir(args.models_root)
    )
    if directory is None:
        print(f"validate_mnist: error: no checkpoints under {args.models_root}; train first", file=sys.stderr)
        return 1
    found = checkpoint.load_latest(directory)
    if found is None:
        print(f"validate_mnist: error: no valid checkpoint in {directory}", file=sys.stderr)
        return 1
    model = mnist.Net()
    model.load_state_dict(found.state["model"])
    model.eval()
    test = mnist.dataset(mnist.data_root(args.data_root), train=False)
    loader = torch.utils.data.DataLoader(test, batch_size=256)
    correct = 0
    with torch.no_grad():
        for images, labels in loader:
            correct += (model(images).argmax(1) == labels).sum().item()
    accuracy = correct / len(test)
    print(f"checkpoint {found.path} (step {found.step})")
    print(f"test accuracy {accuracy:.4f} ({correct}/{len(test)} held-out images)")
    if accuracy < args.min_accuracy:
        print(f"validate_mnist: accuracy {accuracy:.4f} is below {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
