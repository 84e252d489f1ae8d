"""A gang job that reports no progress: every rank meets at a gloo barrier, sleeps SECONDS
(argument; 30 by default), and meets at another."""
import os
import sys
import time

import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
print(f"rank {dist.get_rank()} attempt {os.environ['MINIHPC_ATTEMPT']} past the barrier", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 30)
dist.barrier()
dist.destroy_process_group()
