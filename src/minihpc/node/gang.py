"""A job's gang, for ranks the warm launcher runs without torchrun (minihpc.node.warm_child):
what torchrun's static rendezvous and exit barrier do, on the job's own TCPStore, which node
rank 0's rank hosts. No rank runs before every node's has started; node rank 0's process
outlives the others' ranks, so that the store they use stays up."""

from __future__ import annotations

import sys

GANG_TIMEOUT = 600.0
"""Seconds a rank waits for the job's other nodes (torchrun's static rendezvous waits as long)."""
EXIT_TIMEOUT = 300.0
"""Seconds node rank 0 keeps the job's store up for the others after its rank ended well
(torchrun's exit barrier waits as long)."""
GANG_KEY = "minihpc/gang"


def form(addr: str, port: int, node: int, nodes: int):
    """Wait until every node's rank of the job has started, as torchrun's static rendezvous
    does before any rank runs: a job whose gang never forms (a node failed its launch) runs no
    code anywhere. Node rank 0 hosts the job's store at ADDR:PORT (MASTER_ADDR:MASTER_PORT),
    which the rank's ``init_process_group`` then uses (TORCHELASTIC_USE_AGENT_STORE, as under
    torchrun).
    The store, to be held for the rank's life."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    store = TCPStore(addr, port, nodes, is_master=node == 0, timeout=timedelta(seconds=GANG_TIMEOUT),
                     wait_for_workers=False, multi_tenant=True)
    store.set(f"{GANG_KEY}/{node}", "1")
    store.wait([f"{GANG_KEY}/{n}" for n in range(nodes)])
    return store


def leave(store, node: int, nodes: int, ok: bool) -> None:
    """A rank has ended: it says so, and node rank 0, whose process hosts the store, waits (when
    its own rank ended well) for every other to say so first -- a store gone while other ranks
    still use it fails them. As torchrun's exit barrier: none after a failure (the job fails)."""
    from datetime import timedelta

    from torch.distributed import DistError

    try:
        if node:
            store.set(f"{GANG_KEY}/ended/{node}", "1")
        elif ok:
            store.wait([f"{GANG_KEY}/ended/{n}" for n in range(1, nodes)], timedelta(seconds=EXIT_TIMEOUT))
    except DistError as exc:  # the store's host ended first, or a rank never came: nothing more to wait for
        print(f"minihpc: node rank {node}: leaving the job's gang: {exc}", file=sys.stderr, flush=True)
