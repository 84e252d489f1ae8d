"""``torchrun`` for a batch job in local mode, where the cluster's nodes are processes on this
machine and their names (``master-node``...) are not host names: it is torchrun itself, with a
node name given as ``--rdzv-endpoint NODE:PORT`` or ``--master-addr NODE`` replaced by
127.0.0.1, so a Slurm script's ``--rdzv-endpoint $head:29500`` runs unchanged.

On real hosts each node has its own ports; here every node and every job shares this machine's,
so two jobs (or two local clusters) whose scripts both say ``:29500`` would meet in one
rendezvous. The port given with a node name (and ``--master-port`` beside a node-named
``--master-addr``; or none, as torchrun's and c10d's defaults are shared too) is therefore
replaced by the job's own port, which its first node picked free when the batch script
started (``MINIHPC_LOCAL_PORT``, inherited by every ``srun``).
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
ENDPOINT_OPTIONS = ("--rdzv-endpoint", "--rdzv_endpoint")
ADDR_OPTIONS = ("--master-addr", "--master_addr")
PORT_OPTIONS = ("--master-port", "--master_port")
FLAGS = {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m", "--module",
         "--virtual-local-rank", "--virtual_local_rank"}
"""torchrun's options that take no value: after them, a word is the script, not their value."""


def _options(argv: list[str]) -> tuple[list[tuple[str, str | None, bool]], list[str]]:
    """torchrun's own options as (name, value or None, written name=value), and the rest: the
    script and its arguments, which are never rewritten. A short option with its value attached
    (``-t3``) is one word, kept as it is."""
    options, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--" or not arg.startswith("-"):
            break
        name, eq, value = arg.partition("=")
        if eq:
            options.append((name, value, True))
        elif arg in FLAGS or not arg.startswith("--") and len(arg) > 2 or i + 1 == len(argv):
            options.append((arg, None, False))
        else:
            options.append((arg, argv[i + 1], False))
            i += 1
        i += 1
    return options, argv[i:]


def _endpoint(value: str) -> tuple[str, str]:
    """HOST[:PORT] as (host, port), the port "" when none is given."""
    host, colon, port = value.rpartition(":")
    return (host, port) if colon else (value, "")


def rewrite(argv: list[str], nodes: set[str], port: str | None = None) -> list[str]:
    """torchrun's arguments with cluster node names in --rdzv-endpoint and --master-addr made
    127.0.0.1 and, given ``port``, that endpoint's port (or --master-port beside a node-named
    --master-addr, added if the script gave none) made ``port``; the script's arguments stay."""
    options, rest = _options(argv)
    named_addr = any(n in ADDR_OPTIONS and v in nodes for n, v, _ in options)
    out: list[str] = []
    for name, value, joined in options:
        host, given = _endpoint(value) if value is not None and name in ENDPOINT_OPTIONS else (None, "")
        if host in nodes:
            value = f"{LOOPBACK}:{port or given}" if port or given else LOOPBACK
        elif value is not None and name in ADDR_OPTIONS and value in nodes:
            value = LOOPBACK
        elif value is not None and name in PORT_OPTIONS and port and named_addr:
            value = port
        out += [f"{name}={value}"] if joined else [name] + ([] if value is None else [value])
    if port and named_addr and not any(n in PORT_OPTIONS for n, _, _ in options):
        out += ["--master-port", port]
    return out + rest


def main(argv: list[str]) -> None:
    nodelist = os.environ.get("SLURM_JOB_NODELIST", "")
    args = rewrite(argv, set(expand_hostlist(nodelist)) if nodelist else set(), os.environ.get(PORT_ENV) or None)
    os.execv(sys.executable, [sys.executable, "-m", "torch.distributed.run", *args])


if __name__ == "__main__":
    main(sys.argv[1:])
