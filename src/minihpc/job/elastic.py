"""What a job script needs to go on through an elastic job's changes of size (issue 36).

    from minihpc import balance, checkpoint, elastic
    size = elastic.membership()                   # None in a fixed-size job
    global_batch = elastic.global_batch(32)       # 32 x the most ranks the job may have: the same at every size
    balancer = balance.Balancer(global_batch, rank, world, every=elastic.NEVER)
    sampler = balance.GlobalBatchSampler(len(data), global_batch, rank, lambda: balancer.shares)
    ...
    with elastic.rescue(lambda: checkpoint.save(ckpt_dir, step, state())):
        train()                                   # a peer's node left: this rank saves, then fails

A job submitted with ``--elastic -N MIN-MAX`` is launched again, whole, each time it changes
size: a node of it failed or was drained (it goes on with the others while they are at least
MIN), or nodes came free (it takes them, up to MAX). Every launch is a new process group with
a new WORLD_SIZE and RANK, so a script continues as it would after a requeue -- from its
checkpoint -- and three things keep that exact:

- **The global batch stays the same** whatever the size: split it over the ranks there are
  (:func:`global_batch`, :mod:`minihpc.balance`'s sampler and loss weights), so every step
  trains on the same samples with the same mean gradient, and the loss curve does not jump.
- **The position comes from the global step**: the sampler starts the epoch at the step the
  checkpoint holds, not at a per-rank offset that depends on the world size.
- **No step is lost** where the ranks can save: when the cluster ends a launch to start the
  next one, each rank gets SIGTERM (:mod:`minihpc.preempt`: they agree on a step and rank 0
  saves it); when a peer's node dies, the collective a rank is in fails, and :func:`rescue`
  saves the state this rank holds -- every rank of a data-parallel gang holds the same, that
  of the last step completed -- before the error ends it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

ENV = "MINIHPC_ELASTIC"
"""The job's node range, ``MIN-MAX``, set in an elastic job's ranks only."""
RESIZES_ENV = "MINIHPC_RESIZES"
"""How many times the job changed size within its attempt before this launch."""
NEVER = 1 << 62
"""A :class:`minihpc.balance.Balancer`'s ``every`` that never re-splits by speed."""


@dataclass(frozen=True)
class Membership:
    """An elastic job's size now and the range it may change within."""

    least: int  # nodes it goes on with at the fewest (-N MIN)
    most: int  # nodes it may grow to (-N MAX)
    nodes: int  # nodes in this launch
    tasks_per_node: int
    resizes: int  # times it changed size before this launch (0: its first launch of the attempt)

    @property
    def most_ranks(self) -> int:
        return self.most * self.tasks_per_node


def membership(env: Mapping[str, str] | None = None) -> Membership | None:
    """This launch's membership, from the environment the cluster gives the ranks; None in a
    job that is not elastic."""
    env = os.environ if env is None else env
    spec = env.get(ENV, "")
    least, _, most = spec.partition("-")
    if not (least.isdigit() and most.isdigit()):
        return None
    nodes = int(env.get("SLURM_JOB_NUM_NODES") or env.get("GROUP_WORLD_SIZE") or least)
    per_node = int(env.get("SLURM_NTASKS_PER_NODE") or env.get("LOCAL_WORLD_SIZE") or 1)
    return Membership(int(least), int(most), nodes, per_node, int(env.get(RESIZES_ENV) or 0))


def global_batch(per_rank: int, env: Mapping[str, str] | None = None) -> int:
    """The global batch of ``per_rank`` samples for each rank the job may have at the most:
    an elastic job's stays the same at every size (each rank's share grows as ranks leave);
    a fixed-size job's is ``per_rank`` x WORLD_SIZE."""
    env = os.environ if env is None else env
    size = membership(env)
    ranks = size.most_ranks if size is not None else int(env.get("WORLD_SIZE") or 1)
    return per_rank * ranks


@contextmanager
def rescue(save: Callable[[], object], out=None) -> Iterator[None]:
    """Run the body; if a collective call in it fails (a peer's node left, so gloo or NCCL
    raises), call ``save`` -- which must write this rank's state whatever its rank, as any
    survivor may be the only one left to -- and re-raise, so the rank still fails and the
    cluster relaunches the job. A save that fails too (fenced by a newer launch, a full disk)
    is said on ``out`` (stderr) and the first error stands."""
    try:
        yield
    except RuntimeError as exc:  # torch.distributed's errors (DistBackendError...) are RuntimeErrors
        out = out or sys.stderr
        try:
            save()
            print(f"minihpc.elastic: a collective failed ({str(exc).splitlines()[0][:200]}); this rank's "
                  "state saved", file=out, flush=True)
        except Exception as failed:  # noqa: BLE001 - the collective's error is what the rank ends with
            print(f"minihpc.elastic: a collective failed, and saving this rank's state failed too: {failed}",
                  file=out, flush=True)
        raise
