"""``torchrun`` for a batch job in local mode, where the cluster's nodes are processes on this
machine and their names (``master-node``...) are not host names: it is torchrun itself, with a
node name given as ``--rdzv-endpoint NODE:PORT`` or ``--master-addr NODE`` replaced by
127.0.0.1, so a Slurm script's ``--rdzv-endpoint $head:29500`` runs unchanged.

Only local mode's job ``bin/`` has it (node.jobdir); on the Compose cluster and on real hosts
node names resolve, and the job's PATH finds the real torchrun.
"""

from __future__ import annotations

import os
import sys

from minihpc.core.parsing import expand_hostlist

LOOPBACK = "127.0.0.1"
HOST_OPTIONS = ("--rdzv-endpoint", "--rdzv_endpoint", "--master-addr", "--master_addr")


def _local(value: str, nodes: set[str]) -> str:
    host, sep, port = value.rpartition(":") if ":" in value else (value, "", "")
    return f"{LOOPBACK}{sep}{port}" if host in nodes else value


def rewrite(argv: list[str], nodes: set[str]) -> list[str]:
    """torchrun's arguments with cluster node names in its host options made 127.0.0.1."""
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in HOST_OPTIONS and eq:
            out.append(f"{name}={_local(value, nodes)}")
        elif arg in HOST_OPTIONS and i + 1 < len(argv):
            out += [arg, _local(argv[i + 1], nodes)]
            i += 1
        else:
            out.append(arg)
        i += 1
    return out


def main(argv: list[str]) -> None:
    nodelist = os.environ.get("SLURM_JOB_NODELIST", "")
    args = rewrite(argv, set(expand_hostlist(nodelist)) if nodelist else set())
    os.execv(sys.executable, [sys.executable, "-m", "torch.distributed.run", *args])


if __name__ == "__main__":
    main(sys.argv[1:])
