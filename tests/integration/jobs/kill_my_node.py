"""Every attempt, the rank on node rank 1 kills its own node agent (SIGKILL), as a host crash
would: the job can only ever end by node failure."""
import os
import signal
import time

import psutil
import torch.distributed as dist

dist.init_process_group("gloo")
print(f"rank {dist.get_rank()} attempt {os.environ['MINIHPC_ATTEMPT']}", flush=True)
dist.barrier()
if os.environ["SLURM_NODEID"] == "1":
    torchrun = psutil.Process(os.getppid())
    # The agent is torchrun's parent, or its grandparent when the warm launcher forked torchrun.
    agent = next(p for p in torchrun.parents() if "agent" in p.cmdline())
    agent.send_signal(signal.SIGKILL)
    torchrun.send_signal(signal.SIGKILL)
    os._exit(1)
time.sleep(120)  # stuck like a rank whose peer vanished; torn down by the agent
