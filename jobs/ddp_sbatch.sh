#!/bin/bash
# A multi-node DDP batch script as cluster documentation publishes them: it runs unchanged
# under Slurm and under minihpc (local mode and the Compose cluster).
#
#     sbatch jobs/ddp_sbatch.sh            (local mode, from the project's root)
#     make submit JOB=jobs/ddp_sbatch.sh   (the Compose cluster)
#
#SBATCH --job-name=ddp-sbatch
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=00:10:00

set -euo pipefail
head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: rendezvous at $head_node:29500"

srun torchrun \
    --nnodes "$SLURM_NNODES" \
    --nproc-per-node 1 \
    --rdzv-id "$SLURM_JOB_ID" \
    --rdzv-backend c10d \
    --rdzv-endpoint "$head_node:29500" \
    jobs/hello.py
