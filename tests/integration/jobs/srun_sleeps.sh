#!/bin/bash
# Every task marks that it started (in the working directory), then sleeps: for scancel to
# reach them all.
#SBATCH --nodes=3
#SBATCH --job-name=srun-sleeps
srun bash -c 'touch "started-$SLURM_PROCID"; exec sleep 319'
