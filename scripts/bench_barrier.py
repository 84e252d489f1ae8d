"""Benchmark job: each rank joins the gloo process group, passes its first barrier, and writes
the time it got past it (what "the job has started" means to a user: every rank in step)."""
import os
import sys

import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
import time  # noqa: E402

now = time.time()
out = sys.argv[1] if len(sys.argv) > 1 else os.environ["MINIHPC_CHECKPOINT_DIR"]  # on Compose: its own folder
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, f"rank{os.environ['RANK']}"), "w") as fh:
    fh.write(repr(now))
dist.destroy_process_group()
os._exit(0)  # a finished gloo rank can abort in interpreter teardown (minihpc.node.rank)
