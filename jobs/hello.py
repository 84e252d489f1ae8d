#!/usr/bin/env python
"""Hello from every rank: prints rank, node, host and world size, and checks an all-reduce.

    minihpc submit -N 3 jobs/hello.py
"""
#MINIHPC --nodes 3
#MINIHPC --time 5
import os
import socket
import sys

import torch
import torch.distributed as dist


def main() -> int:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    expected = world * (world + 1) / 2
    print(
        f"hello from rank {rank} of {world} on node {os.environ.get('MINIHPC_NODE', '?')} "
        f"(host {socket.gethostname()}, local rank {os.environ['LOCAL_RANK']}): "
        f"all-reduce sum {total.item():g}, expected {expected:g}",
        flush=True,
    )
    dist.destroy_process_group()
    return 0 if total.item() == expected else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # Skip interpreter teardown: gloo can abort a rank after a clean destroy_process_group().
    os._exit(code)
