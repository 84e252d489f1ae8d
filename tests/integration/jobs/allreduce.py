"""DDP over gloo: every rank all-reduces rank+1 and checks the sum; rank 0 writes a report."""
import json
import os
import socket
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
expected = world * (world + 1) / 2
gathered = [None] * world
dist.all_gather_object(
    gathered,
    {
        "rank": rank,
        "node": os.environ["MINIHPC_NODE"],
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "slurm_procid": os.environ["SLURM_PROCID"],
        "slurm_ntasks": os.environ["SLURM_NTASKS"],
        "nodelist": os.environ["SLURM_JOB_NODELIST"],
        "job_id": os.environ["MINIHPC_JOB_ID"],
        "sum": value.item(),
    },
)
print(f"rank {rank}/{world} on {os.environ['MINIHPC_NODE']}: sum={value.item()} expected={expected}")
if rank == 0 and len(sys.argv) > 1:
    with open(sys.argv[1], "w") as fh:
        json.dump(gathered, fh)
dist.destroy_process_group()
sys.exit(0 if value.item() == expected else 1)
