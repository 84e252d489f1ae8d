#!/bin/bash
# The issue's batch-script pattern: a heredoc on srun's stdin runs on every task (each does an
# all-reduce), and srun's output comes back through srun: $(srun -N3 hostname | sort).
#SBATCH --nodes=3
#SBATCH --job-name=srun-heredoc
set -euo pipefail
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) MASTER_PORT=29531
echo "batch starts"
srun python3 - <<'PY'
import os
import torch
import torch.distributed as dist

rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
print(f"heredoc task {rank} of {world} on {os.uname().nodename}: all-reduce sum {int(total.item())}", flush=True)
dist.destroy_process_group()
os._exit(0)
PY
out=$(srun -N3 hostname | sort)
echo "hostnames:" $out
