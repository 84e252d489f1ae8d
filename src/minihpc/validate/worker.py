"""One rank of a validation run, started by torchrun through ``minihpc.node.rank`` (locally by
:mod:`minihpc.validate.launch`, or as a cluster job): it trains the workload in float64 and
records every step (see :mod:`minihpc.validate.records`).

Strategy ``ddp``: DistributedDataParallel over gloo on the CPU, or over NCCL on the rank's GPU
(``--backend``, see :func:`placement`); a comm hook measures the local gradient norm before the
all-reduce, times the all-reduce, and is where grad-noise and NaN faults enter. Strategy
``parameter-server``: no process group; gradients go to the launcher's parameter server
(:mod:`minihpc.validate.ps`) and the average comes back.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import socket
import sys
import time

from minihpc.job import devices
from minihpc.validate import inject, workload
from minihpc.validate.records import Recorder

STRATEGIES = ("ddp", "parameter-server")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="minihpc-validate-worker")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--workload", default="synthetic", choices=workload.WORKLOADS)
    p.add_argument("--hidden", default="64,64")
    p.add_argument("--samples", type=int, default=workload.SAMPLES)
    p.add_argument("--in-features", type=int, default=None)
    p.add_argument("--model", default=None, choices=workload.MODELS)
    p.add_argument("--eval-steps", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--record-dir", default=None)
    p.add_argument("--checksum-every", type=int, default=5)
    p.add_argument("--inject", default=None, choices=inject.KINDS)
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-step", type=int, default=0)
    p.add_argument("--strategy", default="ddp", choices=STRATEGIES)
    p.add_argument("--ps-addr", default=None, help="HOST:PORT of the parameter server")
    p.add_argument("--pg-timeout", type=float, default=60.0)
    p.add_argument("--backend", default="auto", choices=devices.BACKENDS)
    return p.parse_args(argv)


def placement(requested: str, strategy: str = "ddp") -> tuple[str, str]:
    """(the process group's backend, the device the rank trains on). ``auto`` is NCCL on this
    rank's GPU when torch has CUDA, the job was given GPUs and each rank of the node has one of
    its own; otherwise -- and always for the parameter server, which has no process group -- the
    spec's run: gloo on the CPU, even on a GPU machine. ValueError when ``nccl`` cannot work."""
    import torch

    if strategy != "ddp":
        return "gloo", "cpu"
    kind = devices.choose_device("auto", torch.cuda.is_available(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    gpus = torch.cuda.device_count() if kind == "cuda" else 0
    backend = devices.choose_backend(requested, kind, gpus, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    if backend == "gloo":
        return "gloo", "cpu"
    index = devices.local_index(int(os.environ.get("LOCAL_RANK", "0")), gpus)
    torch.cuda.set_device(index)
    return "nccl", f"cuda:{index}"


class Sync:
    """The DDP comm hook's side of a step: local gradient norm (before the all-reduce, after
    any injected fault), all-reduce seconds, and the heartbeat's allreduce phase."""

    def __init__(self, fault: inject.Fault, rank: int, recorder: Recorder):
        self.fault, self.rank, self.recorder = fault, rank, recorder
        self.reset(0)

    def reset(self, step: int) -> None:
        self.step, self.sq, self.seconds = step, 0.0, 0.0

    def hook(self, _state, bucket):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        buffer = bucket.buffer()
        inject.on_bucket(self.fault, self.rank, self.step, buffer)
        self.sq += float(buffer.double().pow(2).sum())
        self.recorder.beat("allreduce")
        start = time.perf_counter()

        def done(fut):
            self.seconds += time.perf_counter() - start
            return fut.value()

        return default_hooks.allreduce_hook(None, bucket).then(done)


def checksum(model) -> str:
    """sha256 of the parameters' bytes: any one flipped bit changes it."""
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def record_checksum(ctx, step: int) -> None:
    """Every rank's checksum, gathered as bytes in a tensor (no pickled objects between ranks)."""
    import torch
    import torch.distributed as dist

    mine = checksum(ctx.model)
    digests = [mine]
    if ctx.distributed:
        local = torch.tensor(list(bytes.fromhex(mine)), dtype=torch.uint8, device=ctx.device)
        gathered = [torch.empty_like(local) for _ in range(ctx.world)]
        dist.all_gather(gathered, local)
        digests = [bytes(t.tolist()).hex() for t in gathered]
    ctx.recorder.write("checksum", step=step, digest=mine, gathered=digests)
    if digests.count(mine) * 2 <= len(digests) and len(digests) > 2:
        print(f"rank {ctx.rank}: parameter checksum {mine} differs from the majority at step {step}",
              file=sys.stderr)


def _next_batch(ctx, step: int):
    """The data phase of a step: (inputs, targets, its start, its end); the compute phase begins."""
    import torch

    ctx.recorder.beat("data", step)
    t0 = time.perf_counter()
    x, y = next(ctx.batches)
    x, y = x.to(ctx.device, torch.get_default_dtype()), y.to(ctx.device)
    t1 = time.perf_counter()
    ctx.recorder.beat("compute")
    return x, y, t0, t1


def ddp_step(ctx, step: int) -> dict:
    import torch.distributed as dist

    rec = ctx.recorder
    x, y, t0, t1 = _next_batch(ctx, step)
    inject.before_forward(ctx.fault, ctx.rank, step, ctx.raw_model)
    ctx.sync.reset(step)
    inject.in_compute(ctx.fault, ctx.rank, step)
    loss = ctx.loss_fn(ctx.model(x), y)
    loss.backward()
    ctx.synchronize()
    t2 = time.perf_counter()
    rec.beat("optimizer")
    ctx.optimizer.step()
    ctx.optimizer.zero_grad(set_to_none=True)
    total = loss.detach().clone()
    start = time.perf_counter()
    dist.all_reduce(total)
    ctx.synchronize()
    allreduce = ctx.sync.seconds + time.perf_counter() - start
    t3 = time.perf_counter()
    return {"step": step, "loss": float(total) / ctx.world, "local_loss": float(loss),
            "local_grad_norm": ctx.sync.sq ** 0.5, "samples": len(x),
            "data_time_ms": 1e3 * (t1 - t0), "compute_time_ms": 1e3 * max(0.0, t2 - t1 - ctx.sync.seconds),
            "allreduce_time_ms": 1e3 * allreduce, "step_time_ms": 1e3 * (t3 - t0)}


def ps_step(ctx, step: int) -> dict:
    import torch

    rec = ctx.recorder
    x, y, t0, t1 = _next_batch(ctx, step)
    inject.before_forward(ctx.fault, ctx.rank, step, ctx.model)
    inject.in_compute(ctx.fault, ctx.rank, step)
    loss = ctx.loss_fn(ctx.model(x), y)
    loss.backward()
    params = [p for p in ctx.model.parameters()]
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    inject.on_bucket(ctx.fault, ctx.rank, step, flat)
    t2 = time.perf_counter()
    rec.beat("allreduce")
    average, global_loss, arrived = ctx.server.exchange(step, flat, float(loss))
    t3 = time.perf_counter()
    rec.beat("optimizer")
    offset = 0
    for p in params:
        p.grad.copy_(average[offset:offset + p.numel()].view_as(p))
        offset += p.numel()
    ctx.optimizer.step()
    ctx.optimizer.zero_grad(set_to_none=True)
    t4 = time.perf_counter()
    return {"step": step, "loss": global_loss, "local_loss": float(loss), "local_grad_norm": float(flat.norm()),
            "samples": len(x), "ps_arrived": arrived, "data_time_ms": 1e3 * (t1 - t0),
            "compute_time_ms": 1e3 * (t2 - t1), "allreduce_time_ms": 1e3 * (t3 - t2), "step_time_ms": 1e3 * (t4 - t0)}


class Context:
    """What every step of one rank uses."""

    def __init__(self, args: argparse.Namespace):
        import torch

        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.args = args
        record_dir = args.record_dir or os.path.join(os.environ.get("MINIHPC_CHECKPOINT_DIR", "."), "validate")
        self.recorder = Recorder(record_dir, self.rank)
        self.recorder.beat("start", 0)
        self.fault = inject.Fault(args.inject, args.fault_rank, args.fault_step) if args.inject else inject.Fault()
        data, model, self.loss_fn = workload.build(args)
        self.batches = workload.batches(data, self.rank, self.world, args.batch_size)
        self.distributed = args.strategy == "ddp"
        self.backend, device = placement(args.backend, args.strategy)
        self.device = torch.device(device)
        # CUDA queues kernels and returns: timings wait for them, or they would land elsewhere
        self.synchronize = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        self.model = self.raw_model = model.to(self.device)  # made on the CPU: the same weights anywhere
        if self.distributed:
            self._init_ddp(args)
        else:
            from minihpc.validate.ps import Client

            self.server = Client(args.ps_addr, self.rank)
        self.optimizer = torch.optim.Adam(self.raw_model.parameters(), lr=args.lr)
        self.test = workload.test_batch(args) if args.eval_steps > 0 else None

    def _init_ddp(self, args) -> None:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        dist.init_process_group(self.backend, timeout=datetime.timedelta(seconds=args.pg_timeout))
        cuda = self.device.type == "cuda"
        self.model = DistributedDataParallel(self.raw_model, device_ids=[self.device.index] if cuda else None)
        self.sync = Sync(self.fault, self.rank, self.recorder)
        self.model.register_comm_hook(None, self.sync.hook)


def evaluate(ctx, step: int) -> None:
    """The loss on the held-out set, recorded: every rank holds the same parameters, so each
    spends the same time here and none waits for another at the next all-reduce."""
    import torch

    start = time.perf_counter()
    with torch.no_grad():
        x, y = ctx.test
        loss = float(ctx.loss_fn(ctx.raw_model(x.to(ctx.device)), y.to(ctx.device)))
    ctx.recorder.write("eval", step=step, loss=loss, eval_time_ms=1e3 * (time.perf_counter() - start),
                       time=time.time())


def main(argv: list[str] | None = None) -> None:
    import torch

    args = parse(sys.argv[1:] if argv is None else argv)
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    ctx = Context(args)
    import minihpc

    ctx.recorder.write("start", time=time.time(), world=ctx.world, pid=os.getpid(), hostname=socket.gethostname(),
                       torch=torch.__version__, minihpc=minihpc.__version__, python=sys.version.split()[0],
                       backend=ctx.backend if ctx.distributed else None, device=str(ctx.device))
    step_fn = ddp_step if ctx.distributed else ps_step
    for step in range(args.steps):
        record = step_fn(ctx, step)
        ctx.recorder.write("step", time=time.time(), **record)
        if args.checksum_every > 0 and (step + 1) % args.checksum_every == 0:
            record_checksum(ctx, step)
        if args.eval_steps > 0 and (step + 1) % args.eval_steps == 0:
            evaluate(ctx, step)
    ctx.recorder.beat("done")
    ctx.recorder.write("end", time=time.time())
    ctx.recorder.close()
    if ctx.distributed:
        import torch.distributed as dist

        dist.destroy_process_group()


if __name__ == "__main__":
    main()
