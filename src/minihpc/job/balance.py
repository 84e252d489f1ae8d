"""Batch sizes in proportion to each rank's speed: one global batch, split by throughput.

    from minihpc import balance
    balancer = balance.Balancer(global_batch=32 * world, rank=rank, world=world)
    sampler = balance.GlobalBatchSampler(len(data), balancer.global_batch, rank, lambda: balancer.shares)
    loader = DataLoader(data, batch_sampler=sampler)      # num_workers=0: shares read per batch
    for step, (x, y) in enumerate(loader, 1):
        loss = F.cross_entropy(ddp_model(x), y)
        balancer.scale_loss(loss, len(y)).backward()      # weight world * b_r / B
        optimizer.step()
        balancer.observe(len(y), own_seconds)             # this rank's own work, no waiting
        balancer.step(step)                               # every `every` steps: gather, maybe re-split

Every rank's batch is a slice of the same global batch: global step s covers positions
perm[s*B:(s+1)*B] of the epoch's permutation, rank r the slice [offset_r, offset_r + b_r) with
the offsets the prefix sums of the current shares b. Rank r's gradient g_r is that of its mean
loss; DDP averages gradients over the N ranks, so weighting each rank's loss by N * b_r / B gives
sum_r (b_r / B) * g_r: the mean gradient over the B samples, what one process training on the
whole global batch computes. The update is the same whatever the split, so shares may change
between any two steps; only float summation order differs (about 1e-7 relative).

Shares are decided by pure functions (:func:`shares`, :func:`should_rebalance`, :func:`plan`)
from speeds every rank gathered identically, so every rank reaches the same split.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

EVERY = 10
"""Steps between speed checks (one small all_gather each)."""
THRESHOLD = 0.1
"""Re-split when some rank's speed moved by more than this fraction of the speed last used."""
SMOOTHING = 0.2
"""Weight of the newest step in a rank's moving average of its speed (about a 10-step memory)."""
HISTORY = 20
"""Re-balances kept for logging."""


def shares(speeds: Sequence[float], global_batch: int, minimum: int = 1) -> list[int]:
    """Batch sizes proportional to ``speeds`` that sum to ``global_batch``, each >= ``minimum``.

    Largest-remainder apportionment on exact fractions: a rank whose quota falls below
    ``minimum`` is given ``minimum`` and the rest is shared again among the others; then each
    rank gets the whole part of its quota and the samples left over go to the largest
    remainders, the lower rank first on a tie. The same inputs give the same shares anywhere."""
    _check(speeds, global_batch, minimum)
    exact = [Fraction(s) for s in speeds]
    pinned: set[int] = set()
    while True:
        free = [r for r in range(len(exact)) if r not in pinned]
        left = global_batch - minimum * len(pinned)
        total = sum(exact[r] for r in free)
        quota = {r: left * exact[r] / total for r in free}
        low = {r for r in free if quota[r] < minimum}
        if not low:
            break
        pinned |= low
    out = [minimum if r in pinned else math.floor(quota[r]) for r in range(len(exact))]
    spare = global_batch - sum(out)
    for r in sorted(free, key=lambda r: (-(quota[r] - out[r]), r))[:spare]:
        out[r] += 1
    return out


def _check(speeds: Sequence[float], global_batch: int, minimum: int) -> None:
    if not speeds:
        raise ValueError("no speeds: need one per rank")
    bad = [(r, s) for r, s in enumerate(speeds) if not (isinstance(s, (int, float)) and math.isfinite(s) and s > 0)]
    if bad:
        raise ValueError(f"speed of rank {bad[0][0]} is {bad[0][1]!r}; speeds must be positive and finite")
    if minimum < 1:
        raise ValueError(f"minimum batch {minimum} is below 1; every rank needs a sample")
    if global_batch < minimum * len(speeds):
        raise ValueError(f"global batch {global_batch} cannot give {len(speeds)} ranks at least {minimum} "
                         f"each (needs {minimum * len(speeds)})")


def should_rebalance(used_speeds: Sequence[float], measured_speeds: Sequence[float], threshold: float) -> bool:
    """Whether any rank's speed moved by more than ``threshold`` (a fraction) of the speed the
    current shares were computed from."""
    if len(used_speeds) != len(measured_speeds):
        raise ValueError(f"{len(measured_speeds)} speeds measured for {len(used_speeds)} ranks")
    if threshold < 0:
        raise ValueError(f"threshold {threshold} is negative")
    return any(abs(m - u) > threshold * u for u, m in zip(used_speeds, measured_speeds, strict=True))


def imbalance(current: Sequence[int], speeds: Sequence[float]) -> float:
    """How much longer the slowest rank's own work per step takes than the fastest's (a
    fraction: 0.2 is 20 % longer) with the split ``current`` at ``speeds``."""
    times = [b / s for b, s in zip(current, speeds, strict=True)]
    return max(times) / min(times) - 1


def plan(used_speeds: Sequence[float] | None, measured_speeds: Sequence[float], global_batch: int,
         threshold: float, minimum: int = 1, current: Sequence[int] | None = None) -> list[int] | None:
    """The shares after a speed check, or None to keep the current ones: None while some rank
    has no measurement yet, or when no speed moved past ``threshold`` and the ``current``
    split (when given) leaves the ranks' own times per step within ``threshold`` of each other.
    Without ``used_speeds`` (equal shares at the start) the first full measurement decides.

    The second test matters where speed depends on the share: a node limited by a CPU quota
    is measured faster while it has little to do than once it has its full share, so the
    first split from measured speeds overloads it, and its speed then settles where the old
    speeds' threshold may not see it; the repeated split converges on equal times."""
    if not all(isinstance(s, (int, float)) and math.isfinite(s) and s > 0 for s in measured_speeds):
        return None
    if (used_speeds is not None and not should_rebalance(used_speeds, measured_speeds, threshold)
            and (current is None or imbalance(current, measured_speeds) <= threshold)):
        return None
    return shares(measured_speeds, global_batch, minimum)


def bounds(current: Sequence[int], rank: int) -> tuple[int, int]:
    """Rank ``rank``'s slice [start, stop) of a global batch split as ``current``."""
    start = sum(current[:rank])
    return start, start + current[rank]


def loss_weight(samples: int, global_batch: int, world: int) -> float:
    """What a rank's mean loss over ``samples`` is multiplied by so that DDP's gradient average
    is the mean gradient over the global batch: world * samples / global_batch."""
    return world * samples / global_batch


def own_seconds(lap: dict[str, float]) -> float:
    """A rank's own work per step from :meth:`StepTimer.lap`: data + forward + backward +
    optimizer. ``backward_seconds`` already excludes the gradient all-reduce, which is where a
    fast rank waits for slow ones; everything else scales with this rank's batch or its CPU."""
    return sum(lap.get(f"{name}_seconds", 0.0) for name in ("data", "forward", "backward", "optimizer"))


class GlobalBatchSampler:
    """Batches of dataset positions for one rank: its slice of each global batch.

    Per epoch a permutation of ``range(size)`` from a torch.Generator seeded with seed + epoch
    (the same on every rank, as DistributedSampler's); global step s covers perm[s*B:(s+1)*B],
    the last incomplete global batch dropped. ``shares()`` is called as each batch is yielded,
    so a re-balance applies from the next batch (use the sampler as a DataLoader's
    ``batch_sampler`` with ``num_workers=0``: it asks for one batch at a time). The position
    in the epoch is a step number, independent of the shares, so :meth:`set_epoch` can start
    mid-epoch on resume. With one rank it yields exactly a single process's batches."""

    def __init__(self, size: int, global_batch: int, rank: int, shares: Callable[[], Sequence[int]], seed: int = 0):
        if global_batch < 1 or size < global_batch:
            raise ValueError(f"a dataset of {size} samples has no global batch of {global_batch}")
        self.size, self.global_batch, self.rank = size, global_batch, rank
        self.shares, self.seed = shares, seed
        self.epoch, self.start = 0, 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        """Iterate epoch ``epoch`` from its global step ``start`` (0-based) on."""
        if not 0 <= start <= len(self):
            raise ValueError(f"step {start} is outside an epoch of {len(self)} steps")
        self.epoch, self.start = epoch, start

    def __len__(self) -> int:
        return self.size // self.global_batch

    def __iter__(self) -> Iterator[list[int]]:
        import torch

        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        perm = torch.randperm(self.size, generator=generator)
        for step in range(self.start, len(self)):
            current = self.shares()
            if sum(current) != self.global_batch:
                raise ValueError(f"shares {list(current)} sum to {sum(current)}, not the global batch "
                                 f"{self.global_batch}")
            start, stop = bounds(current, self.rank)
            base = step * self.global_batch
            yield perm[base + start:base + stop].tolist()


@dataclass(frozen=True)
class Rebalance:
    """A new split, decided after ``step`` from ``speeds`` (samples/s per rank)."""

    step: int
    shares: tuple[int, ...]
    speeds: tuple[float, ...]

    def __str__(self) -> str:
        return (f"step {self.step}: batch sizes {'/'.join(map(str, self.shares))} "
                f"(speeds {'/'.join(f'{s:.0f}' for s in self.speeds)} samples/s)")


def all_gather_floats(value: float) -> list[float]:
    """Every rank's ``value``, in rank order (one float64 all_gather, on the device the group's
    backend moves; just ``[value]`` without a process group)."""
    import torch
    import torch.distributed as dist

    from minihpc.job import devices

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [float(value)]
    device = devices.collective_device()
    out = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(dist.get_world_size())]
    dist.all_gather(out, torch.tensor([value], dtype=torch.float64, device=device))
    return [t.item() for t in out]


class Balancer:
    """This rank's share of the global batch, re-split by measured speed.

    The speed is samples per second of this rank's own work (:func:`own_seconds`: data,
    forward, backward without the all-reduce, optimizer), as a moving average. Time spent
    waiting in the all-reduce is left out because it is the slow ranks' cost, not this
    rank's. Fixed per-step costs (the optimizer) are left in: then speed = b / (a + c*b), and
    splitting in proportion to it again and again has its fixed point where every rank's own
    time per step is the same, the split at which nobody waits. (With several DDP buckets the all-reduce overlaps the backward
    pass and ``backward`` is underestimated; the MNIST net has one bucket.)

    Every ``every`` steps :meth:`step` gathers all ranks' speeds and applies :func:`plan`:
    a collective call, so every rank must make it at every step. ``gather`` (a function from
    this rank's value to all ranks' values) stands in for torch.distributed in tests."""

    def __init__(self, global_batch: int, rank: int, world: int, *, every: int = EVERY, threshold: float = THRESHOLD,
                 speeds: Sequence[float] | None = None, minimum: int = 1, smoothing: float = SMOOTHING,
                 gather: Callable[[float], list[float]] = all_gather_floats):
        if every < 1:
            raise ValueError(f"every {every}: speed checks need a positive step interval")
        self.global_batch, self.rank, self.world = global_batch, rank, world
        self.every, self.threshold, self.minimum, self.smoothing = every, threshold, minimum, smoothing
        self.gather = gather
        self.speed: float | None = None
        self.history: deque[Rebalance] = deque(maxlen=HISTORY)
        self.used_speeds: list[float] | None = None
        self.shares = shares([1.0] * world, global_batch, minimum)
        if speeds is not None:
            self.apply(speeds, step=0)

    @property
    def share(self) -> int:
        return self.shares[self.rank]

    def weight(self, samples: int | None = None) -> float:
        """This rank's loss weight for a batch of ``samples`` (default: its current share)."""
        return loss_weight(self.share if samples is None else samples, self.global_batch, self.world)

    def scale_loss(self, loss, samples: int | None = None):
        """``loss`` (this rank's mean) weighted so DDP's average is the global-batch gradient."""
        return loss * self.weight(samples)

    def global_loss(self, loss: float, samples: int) -> float:
        """The mean loss over the global batch, from every rank's mean over its ``samples``
        (a collective call)."""
        return sum(self.gather(float(loss) * samples)) / self.global_batch

    def observe(self, samples: int, seconds: float) -> None:
        """One step of this rank's own work: ``samples`` in ``seconds``."""
        if seconds <= 0:
            return
        now = samples / seconds
        self.speed = now if self.speed is None else self.smoothing * now + (1 - self.smoothing) * self.speed

    def step(self, step: int) -> Rebalance | None:
        """After training ``step``: on every ``every``-th, gather the speeds and re-split when
        :func:`plan` says so. Returns the re-balance when the shares changed."""
        if step % self.every:
            return None
        measured = self.gather(self.speed if self.speed is not None else 0.0)
        new = plan(self.used_speeds, measured, self.global_batch, self.threshold, self.minimum, self.shares)
        if new is None:
            return None
        return self.apply(measured, step, new)

    def apply(self, speeds: Sequence[float], step: int, new: list[int] | None = None) -> Rebalance | None:
        """Split in proportion to ``speeds`` from now on (returns the change, if any)."""
        new = shares(speeds, self.global_batch, self.minimum) if new is None else new
        self.used_speeds = [float(s) for s in speeds]
        if new == self.shares:
            return None
        self.shares = new
        change = Rebalance(step, tuple(new), tuple(self.used_speeds))
        self.history.append(change)
        return change

    def state_dict(self) -> dict:
        return {"shares": list(self.shares), "used_speeds": self.used_speeds}

    def load_state_dict(self, state: dict) -> bool:
        """Take saved shares when they fit this run (same ranks, same global batch)."""
        saved = list(state.get("shares") or [])
        if len(saved) != self.world or sum(saved) != self.global_batch or min(saved) < self.minimum:
            return False
        used = state.get("used_speeds")
        self.shares, self.used_speeds = saved, list(used) if used and len(used) == self.world else None
        return True
