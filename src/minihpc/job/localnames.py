"""``torchrun`` for a batch job in local mode, where the cluster's nodes are processes on this
machine and their names (``master-node``...) are not host names: it is torchrun itself, with a
node name given as ``--rdzv-endpoint NODE:PORT`` or ``--master-addr NODE`` replaced by
127.0.0.1, so a Slurm script's ``--rdzv-endpoint $head:29500`` runs unchanged.

On real hosts each node has its own ports; here every node and every job shares this machine's,
so two jobs (or two local clusters) whose scripts both say ``:29500`` would meet in one
rendezvous. The port given with a node name (and ``--master-port`` beside a node-named
``--master-addr``) is therefore replaced by the job's own port, which its first node picked
free when the batch script started (``MINIHPC_LOCAL_PORT``, inherited by every ``srun``).
A script whose torchruns use two different ports at the same time gets that one port for both.

Only local mode's job ``bin/`` has it (node.jobdir); on the Compose cluster and on real hosts
node names resolve, and the job's PATH finds the real torchrun.
"""

from __future__ import annotations

import os
import sys

from minihpc.core.parsing import expand_hostlist

LOOPBACK = "127.0.0.1"
PORT_ENV = "MINIHPC_LOCAL_PORT"
HOST_OPTIONS = ("--rdzv-endpoint", "--rdzv_endpoint", "--master-addr", "--master_addr")
PORT_OPTIONS = ("--master-port", "--master_port")


def _local(value: str, nodes: set[str], port: str | None) -> str:
    host, sep, given = value.rpartition(":") if ":" in value else (value, "", "")
    if host not in nodes:
        return value
    return f"{LOOPBACK}{sep}{port or given}" if sep else LOOPBACK


FLAGS = {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m", "--module",
         "--use-env", "--use_env"}
"""torchrun's options that take no value: after them, a word is the script, not their value."""


def _own(argv: list[str]) -> int:
    """How many of ``argv`` are torchrun's own; the rest are the script and its arguments."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return i
        if not arg.startswith("-"):
            return i
        i += 1 if "=" in arg or arg in FLAGS else 2
    return len(argv)


def rewrite(argv: list[str], nodes: set[str], port: str | None = None) -> list[str]:
    """torchrun's arguments with cluster node names in its host options made 127.0.0.1 and,
    given ``port``, the ports that go with them made ``port``; the script's arguments stay."""
    own = _own(argv)
    options, rest = argv[:own], argv[own:]
    named = [v for a, v in _pairs(options) if a in HOST_OPTIONS and _local(v, nodes, None) != v]
    out, i = [], 0
    while i < len(options):
        arg = options[i]
        name, eq, value = arg.partition("=")
        if name in HOST_OPTIONS and eq:
            out.append(f"{name}={_local(value, nodes, port)}")
        elif arg in HOST_OPTIONS and i + 1 < len(options):
            out += [arg, _local(options[i + 1], nodes, port)]
            i += 1
        elif port and named and name in PORT_OPTIONS and eq:
            out.append(f"{name}={port}")
        elif port and named and arg in PORT_OPTIONS and i + 1 < len(options):
            out += [arg, port]
            i += 1
        else:
            out.append(arg)
        i += 1
    return out + rest


def _pairs(options: list[str]) -> list[tuple[str, str]]:
    """(option, value) for each valued option of torchrun's own."""
    pairs, i = [], 0
    while i < len(options):
        name, eq, value = options[i].partition("=")
        if eq:
            pairs.append((name, value))
        elif name not in FLAGS and i + 1 < len(options):
            pairs.append((name, options[i + 1]))
            i += 1
        i += 1
    return pairs


def main(argv: list[str]) -> None:
    nodelist = os.environ.get("SLURM_JOB_NODELIST", "")
    args = rewrite(argv, set(expand_hostlist(nodelist)) if nodelist else set(), os.environ.get(PORT_ENV) or None)
    os.execv(sys.executable, [sys.executable, "-m", "torch.distributed.run", *args])


if __name__ == "__main__":
    main(sys.argv[1:])
