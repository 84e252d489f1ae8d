#!/usr/bin/env python
"""Put MNIST in the shared data volume, in MNIST's own file format (ROOT/MNIST/raw/*-ubyte).

    python jobs/prepare_mnist.py [--root DIR] [--source auto|mnist|digits] [--force]

--source mnist   torchvision's download of the real MNIST (needs internet).
--source digits  scikit-learn's handwritten digits: 1,797 real 8x8 scans that ship with the
                 package (no download). Each is scaled to 20x20 and centred in 28x28 as MNIST's
                 digits are, split 80/20 into train and test with a fixed seed, and written as
                 MNIST's idx files, so the same torchvision loading code reads it.
--source auto    (default) mnist when the download works, digits otherwise.
"""

import argparse
import os
import socket
import struct
import sys

import numpy as np

FILES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}


def write_idx(path: str, array: np.ndarray) -> None:
    """MNIST's idx format: magic (0, 0, type 0x08 = ubyte, ndim), big-endian sizes, then data."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(struct.pack(">BBBB", 0, 0, 0x08, array.ndim))
        fh.write(struct.pack(f">{array.ndim}I", *array.shape))
        fh.write(array.tobytes())
    os.replace(tmp, path)


def digits_as_mnist(seed: int = 0, test_fraction: float = 0.2):
    """scikit-learn's digits as 28x28 uint8 images (0-255), split into train and test."""
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0  # N,1,8,8 in 0..1
    scaled = F.interpolate(images, size=(20, 20), mode="bilinear", align_corners=False).clamp(0, 1)
    canvas = torch.zeros(len(images), 1, 28, 28)
    canvas[:, :, 4:24, 4:24] = scaled
    pixels = (canvas.squeeze(1) * 255).round().to(torch.uint8).numpy()
    labels = digits.target.astype(np.uint8)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = int(len(labels) * (1 - test_fraction))
    train, test = order[:cut], order[cut:]
    return {"train": (pixels[train], labels[train]), "test": (pixels[test], labels[test])}


def write_digits(raw: str) -> dict:
    split = digits_as_mnist()
    for part, (images, labels) in split.items():
        write_idx(os.path.join(raw, FILES[(part, "images")]), images)
        write_idx(os.path.join(raw, FILES[(part, "labels")]), labels)
    return {part: len(labels) for part, (_, labels) in split.items()}


def download_mnist(root: str) -> dict:
    from torchvision import datasets

    socket.setdefaulttimeout(15)
    train = datasets.MNIST(root, train=True, download=True)
    test = datasets.MNIST(root, train=False, download=True)
    return {"train": len(train), "test": len(test)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.environ.get("MINIHPC_DATA_DIR") or "/shared/data")
    parser.add_argument("--source", choices=["auto", "mnist", "digits"], default="auto")
    parser.add_argument("--force", action="store_true", help="rewrite the data even if it is there")
    args = parser.parse_args()

    raw = os.path.join(args.root, "MNIST", "raw")
    marker = os.path.join(args.root, "MNIST", "SOURCE")
    present = all(os.path.exists(os.path.join(raw, f)) for f in FILES.values())
    if present and not args.force:
        source = open(marker).read().strip() if os.path.exists(marker) else "unknown"
        print(f"MNIST already in {raw} (source: {source}); --force rewrites it")
        return 0
    os.makedirs(raw, exist_ok=True)
    source, counts = args.source, None
    if source in ("auto", "mnist"):
        try:
            counts, source = download_mnist(args.root), "mnist"
        except Exception as exc:  # noqa: BLE001 - any network failure means: no download here
            if args.source == "mnist":
                print(f"prepare_mnist: error: download failed: {exc}", file=sys.stderr)
                return 1
            print(f"MNIST download unavailable ({type(exc).__name__}); using scikit-learn's digits instead")
    if counts is None:
        counts, source = write_digits(raw), "digits"
    with open(marker, "w") as fh:
        fh.write(source + "\n")
    print(f"MNIST ({source}) ready in {raw}: {counts['train']} training and {counts['test']} test images")
    return 0


if __name__ == "__main__":
    sys.exit(main())
