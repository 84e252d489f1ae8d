#!/usr/bin/env python
"""Each node's compute speed and the cluster's all-reduce bandwidth, one rank per node.

    minihpc submit -N 3 jobs/benchmark.py
    make submit JOB=jobs/benchmark.py NODES=3

Every rank times float32 matrix multiplies (GFLOP/s), then all ranks time all-reduces of
growing sizes; rank 0 prints one table of per-node compute and one of bus bandwidth (the
NCCL-tests convention: algorithm bandwidth x 2(n-1)/n). Local rank 0 of each node also reports
its node's GFLOP/s (its ranks' sum) and the bus bandwidth of the largest all-reduce as progress
(``gflops``, ``allreduce_busbw_gbps``): the node's agent records both on the node, and
``minihpc nodes --long`` shows them.
"""
#MINIHPC --nodes 3
#MINIHPC --time 10
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

from minihpc import progress


def gflops(size: int, repeats: int) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm up
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


def allreduce_seconds(numel: int, repeats: int) -> float:
    tensor = torch.ones(numel)
    dist.all_reduce(tensor)  # warm up
    dist.barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        dist.all_reduce(tensor)
    return (time.perf_counter() - start) / repeats


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--matrix", type=int, default=512)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--max-mib", type=int, default=16, help="largest all-reduce, MiB")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    node = os.environ.get("MINIHPC_NODE", socket.gethostname())

    mine = {"node": node, "threads": torch.get_num_threads(), "gflops": gflops(args.matrix, args.repeats)}
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    rows = []
    size = 1024  # bytes
    while size <= args.max_mib * 2**20:
        seconds = allreduce_seconds(size // 4, args.repeats)
        algbw = size / seconds / 1e9
        rows.append((size, seconds, algbw, algbw * 2 * (world - 1) / world))
        size *= 4
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:  # one report per node, for all its ranks
        measured = {"gflops": sum(info["gflops"] for info in everyone if info["node"] == node)}
        if rows:
            measured["allreduce_busbw_gbps"] = rows[-1][3]
        progress.report(0, **measured)
    if rank == 0:
        print(f"compute ({args.matrix}x{args.matrix} float32 matmul):")
        print(f"{'rank':>4}  {'node':<16} {'threads':>7} {'GFLOP/s':>9}")
        for r, info in enumerate(everyone):
            print(f"{r:>4}  {info['node']:<16} {info['threads']:>7} {info['gflops']:>9.{1 if info['gflops'] >= 1 else 3}f}")
        print(f"\nall-reduce over gloo, {world} ranks:")
        print(f"{'bytes':>10} {'time (ms)':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}")
        for size, seconds, algbw, busbw in rows:
            print(f"{size:>10} {seconds * 1e3:>10.3f} {algbw:>11.3f} {busbw:>11.3f}")
        sys.stdout.flush()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # Skip interpreter teardown: gloo can abort a rank after a clean destroy_process_group().
    os._exit(code)
