"""A checkpointing job: STEPS all-reduce steps of STEP_SECONDS each; rank 0 checkpoints every
step and every rank resumes from the latest checkpoint. Prints where it started."""
import os
import sys
import time

import torch
import torch.distributed as dist

from minihpc import checkpoint

steps, pause = int(sys.argv[1]), float(sys.argv[2])
ckpt = os.environ["MINIHPC_CHECKPOINT_DIR"]
dist.init_process_group("gloo")
rank = dist.get_rank()
found = checkpoint.load_latest(ckpt)
step = found.state["step"] if found else 0
total = found.state["total"] if found else 0.0
print(f"rank {rank} attempt {os.environ['MINIHPC_ATTEMPT']} starts at step {step}", flush=True)
while step < steps:
    value = torch.tensor([1.0])
    dist.all_reduce(value)
    total += value.item()
    step += 1
    if rank == 0:
        checkpoint.save(ckpt, step, {"step": step, "total": total})
    time.sleep(pause)
print(f"rank {rank} done at step {step}, total {total:g}", flush=True)
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)
