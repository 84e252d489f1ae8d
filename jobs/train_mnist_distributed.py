#!/usr/bin/env python
"""Train a small CNN on MNIST with DistributedDataParallel over gloo, one rank per node.

    minihpc submit -N 3 jobs/train_mnist_distributed.py --epochs 8
    make submit JOB=jobs/train_mnist_distributed.py NODES=3

Each rank reads its own shard (DistributedSampler). Rank 0 saves a checkpoint to the job's
directory on the shared models volume ($MINIHPC_CHECKPOINT_DIR) every --checkpoint-every steps,
at the end, and when SIGTERM asks the job to stop (a graceful `docker stop` of any node: all
ranks agree on the step, rank 0 saves it, and the job exits 143 to be requeued). On start every
rank resumes from the latest valid checkpoint (model, optimizer, random states; the step gives
the sampler's position), so a requeued job continues where it was. Rank 0 logs loss and
samples/s; with --tensorboard DIR it also writes loss, samples/s and gradient norm per step as
TensorBoard event files there (and to W&B, offline, when wandb is installed).
"""
#MINIHPC --nodes 3
#MINIHPC --time 30
import argparse
import os
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

import mnist
from minihpc import checkpoint, preempt, progress, tracking


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=20, help="steps between checkpoints")
    p.add_argument("--log-every", type=int, default=10, help="steps between log lines")
    p.add_argument("--data-root", default=None, help="default: $MINIHPC_DATA_DIR")
    p.add_argument("--checkpoint-dir", default=os.environ.get("MINIHPC_CHECKPOINT_DIR") or "checkpoints")
    p.add_argument("--loss-log", default=None, help="rank 0 appends 'attempt step loss' for every step here")
    p.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="rank 0 writes loss, samples/s and gradient norm per step as TensorBoard event files here")
    return p.parse_args()


@dataclass
class Run:
    """One attempt's training state; ``step`` is the last step trained."""

    args: argparse.Namespace
    rank: int
    world: int
    sampler: DistributedSampler
    loader: DataLoader
    model: DDP
    timer: progress.StepTimer
    optimizer: torch.optim.Optimizer
    steps_per_epoch: int
    total_steps: int
    images: int
    step: int = 0
    loss: float = 0.0


def setup(args) -> Run:
    """The process group, data, model and optimizer, in the same order on every attempt (the
    order decides what the seeded generator gives each of them)."""
    torch.set_num_threads(1)  # ranks share a node's cores; oversubscription slows everyone
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    train = mnist.dataset(mnist.data_root(args.data_root), train=True)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    model = DDP(mnist.Net())
    timer = progress.StepTimer()
    timer.hook_allreduce(model)  # before any backward pass, as DDP requires
    # DDP lays its gradient buckets out again after the first backward pass, and the layout
    # decides the order in which gloo sums each gradient. One throwaway pass here gives every
    # attempt, fresh or resumed, the same layout for every real step, so a resumed run repeats
    # the uninterrupted run's losses exactly.
    model(torch.zeros(1, 1, 28, 28)).sum().backward()
    model.zero_grad(set_to_none=True)
    timer.lap()  # the throwaway pass is not a step
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    return Run(args, rank, world, sampler, loader, model, timer, optimizer, len(loader), len(loader) * args.epochs,
               len(train))


def resume(run: Run) -> None:
    """Continue from the newest valid checkpoint, if there is one."""
    found = checkpoint.load_latest(run.args.checkpoint_dir)
    if found is not None:
        run.model.module.load_state_dict(found.state["model"])
        run.optimizer.load_state_dict(found.state["optimizer"])
        run.step = found.state["step"]
        checkpoint.set_rng_state(found.state.get("rng", {}))
        if run.rank == 0:
            print(f"resumed from {found.path} at step {run.step} of {run.total_steps}", flush=True)
    elif run.rank == 0:
        print(f"starting: {run.images} images, {run.world} ranks, {run.steps_per_epoch} steps per epoch, "
              f"{run.total_steps} steps", flush=True)


def save(run: Run) -> None:
    if run.rank == 0:
        checkpoint.save(run.args.checkpoint_dir, run.step, {
            "step": run.step,
            "model": run.model.module.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "rng": checkpoint.rng_state(),
            "world_size": run.world,
            "args": vars(run.args),
        })


def main() -> int:
    args = parse_args()
    stop = preempt.StopRequest()
    run = setup(args)
    resume(run)
    code = train(run, stop)
    if code is not None:
        return code  # stopped
    save(run)
    if run.rank == 0:
        print(f"done: {run.step} steps, final loss {run.loss:.4f}, checkpoint in {args.checkpoint_dir}", flush=True)
    dist.destroy_process_group()
    return 0


def train(run: Run, stop: preempt.StopRequest) -> int | None:
    """Train to the last step (None), or checkpoint and return the exit code when asked to stop."""
    args, reports = run.args, int(os.environ.get("LOCAL_RANK", "0")) == 0  # one progress report per node
    attempt = os.environ.get("MINIHPC_ATTEMPT", "1")
    loss_log = open(args.loss_log, "a") if args.loss_log and run.rank == 0 else None
    tracker = tracking.Tracker(args.tensorboard if run.rank == 0 else None, use_wandb=run.rank == 0,
                               project="minihpc-mnist", config=vars(args), wandb_dir=args.checkpoint_dir)
    window_start, window_samples = time.perf_counter(), 0
    while run.step < run.total_steps:
        epoch, skip = divmod(run.step, run.steps_per_epoch)
        run.sampler.set_epoch(epoch)
        batches = iter(run.loader)
        for i in range(run.steps_per_epoch):
            if i < skip:  # resuming mid-epoch: the same order, so skip what was trained
                next(batches)
                continue
            loss, samples = train_step(run, batches)
            run.loss = loss.item()
            if reports:
                metrics = {"loss": loss.item(), "grad_norm": grad_norm(run.model), **run.timer.lap(samples=samples)}
                progress.report(run.step, total=run.total_steps, rank=run.rank, **metrics)
                tracker.log(run.step, **{k: metrics.get(k) for k in ("loss", "samples_per_second", "grad_norm")})
            if loss_log is not None:
                loss_log.write(f"{attempt} {run.step} {loss.item():.10e}\n")
                loss_log.flush()
            window_samples += samples
            if run.rank == 0 and (run.step % args.log_every == 0 or run.step == run.total_steps):
                elapsed = time.perf_counter() - window_start
                print(f"epoch {epoch + 1}/{args.epochs} step {run.step}/{run.total_steps} "
                      f"loss {loss.item():.4f} samples/s {window_samples / elapsed:.0f}", flush=True)
                window_start, window_samples = time.perf_counter(), 0
            if run.step % args.checkpoint_every == 0:
                save(run)
            if stop.agreed():
                tracker.close()
                return stopped(run.step, lambda: save(run))
            if run.step >= run.total_steps:
                break
    tracker.close()
    return None


def train_step(run: Run, batches) -> tuple[torch.Tensor, int]:
    """One step, timed by phase: (its loss, the samples all ranks trained on)."""
    with run.timer.phase("data"):
        images, labels = next(batches)
    run.optimizer.zero_grad()
    with run.timer.phase("forward"):
        loss = F.cross_entropy(run.model(images), labels)
    with run.timer.phase("backward"):
        loss.backward()
    with run.timer.phase("optimizer"):
        run.optimizer.step()
    run.step += 1
    return loss, len(labels) * run.world


def grad_norm(model) -> float:
    norms = [p.grad.detach().norm() for p in model.parameters() if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(norms)).item() if norms else 0.0


def stopped(step: int, save) -> int:
    """Asked to stop (SIGTERM on some rank): checkpoint this step and leave, not as a success."""
    try:
        save()
        if dist.get_rank() == 0:
            print(f"stopping at step {step}: SIGTERM; checkpoint saved", flush=True)
    except checkpoint.Fenced as exc:
        print(f"stopping at step {step}: SIGTERM; not saved: {exc}", flush=True)
    dist.destroy_process_group()
    return preempt.EXIT_CODE


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # Skip interpreter teardown: gloo can abort a rank after a clean destroy_process_group().
    os._exit(code)
