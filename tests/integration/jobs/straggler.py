"""A DDP job over gloo in which rank SLOW_RANK is a slowed node: every rank "computes" BASE
seconds per step in its forward pass (a sleep, so the 2-core test machine stays free), rank
SLOW_RANK FACTOR times as long. Each node's reporting rank reports its phase times every step,
as jobs/train_mnist_distributed.py does.

    straggler.py STEPS SLOW_RANK [FACTOR] [BASE]
"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from minihpc import progress

steps, slow_rank = int(sys.argv[1]), int(sys.argv[2])
factor = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
base = float(sys.argv[4]) if len(sys.argv) > 4 else 0.04
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"rank {rank} on {os.environ['MINIHPC_NODE']}", flush=True)
torch.manual_seed(0)
model = DDP(torch.nn.Linear(32, 4))
timer = progress.StepTimer()
timer.hook_allreduce(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, steps + 1):
    with timer.phase("data"):
        x = torch.randn(16, 32)
    with timer.phase("forward"):
        time.sleep(base * (factor if rank == slow_rank else 1.0))
        loss = model(x).pow(2).mean()
    with timer.phase("backward"):
        loss.backward()
    with timer.phase("optimizer"):
        optimizer.step()
        optimizer.zero_grad()
    if os.environ.get("LOCAL_RANK") == "0":
        progress.report(step, total=steps, rank=rank, loss=loss.item(), **timer.lap())
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)
