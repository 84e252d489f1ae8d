"""A job's options as sbatch reads them: from the command line (or an API request) and from the
script's ``#MINIHPC`` / ``#SBATCH`` header lines, flags winning, turned into one submit
:class:`~minihpc.client.submit.Request`. Every face (the CLI, the REST API) submits through
here, so a header means the same from each.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field

from minihpc.client.submit import Request
from minihpc.core import dependency as dependencies
from minihpc.core.batch import LAUNCHES, launch_mode
from minihpc.core.errors import UsageError
from minihpc.core.models import Priority
from minihpc.core.arrays import parse_array
from minihpc.core.environment import parse_export
from minihpc.core.output_names import check_pattern
from minihpc.core.parsing import header_lines, parse_time_limit
from minihpc.core.requirements import parse_gres, parse_mem
from minihpc.core.signals import parse_warn_signal
from minihpc.core.slurm_filters import parse_slurm_time


class HeaderParser(argparse.ArgumentParser):
    """One header line's options: never matched by prefix (``--ntasks`` is not
    ``--ntasks-per-node``), and a mistake is a UsageError, not an exit."""

    def __init__(self, prog: str):
        super().__init__(prog=prog, add_help=False, allow_abbrev=False)
        add_job_options(self)

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message}")


def add_job_options(p: argparse.ArgumentParser) -> None:
    """The options of ``submit`` and of header lines (every default None: unset)."""
    p.add_argument("-N", "--nodes", type=int, default=None, help="nodes to run on (default 1)")
    p.add_argument("-n", "--ntasks", type=int, default=None,
                   help="ranks in all (spread evenly over the nodes; default: --ntasks-per-node on each)")
    p.add_argument("--ntasks-per-node", type=int, default=None, help="ranks per node (default 1)")
    p.add_argument("--priority", choices=[p.value for p in Priority], default=None,
                   help="queue priority (default normal)")
    p.add_argument("-t", "--time", default=None, help="time limit: minutes, MM:SS, HH:MM:SS, D-HH:MM:SS")
    p.add_argument("-J", "--job-name", default=None, help="job name (default: the script's name)")
    p.add_argument("-d", "--dependency", default=None,
                   help="after, afterany, afterok or afternotok:ID[:ID...], or singleton; several joined by ','")
    p.add_argument("-D", "--chdir", default=None,
                   help="the job's working directory (default: where it is submitted from)")
    p.add_argument("--launch", choices=LAUNCHES, default=None,
                   help="how the script runs: torchrun (a Python script's default) or batch (once on the first "
                        "node, srun on its PATH: the default for a #!/bin/bash script)")
    p.add_argument("-c", "--cpus-per-task", type=int, default=None, help="CPUs each task needs (default 1)")
    p.add_argument("-o", "--output", default=None, metavar="PATTERN",
                   help="write the job's output to this file (%%j job id, %%x name, %%N node, %%A_%%a array, "
                        "%%t task, %%u user); relative to the working directory. Default: the node logs only")
    p.add_argument("-e", "--error", default=None, metavar="PATTERN", help="write its standard error here (as -o)")
    p.add_argument("--export", default=None, metavar="ALL|NONE|VAR[=VALUE],...",
                   help="the submitter's variables the job gets (default ALL, less the machine's own: PATH, HOME...)")
    p.add_argument("--signal", default=None, metavar="[B:]SIG[@SECS]",
                   help="send SIG SECS seconds (default 60) before the time limit: to every task, or B: the batch shell")
    p.add_argument("--begin", default=None, metavar="TIME", help="do not start before TIME (now+60, 16:00, 2026-12-01T08:00)")
    p.add_argument("--requeue", dest="requeue", action="store_const", const=True, default=None,
                   help="a node failure sends the job back to the queue (the default)")
    p.add_argument("--no-requeue", dest="requeue", action="store_const", const=False,
                   help="never requeue: a node failure ends the job NODE_FAIL")
    p.add_argument("--cold", action="store_const", const=True, default=None,
                   help="start a new interpreter for the job instead of forking it from the node's warm launcher")
    p.add_argument("--mem", default=None, help="memory each node must have (4G, 512M; a bare number is MB)")
    p.add_argument("--gres", default=None, metavar="gpu:N", help="GPUs each node must have")
    p.add_argument("-p", "--partition", default=None, help="the node group to run in (config: MINIHPC_PARTITIONS)")
    p.add_argument("-a", "--array", default=None, metavar="INDEXES[%N]",
                   help="a job array: 0-15, 1,3,5 or 0-10:2; %%N runs at most N at once")
    p.add_argument("--progress-timeout", default=None,
                   help="watchdog: requeue the job when its progress reports stop for this long (like --time)")


@dataclass
class Header:
    """What a script's header lines set, and a warning for each #SBATCH option minihpc lacks."""

    options: argparse.Namespace
    warnings: list[str] = field(default_factory=list)


def parse_header(text: str) -> Header:
    """The options of the script's #MINIHPC and #SBATCH lines, later lines winning. An option
    minihpc does not know is an error on a #MINIHPC line, and a warning on an #SBATCH line (a
    Slurm script's --mem or --account has no meaning here); a bad value is always an error."""
    header = Header(HeaderParser("").parse_args([]))
    for prefix, words in header_lines(text):
        parser = HeaderParser(prefix)
        if prefix == "#MINIHPC":
            parser.parse_args(words, namespace=header.options)
            continue
        _, unknown = parser.parse_known_args(words, namespace=header.options)
        if unknown:
            header.warnings.append(f"{prefix} {' '.join(unknown)}: not an option minihpc supports; ignored")
    return header


def tasks_per_node(nodes: int, ntasks: int | None, per_node: int | None) -> int:
    """Slurm's -n over -N nodes as the same number of ranks on each node (minihpc places
    tasks evenly); UsageError where that cannot hold."""
    if ntasks is None:
        return per_node or 1
    if ntasks < 1:
        raise UsageError(f"--ntasks must be at least 1, got {ntasks}")
    if per_node is not None and ntasks != nodes * per_node:
        raise UsageError(f"--ntasks {ntasks} disagrees with --nodes {nodes} x --ntasks-per-node {per_node}")
    if ntasks % nodes:
        raise UsageError(f"--ntasks {ntasks} does not divide evenly over {nodes} nodes; "
                         "minihpc runs the same number of tasks on every node")
    return ntasks // nodes


def request(given: argparse.Namespace, header: Header, *, script: str, text: str, args: list[str],
            script_name: str | None = None, env: dict[str, str] | None = None, now: float | None = None) -> Request:
    """The submit request: each option from ``given`` (flags, or an API body), else the header,
    else its documented default."""

    def pick(name: str, default=None):
        value = getattr(given, name, None)
        value = getattr(header.options, name) if value is None else value
        return default if value is None else value

    nodes = int(pick("nodes", 1))
    progress_timeout, dependency = pick("progress_timeout"), pick("dependency")
    return Request(
        script=script,
        text=text,
        args=list(args),
        nodes=nodes,
        tasks_per_node=tasks_per_node(nodes, pick("ntasks"), pick("ntasks_per_node")),
        priority=Priority(pick("priority", Priority.NORMAL.value)),
        time_limit=parse_time_limit(pick("time", "UNLIMITED")),
        progress_timeout=parse_time_limit(progress_timeout) if progress_timeout else None,
        name=pick("job_name"),
        dependency=dependencies.parse(dependency) if dependency else [],
        script_name=script_name,
        launch=launch_mode(text, script_name or script, pick("launch")),
        workdir=os.path.abspath(pick("chdir")) if pick("chdir") else "",
        cpus_per_task=_at_least_one(pick("cpus_per_task", 1), "--cpus-per-task"),
        output=check_pattern(pick("output"), "--output") if pick("output") is not None else "",
        error=check_pattern(pick("error"), "--error") if pick("error") is not None else "",
        environment=parse_export(pick("export"), env or {}),
        warn_signal=parse_warn_signal(pick("signal")).text() if pick("signal") else "",
        begin_at=parse_slurm_time(pick("begin"), time.time() if now is None else now, "--begin")
        if pick("begin") else None,
        requeue=pick("requeue", True),
        cold=bool(pick("cold", False)),
        mem_bytes=parse_mem(pick("mem")) if pick("mem") else 0,
        gpus=parse_gres(pick("gres")) if pick("gres") else 0,
        partition=pick("partition", ""),
        array=parse_array(pick("array")) if pick("array") else None,
    )


def _at_least_one(value: int, option: str) -> int:
    if int(value) < 1:
        raise UsageError(f"{option} must be at least 1, got {value}")
    return int(value)
