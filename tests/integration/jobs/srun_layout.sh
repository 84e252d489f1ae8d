#!/bin/bash
# A Slurm batch script: the layout of srun's tasks, and scontrol show hostnames.
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=2
#SBATCH --job-name=srun-layout
set -euo pipefail
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
echo "batch: node=$SLURMD_NODENAME first=$first nodelist=$SLURM_JOB_NODELIST nnodes=$SLURM_NNODES tasks_per_node=$SLURM_TASKS_PER_NODE procid=$SLURM_PROCID"
srun bash -c 'echo "step=$SLURM_STEP_ID task=$SLURM_PROCID/$SLURM_NTASKS local=$SLURM_LOCALID nodeid=$SLURM_NODEID node=$SLURMD_NODENAME"'
srun -N 2 -n 3 bash -c 'echo "step=$SLURM_STEP_ID task=$SLURM_PROCID/$SLURM_NTASKS local=$SLURM_LOCALID nodeid=$SLURM_NODEID node=$SLURMD_NODENAME"'
echo "batch: done"
