"""One DDP step over BACKEND (nccl or gloo) on the job's GPUs: every rank takes GPU LOCAL_RANK
mod the GPUs it sees, all-reduces rank+1 there, trains one step of a small model and prints
where it ran; rank 0 writes every rank's report to OUT.

    gpu_ddp.py BACKEND OUT
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

backend, out = sys.argv[1], sys.argv[2]
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
dist.init_process_group(backend)
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", torch.cuda.current_device())

value = torch.tensor([float(rank + 1)], device=device)
dist.all_reduce(value)
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 1).to(device), device_ids=[device.index])
model(torch.full((4, 8), float(rank + 1), device=device)).sum().backward()  # DDP averages the gradients

visible = os.environ.get("CUDA_VISIBLE_DEVICES")
print(f"rank {rank}/{world}: CUDA_VISIBLE_DEVICES={visible!r} current_device={torch.cuda.current_device()} "
      f"backend={dist.get_backend()} sum={value.item()}", flush=True)
mine = {
    "rank": rank, "local_rank": int(os.environ.get("LOCAL_RANK", "0")), "node": os.environ.get("MINIHPC_NODE"),
    "visible": visible, "job_gpus": os.environ.get("SLURM_JOB_GPUS"),
    "gpus_on_node": os.environ.get("SLURM_GPUS_ON_NODE"), "device_count": torch.cuda.device_count(),
    "current_device": torch.cuda.current_device(), "tensor_device": str(value.device),
    "uuid": str(getattr(torch.cuda.get_device_properties(device), "uuid", "")),
    "backend": str(dist.get_backend()), "sum": value.item(),
    "grad": model.module.weight.grad.detach().cpu().tolist(),
}
everyone = [None] * world
dist.all_gather_object(everyone, mine)
if rank == 0:
    with open(out, "w") as fh:
        json.dump(everyone, fh)
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0 if value.item() == world * (world + 1) / 2 else 1)
