"""The job helpers under NCCL, on every rank: preempt.StopRequest.agreed() (SIGTERM to rank 0
only: every rank agrees), balance.all_gather_floats, a checkpoint of CUDA tensors saved by rank 0
and loaded by every rank onto its own GPU with the random states restored, progress.StepTimer
around a DDP step, and a profiler trace with CUDA activity. Rank 0 writes every rank's findings
to OUT/report.json.

    helpers_nccl.py OUT
"""

import json
import os
import signal
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from minihpc import balance, checkpoint, preempt, profiling, progress

out = Path(sys.argv[1])
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", torch.cuda.current_device())
found = {"rank": rank, "backend": str(dist.get_backend())}

stop = preempt.StopRequest()
found["agreed_before"] = stop.agreed()
if rank == 0:
    os.kill(os.getpid(), signal.SIGTERM)  # only rank 0 is asked; the flag's all-reduce tells the rest
found["agreed_after"] = stop.agreed()
found["gathered"] = balance.all_gather_floats(float(rank))

weights = torch.randn(16, generator=torch.Generator().manual_seed(7)).to(device)
torch.manual_seed(11)
if rank == 0:
    rng = checkpoint.rng_state()
    found["expected_draw"] = torch.rand(3, device=device).tolist()
    found["saved_cuda_states"] = len(rng.get("cuda", []))
    checkpoint.save(out / "ckpt", 1, {"weights": weights, "rng": rng})
dist.barrier()
loaded = checkpoint.load_latest(out / "ckpt")
found["loaded_device"] = str(loaded.state["weights"].device)
found["loaded_equal"] = torch.equal(loaded.state["weights"], weights)
checkpoint.set_rng_state(loaded.state["rng"])
found["draw"] = torch.rand(3, device=device).tolist()

model = DDP(torch.nn.Linear(32, 4).to(device), device_ids=[device.index])
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
timer = progress.StepTimer(torch.cuda.synchronize)
timer.hook_allreduce(model)
profiler = profiling.Profiler(profiling.Window(1, 1), out / "profile", rank)
profiler.begin(1)
with timer.phase("data"):
    x = torch.randn(64, 32, device=device)
with timer.phase("forward"):
    loss = model(x).pow(2).mean()
with timer.phase("backward"):
    loss.backward()
with timer.phase("optimizer"):
    optimizer.step()
trace = profiler.end(1)
found["lap"] = timer.lap(samples=64 * world)
found["profiled_cuda"] = profiling._cuda()
found["trace"] = str(trace)
events = json.loads(trace.read_text())["traceEvents"] if trace is not None else []
found["trace_has_kernels"] = any(str(e.get("cat", "")).lower() == "kernel" for e in events)
if int(os.environ.get("LOCAL_RANK", "0")) == 0:
    progress.report(1, total=1, loss=loss.item(), **found["lap"])

everyone = [None] * world
dist.all_gather_object(everyone, found)
if rank == 0:
    (out / "report.json").write_text(json.dumps(everyone))
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)
