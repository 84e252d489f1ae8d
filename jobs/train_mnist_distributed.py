#!/usr/bin/env python
"""Train a small CNN on MNIST with DistributedDataParallel, on CPUs over gloo or GPUs over NCCL.

    minihpc submit -N 3 jobs/train_mnist_distributed.py --epochs 8
    minihpc submit -N 1 --ntasks-per-node 2 --gres gpu:2 jobs/train_mnist_distributed.py
    make submit JOB=jobs/train_mnist_distributed.py NODES=3

--device auto (the default) trains on CUDA when torch has it and the job was given GPUs
(CUDA_VISIBLE_DEVICES unset or not empty; the cluster sets it empty for a job without --gres),
else on the CPU; --device cuda without a GPU is one error line and exit 2. On CUDA each rank
takes GPU LOCAL_RANK mod the GPUs it sees. --backend auto is NCCL when every rank of the node
has a GPU of its own, else gloo (ranks sharing a GPU; gloo carries their CUDA tensors); --backend
gloo or nccl forces one. On the CPU the run is the same, step for step, as before GPUs existed.

Each rank reads its own shard (DistributedSampler). Rank 0 saves a checkpoint to the job's
directory on the shared models volume ($MINIHPC_CHECKPOINT_DIR) every --checkpoint-every steps,
at the end, and when SIGTERM asks the job to stop (a graceful `docker stop` of any node: all
ranks agree on the step, rank 0 saves it, and the job exits 143 to be requeued). On start every
rank resumes from the latest valid checkpoint (model, optimizer, random states; the step gives
the sampler's position), so a requeued job continues where it was. Rank 0 logs loss and
samples/s; with --tensorboard DIR it also writes loss, samples/s and gradient norm per step as
TensorBoard event files there (and to W&B, offline, when wandb is installed).

--balance (for nodes of unequal speed) keeps the global batch at --batch-size x ranks but gives
each rank a share in proportion to its measured speed, re-split every --balance-every steps when
a rank's speed moved by more than --balance-threshold; every rank's batch is a slice of the same
global batch, and its loss is weighted so the update (and the logged loss, the global batch's)
equals one process's training on --batch-size x ranks. The shares are saved in the checkpoint and
restored on resume. --profile STEPS (or $MINIHPC_PROFILE) writes a PyTorch profiler trace per rank
of those steps into the checkpoint directory's profile/ folder.

--elastic (for `minihpc submit --elastic -N MIN-MAX`: the job changes size while it runs) keeps
the global batch at --batch-size x the most ranks the job may have, split over the ranks it has
now, so every step trains on the same samples whatever the size and the loss curve does not
jump; a rank whose collective fails because a peer's node left saves the step it holds
(minihpc.elastic.rescue), so the relaunch on the nodes left loses no step.
"""
#MINIHPC --nodes 3
#MINIHPC --time 30
import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import TextIO

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

import mnist
from minihpc import balance, checkpoint, elastic, preempt, profiling, progress, tracking
from minihpc.job import devices


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
    p.add_argument("--loss-log", default=None,
                   help="rank 0 appends 'attempt step loss' for every step here (a relative path: in the checkpoint "
                        "directory, which the job may write)")
    p.add_argument("--double", action="store_true",
                   help="train in float64: float32 rounding, amplified by training, makes two runs that differ "
                        "only in summation order drift apart after a few dozen steps; float64 does not")
    p.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="rank 0 writes loss, samples/s and gradient norm per step as TensorBoard event files here")
    p.add_argument("--balance", action="store_true",
                   help="split the global batch (--batch-size x ranks) by each rank's measured speed")
    p.add_argument("--elastic", action="store_true",
                   help="the global batch stays --batch-size x the job's most ranks at every size (submit with "
                        "--elastic -N MIN-MAX); a rank saves its step when a peer's node leaves")
    p.add_argument("--balance-every", type=int, default=balance.EVERY, help="steps between speed checks")
    p.add_argument("--balance-threshold", type=float, default=balance.THRESHOLD,
                   help="re-split when a rank's speed moved by more than this fraction")
    p.add_argument("--profile", type=profiling.steps_argument, default=os.environ.get(profiling.ENV), metavar="STEPS",
                   help="N (N steps after a warm-up) or A:B (steps A to B): a PyTorch profiler trace per rank "
                        f"(default: ${profiling.ENV})")
    p.add_argument("--device", choices=devices.DEVICES, default="auto",
                   help="cuda when the job was given GPUs and torch has CUDA, else cpu (default: auto)")
    p.add_argument("--backend", choices=devices.BACKENDS, default="auto",
                   help="nccl when every rank has a GPU of its own, else gloo (default: auto)")
    return p.parse_args()


def placement(args) -> tuple[torch.device, str]:
    """(this rank's device, the process group's backend) from --device and --backend; on CUDA,
    the rank's GPU becomes the current one. ValueError when what was asked for cannot be had."""
    kind = devices.choose_device(args.device, torch.cuda.is_available(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    if kind == "cpu":
        return torch.device("cpu"), devices.choose_backend(args.backend, "cpu", 0, 1)
    gpus = torch.cuda.device_count()
    backend = devices.choose_backend(args.backend, "cuda", gpus, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    index = devices.local_index(int(os.environ.get("LOCAL_RANK", "0")), gpus)
    torch.cuda.set_device(index)
    return torch.device("cuda", index), backend


@dataclass
class Run:
    """One attempt's training state; ``step`` is the last step trained."""

    args: argparse.Namespace
    device: torch.device
    rank: int
    world: int
    sampler: DistributedSampler | balance.GlobalBatchSampler
    loader: DataLoader
    model: DDP
    timer: progress.StepTimer
    optimizer: torch.optim.Optimizer
    steps_per_epoch: int
    total_steps: int
    images: int
    balancer: balance.Balancer | None
    profiler: profiling.Profiler
    step: int = 0
    loss: float = 0.0


def setup(args, device: torch.device, backend: str) -> Run:
    """The process group, data, model and optimizer, in the same order on every attempt (the
    order decides what the seeded generator gives each of them). The model is made on the CPU
    and then moved, so a GPU run starts from the CPU run's weights."""
    torch.set_num_threads(1)  # ranks share a node's cores; oversubscription slows everyone
    if args.double:
        torch.set_default_dtype(torch.float64)
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    train = mnist.dataset(mnist.data_root(args.data_root), train=True)
    sampler, loader, balancer = data(args, train, rank, world)
    cuda = device.type == "cuda"
    model = DDP(mnist.Net().to(device), device_ids=[device.index] if cuda else None)
    timer = progress.StepTimer(torch.cuda.synchronize if cuda else None)
    timer.hook_allreduce(model)  # before any backward pass, as DDP requires
    # DDP lays its gradient buckets out again after the first backward pass, and the layout
    # decides the order in which gloo sums each gradient. One throwaway pass here gives every
    # attempt, fresh or resumed, the same layout for every real step, so a resumed run repeats
    # the uninterrupted run's losses exactly.
    model(torch.zeros(1, 1, 28, 28, device=device)).sum().backward()
    model.zero_grad(set_to_none=True)
    timer.lap()  # the throwaway pass is not a step
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    profiler = profiling.Profiler.configured(args.profile, os.path.join(args.checkpoint_dir, "profile"), rank)
    return Run(args, device, rank, world, sampler, loader, model, timer, optimizer, len(loader),
               len(loader) * args.epochs, len(train), balancer, profiler)


def data(args, train, rank: int, world: int):
    """(sampler, loader, balancer): each rank its own shard in equal batches, or with --balance
    its share of every global batch of --batch-size x ranks (--elastic: x the job's most ranks,
    the same at every size; re-split by speed only with --balance)."""
    if not args.balance and not args.elastic:
        sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
        return sampler, DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True), None
    total = elastic.global_batch(args.batch_size) if args.elastic else args.batch_size * world
    balancer = balance.Balancer(total, rank, world, every=args.balance_every if args.balance else elastic.NEVER,
                                threshold=args.balance_threshold)
    sampler = balance.GlobalBatchSampler(len(train), balancer.global_batch, rank, lambda: balancer.shares, args.seed)
    return sampler, DataLoader(train, batch_sampler=sampler), balancer


def resume(run: Run) -> None:
    """Continue from the newest valid checkpoint, if there is one."""
    found = checkpoint.load_latest(run.args.checkpoint_dir)
    if found is not None:
        run.model.module.load_state_dict(found.state["model"])
        run.optimizer.load_state_dict(found.state["optimizer"])
        run.step = found.state["step"]
        checkpoint.set_rng_state(found.state.get("rng", {}))
        if run.balancer is not None and found.state.get("balance"):
            run.balancer.load_state_dict(found.state["balance"])
        if run.rank == 0:
            print(f"resumed from {found.path} at step {run.step} of {run.total_steps} on {run.world} ranks",
                  flush=True)
    elif run.rank == 0:
        print(f"starting: {run.images} images, {run.world} ranks, {run.steps_per_epoch} steps per epoch, "
              f"{run.total_steps} steps", flush=True)
    if run.rank == 0:
        print(f"training on {run.device} over {dist.get_backend()}", flush=True)
    if run.balancer is not None and run.rank == 0:
        kind = "elastic" if run.args.elastic else "balanced"
        print(f"{kind} batches: global batch {run.balancer.global_batch}, batch sizes "
              f"{'/'.join(map(str, run.balancer.shares))} to start", flush=True)


def save(run: Run, any_rank: bool = False) -> None:
    """Rank 0 saves (every rank holds the same state); ``any_rank``: this rank saves, whatever it
    is (minihpc.elastic.rescue: rank 0 may be the one that left)."""
    if run.rank == 0 or any_rank:
        state = {
            "step": run.step,
            "model": run.model.module.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "rng": checkpoint.rng_state(),
            "world_size": run.world,
            "args": vars(run.args),
        }
        if run.balancer is not None:
            state["balance"] = run.balancer.state_dict()
        checkpoint.save(run.args.checkpoint_dir, run.step, state)


def main() -> int:
    args = parse_args()
    try:
        device, backend = placement(args)
    except ValueError as exc:
        print(f"train_mnist_distributed.py: error: {exc}", file=sys.stderr, flush=True)
        return 2
    stop = preempt.StopRequest()
    run = setup(args, device, backend)
    resume(run)
    if args.elastic:
        with elastic.rescue(lambda: save(run, any_rank=True)):
            code = train(run, stop)
    else:
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
    out = outputs(run)
    while run.step < run.total_steps:
        epoch, skip = divmod(run.step, run.steps_per_epoch)
        batches = epoch_batches(run, epoch, skip)
        for _ in range(skip, run.steps_per_epoch):
            loss, local = profiled_step(run, batches)
            record(run, out, epoch, loss, local)
            if run.step % run.args.checkpoint_every == 0:
                save(run)
            if stop.agreed():
                out.tracker.close()
                profiled(run, run.profiler.close())
                return stopped(run.step, lambda: save(run))
            if run.step >= run.total_steps:
                break
    out.tracker.close()
    profiled(run, run.profiler.close())
    return None


@dataclass
class Outputs:
    """Where each step's results go: the node's progress report (from local rank 0), rank 0's
    loss log, tracker and log lines; samples/s is counted over the ``window`` between lines."""

    reports: bool
    attempt: str
    loss_log: TextIO | None
    tracker: tracking.Tracker
    window_start: float
    window_samples: int = 0


def outputs(run: Run) -> Outputs:
    args = run.args
    tracker = tracking.Tracker(args.tensorboard if run.rank == 0 else None, use_wandb=run.rank == 0,
                               project="minihpc-mnist", config=vars(args), wandb_dir=args.checkpoint_dir)
    return Outputs(int(os.environ.get("LOCAL_RANK", "0")) == 0,  # one progress report per node
                   os.environ.get("MINIHPC_ATTEMPT", "1"),
                   open_loss_log(args) if args.loss_log and run.rank == 0 else None,
                   tracker, time.perf_counter())


def open_loss_log(args) -> TextIO:
    path = os.path.join(args.checkpoint_dir, args.loss_log)  # an absolute --loss-log stays as it is
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return open(path, "a")


def epoch_batches(run: Run, epoch: int, skip: int):
    """``epoch``'s batches from its step ``skip`` on (resuming mid-epoch: the same order)."""
    if run.balancer is not None:
        run.sampler.set_epoch(epoch, start=skip)  # the step gives the position, whatever the shares
        return iter(run.loader)
    run.sampler.set_epoch(epoch)
    batches = iter(run.loader)
    for _ in range(skip):  # skip what was trained
        next(batches)
    return batches


def profiled_step(run: Run, batches) -> tuple[torch.Tensor, int]:
    run.profiler.begin(run.step + 1)
    loss, local = train_step(run, batches)
    profiled(run, run.profiler.end(run.step))
    return loss, local


def profiled(run: Run, trace) -> None:
    if trace is not None:
        print(f"rank {run.rank}: profile written to {trace}", flush=True)


def record(run: Run, out: Outputs, epoch: int, loss: torch.Tensor, local: int) -> None:
    """A trained step's loss and timings to the progress report, tracker, loss log and log line.
    With --balance the loss is the global batch's and the step may re-split the batch."""
    args = run.args
    if run.balancer is None:
        value, samples, lap, extra = loss.item(), local * run.world, None, {}
    else:
        value, samples = run.balancer.global_loss(loss.item(), local), run.balancer.global_batch
        lap, extra = balance_step(run, local, samples)
    run.loss = value
    if out.reports:
        metrics = {"loss": value, "grad_norm": grad_norm(run.model), **(lap or run.timer.lap(samples=samples)), **extra}
        progress.report(run.step, total=run.total_steps, rank=run.rank, **metrics)
        out.tracker.log(run.step, **{k: metrics.get(k) for k in ("loss", "samples_per_second", "grad_norm")})
    if out.loss_log is not None:
        out.loss_log.write(f"{out.attempt} {run.step} {value:.10e}\n")
        out.loss_log.flush()
    out.window_samples += samples
    if run.rank == 0 and (run.step % args.log_every == 0 or run.step == run.total_steps):
        elapsed = time.perf_counter() - out.window_start
        print(f"epoch {epoch + 1}/{args.epochs} step {run.step}/{run.total_steps} "
              f"loss {value:.4f} samples/s {out.window_samples / elapsed:.0f}", flush=True)
        out.window_start, out.window_samples = time.perf_counter(), 0


def balance_step(run: Run, local: int, samples: int) -> tuple[dict, dict]:
    """Every rank, every step with --balance: time its own work, feed its speed to the balancer
    (a re-split every --balance-every steps; rank 0 logs it). (phase times, extra metrics)"""
    lap = run.timer.lap(samples=samples)
    seconds = balance.own_seconds(lap)
    run.balancer.observe(local, seconds)
    change = run.balancer.step(run.step)
    if change is not None and run.rank == 0:
        print(change, flush=True)
    return lap, {"batch_size": local, "compute_seconds": seconds}


def train_step(run: Run, batches) -> tuple[torch.Tensor, int]:
    """One step, timed by phase: (this rank's mean loss, its batch size)."""
    with run.timer.phase("data"):
        images, labels = next(batches)
        images = images.to(run.device, torch.get_default_dtype())  # float64 with --double; else unchanged
        labels = labels.to(run.device)
    run.optimizer.zero_grad()
    with run.timer.phase("forward"):
        loss = F.cross_entropy(run.model(images), labels)
    with run.timer.phase("backward"):
        # --balance: weight world * b / B, so DDP's average is the global batch's mean gradient
        (loss if run.balancer is None else run.balancer.scale_loss(loss, len(labels))).backward()
    with run.timer.phase("optimizer"):
        run.optimizer.step()
    run.step += 1
    return loss, len(labels)


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
