"""Faults a rank injects into itself (``validate run --inject KIND``), for fault-test.

slow        sleeps SLOW_SECONDS in its compute phase every step from the fault step on
grad-noise  adds noise to its gradient bucket before the all-reduce (a DDP comm hook)
hang        stops before its forward at the fault step and never comes back
nan         one element of its gradient bucket becomes NaN before the all-reduce
drift       adds DRIFT to every parameter of its model, outside DDP
bitflip     flips one bit of one float of one weight
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from minihpc.core.errors import UsageError

KINDS = ("slow", "grad-noise", "hang", "nan", "drift", "bitflip")
SLOW_SECONDS = 0.5
DRIFT = 1e-3
NOISE_SCALE = 1.0
"""Noise added to each gradient element: NOISE_SCALE * N(0, 1)."""
FLIP_BIT = 40
"""The bit flipped in a float64 weight: a mantissa bit (a relative change of 2**-12), silent
corruption that no loss or NaN check sees at once -- the parameter checksum's case."""


@dataclass(frozen=True)
class Fault:
    kind: str | None = None
    rank: int = 1
    step: int = 0

    def at(self, rank: int, step: int, kind: str) -> bool:
        """This fault, on this rank, starting at this step (a step fault fires once)."""
        return self.kind == kind and rank == self.rank and step == self.step

    def since(self, rank: int, step: int, kind: str) -> bool:
        """This fault, on this rank, at or after its step (lasting faults)."""
        return self.kind == kind and rank == self.rank and step >= self.step


def check(kind: str | None, rank: int, step: int, workers: int, steps: int) -> Fault:
    if kind is None:
        return Fault()
    if kind not in KINDS:
        raise UsageError(f"--inject {kind!r} is not a fault kind; choose from {', '.join(KINDS)}")
    if not 0 <= rank < workers:
        raise UsageError(f"--fault-rank {rank} is not a rank of {workers} workers")
    if not 0 <= step < steps:
        raise UsageError(f"--fault-step {step} is not one of the {steps} steps")
    return Fault(kind, rank, step)


def before_forward(fault: Fault, rank: int, step: int, model) -> None:
    """Hang, drift and bitflip act on the rank's model before it computes."""
    import torch

    if fault.at(rank, step, "hang"):
        while True:
            time.sleep(3600)
    if fault.at(rank, step, "drift"):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(DRIFT)
    if fault.at(rank, step, "bitflip"):
        with torch.no_grad():
            weight = next(model.parameters()).view(-1)
            weight[0] = flip(float(weight[0]), FLIP_BIT)


def in_compute(fault: Fault, rank: int, step: int) -> None:
    if fault.since(rank, step, "slow"):
        time.sleep(SLOW_SECONDS)


def on_bucket(fault: Fault, rank: int, step: int, buffer) -> None:
    """Grad-noise and NaN act on the rank's gradient bucket before the all-reduce."""
    import torch

    if fault.since(rank, step, "grad-noise"):
        gen = torch.Generator().manual_seed(1000 + step)
        noise = torch.randn(buffer.shape, generator=gen, dtype=buffer.dtype)  # drawn on the CPU: the same on a GPU
        buffer.add_(NOISE_SCALE * noise.to(buffer.device))
    if fault.at(rank, step, "nan"):
        buffer.view(-1)[0] = float("nan")


def flip(value: float, bit: int) -> float:
    """``value`` (a float64) with one bit of its IEEE-754 representation flipped."""
    (raw,) = struct.unpack("<Q", struct.pack("<d", value))
    return struct.unpack("<d", struct.pack("<Q", raw ^ (1 << bit)))[0]
