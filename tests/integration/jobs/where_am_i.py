"""Prints what a rank sees of how it was started: its launcher's ancestry, command line,
environment, working directory, and whether a module beside the submitted script imports.
Rank 1 exits with the code given as the first argument (0 by default)."""

import json
import os
import signal
import sys

import psutil
import torch.distributed as dist

import where_am_i_helper  # beside this script: its folder must be on the path

dist.init_process_group("gloo")
dist.barrier()
me = psutil.Process()
ancestry = [" ".join(p.cmdline()) for p in me.parents()]
print("WHERE " + json.dumps({
    "rank": int(os.environ["RANK"]),
    "ancestry": ancestry,
    "cmdline": me.cmdline(),
    "proc_env": me.environ().get("WHERE_MARK"),
    "env": os.environ.get("WHERE_MARK"),
    "cwd": os.getcwd(),
    "helper": where_am_i_helper.VALUE,
    "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
    "uid": os.getuid(),
}), flush=True)
dist.destroy_process_group()
os._exit(int(sys.argv[1]) if len(sys.argv) > 1 and os.environ["RANK"] == "1" else 0)
