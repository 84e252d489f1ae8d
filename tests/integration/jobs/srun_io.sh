#!/bin/bash
# srun's I/O as Slurm's (man srun, IO Redirection): stdin to every task, every task's output
# back through srun, so heredocs, pipes, $(srun ...) and redirections work.
#SBATCH --nodes=3
#SBATCH --job-name=srun-io
set -euo pipefail
echo "batch starts"
srun python3 - <<'PY'
import os
import torch
import torch.distributed as dist

rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
where = f"file://{os.environ['SLURM_SUBMIT_DIR']}/rdzv-{os.environ['SLURM_JOB_ID']}-{os.environ['SLURM_STEP_ID']}"
dist.init_process_group("gloo", init_method=where, rank=rank, world_size=world)
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
print(f"heredoc task {rank} of {world} on {os.environ['SLURMD_NODENAME']}: all-reduce sum {int(total.item())}", flush=True)
dist.destroy_process_group()
os._exit(0)
PY
out=$(srun -N3 printenv SLURMD_NODENAME | sort)
echo "captured:" $out
echo "piped in" | srun -n 2 cat | sed 's/^/through a pipe: /'
srun -n 2 --input=1 bash -c 'echo "input task $SLURM_PROCID: $(cat)"' <<< "only for one"
srun -l -n 3 bash -c 'echo "labelled $SLURM_PROCID"' | sort
srun -n 2 bash -c 'echo "to stderr $SLURM_PROCID" >&2' 2> errors.txt
echo "stderr file:" $(sort errors.txt)
srun -n 2 -o "task-%t-of-%j.txt" bash -c 'echo "file of task $SLURM_PROCID"'
cat task-0-of-$SLURM_JOB_ID.txt task-1-of-$SLURM_JOB_ID.txt
set +o pipefail  # srun ends as Slurm's does when its reader goes: killed by SIGPIPE (141)
srun -n 2 yes | head -n 1 | sed 's/^/first of yes: /'
echo "srun after its reader went: ${PIPESTATUS[0]}"
set -o pipefail
echo "batch done"
