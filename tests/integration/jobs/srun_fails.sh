#!/bin/bash
# One task of three fails: srun kills the others and exits with its code, and so does the job.
#SBATCH --nodes=3
#SBATCH --job-name=srun-fails
srun bash -c 'if [ "$SLURM_PROCID" = 1 ]; then sleep 1; exit 3; fi; exec sleep 317'
