"""A job's options as sbatch reads them: from the command line (or an API request) and from the
script's ``#MINIHPC`` / ``#SBATCH`` header lines, flags winning, turned into one submit
:class:`~minihpc.client.submit.Request`. Every face (the CLI, the REST API) submits through
here, so a header means the same from each.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from dataclasses import dataclass, field

from minihpc.client.submit import Request
from minihpc.core import dependency as dependencies
from minihpc.core import gpus
from minihpc.core.batch import LAUNCHES, launch_mode
from minihpc.core.errors import UsageError
from minihpc.core.models import Priority
from minihpc.core.arrays import parse_array
from minihpc.core.environment import parse_export
from minihpc.core.features import check_constraint
from minihpc.core.output_names import check_pattern
from minihpc.core.parsing import expand_hostlist, header_lines, parse_node_range, parse_time_limit
from minihpc.core.requirements import parse_gres, parse_mem
from minihpc.core.signals import parse_warn_signal
from minihpc.core.slurm_filters import parse_slurm_time


ADVISORY = ("--mail-type", "--mail-user", "-A", "--account", "--comment", "--wckey", "--acctg-freq", "--profile",
            "--exclusive", "--get-user-env", "--open-mode", "--propagate", "--no-kill")
"""sbatch options with no effect on where or how a job runs here, accepted without a word
(docs/slurm.md lists them): mail, accounting, and --exclusive (a minihpc job always has its nodes
to itself). Any other option minihpc lacks is refused, naming it."""
FLAGS = ("--exclusive", "--get-user-env", "--no-kill")
"""Those of ADVISORY that take no value (or an optional one, given as --opt=VALUE)."""


class HeaderParser(argparse.ArgumentParser):
    """One header line's options: never matched by prefix (``--ntasks`` is not
    ``--ntasks-per-node``), and a mistake is a UsageError, not an exit."""

    def __init__(self, prog: str):
        super().__init__(prog=prog, add_help=False, allow_abbrev=False)
        add_job_options(self)

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message}")


@functools.lru_cache(maxsize=16)
def header_parser(prog: str) -> HeaderParser:
    """One HeaderParser per ``prog``, made once: building one (forty options) cost the API more
    than the rest of a submit's parsing. Parsing does not change a parser, so threads share it."""
    return HeaderParser(prog)


def node_range(text: str) -> str:
    """``-N``'s value, checked where it is given (a header line, a flag), kept as given."""
    try:
        parse_node_range(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_job_options(p: argparse.ArgumentParser) -> None:
    """The options of ``submit`` and of header lines (every default None: unset)."""
    p.add_argument("-N", "--nodes", type=node_range, default=None, metavar="N|MIN-MAX",
                   help="nodes to run on (default 1); a range MIN-MAX starts once MIN are free, on up to MAX")
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
                        "%%t task, %%u user); a relative name goes in the job's logs/job-N/output/. Default: the node logs "
                        "only")
    p.add_argument("-e", "--error", default=None, metavar="PATTERN", help="write its standard error here (as -o)")
    p.add_argument("--export", default=None, metavar="ALL|NONE|VAR[=VALUE],...",
                   help="the submitter's variables the job gets (default ALL, less the machine's own: PATH, HOME...)")
    p.add_argument("--signal", default=None, metavar="[B:]SIG[@SECS]",
                   help="send SIG SECS seconds (default 60) before the time limit: to every task, or B: the batch shell")
    p.add_argument("--begin", default=None, metavar="TIME", help="do not start before TIME (now+60, 16:00, 2026-12-01T08:00)")
    _failure_options(p)
    p.add_argument("--cold", action="store_const", const=True, default=None,
                   help="start a new interpreter for the job instead of forking it from the node's warm launcher")
    p.add_argument("--mem", default=None, help="memory each node must have (4G, 512M; a bare number is MB)")
    p.add_argument("--gres", default=None, metavar="gpu:N", help="GPUs each node must have")
    p.add_argument("-p", "--partition", default=None, help="the node group to run in (config: MINIHPC_PARTITIONS)")
    p.add_argument("-a", "--array", default=None, metavar="INDEXES[%N]",
                   help="a job array: 0-15, 1,3,5 or 0-10:2; %%N runs at most N at once")
    p.add_argument("--mem-per-cpu", default=None, help="memory per CPU (as --mem): a node must have it times "
                   "its tasks x CPUs per task")
    p.add_argument("--gpus-per-node", default=None, metavar="[gpu:]N", help="GPUs each node must have (as --gres)")
    p.add_argument("-G", "--gpus", default=None, metavar="[gpu:]N", help="GPUs for the whole job, the same number "
                   "on each node")
    p.add_argument("--gpus-per-task", default=None, metavar="[gpu:]N", help="GPUs each task needs")
    for name in ADVISORY:
        if name.startswith("--"):
            names = ("-A", name) if name == "--account" else (name,)
            kwargs = dict(nargs="?", const="") if name in FLAGS else {}
            p.add_argument(*names, dest=f"advisory {name}", default=None, help=argparse.SUPPRESS, **kwargs)
    p.add_argument("-w", "--nodelist", default=None, metavar="HOSTLIST",
                   help="nodes the job must run on (node[1-3],login); -N defaults to their number")
    p.add_argument("-x", "--exclude", default=None, metavar="HOSTLIST", help="nodes the job must never run on")
    p.add_argument("-C", "--constraint", default=None, metavar="FEATURES",
                   help="node features the job needs: ib, ib&big, (ib|opa)&big (MINIHPC_NODE_FEATURES)")
    p.add_argument("-H", "--hold", action="store_const", const=True, default=None,
                   help="submit the job held: it starts only once released (scontrol release ID)")
    p.add_argument("--progress-timeout", default=None,
                   help="watchdog: requeue the job when its progress reports stop for this long (like --time)")


def _failure_options(p: argparse.ArgumentParser) -> None:
    """What a node failure does to the job: requeue it, or (elastic) go on without the node."""
    p.add_argument("--requeue", dest="requeue", action="store_const", const=True, default=None,
                   help="a node failure sends the job back to the queue (the default)")
    p.add_argument("--no-requeue", dest="requeue", action="store_const", const=False,
                   help="never requeue: a node failure ends the job NODE_FAIL")
    p.add_argument("--elastic", action="store_const", const=True, default=None,
                   help="with -N MIN-MAX: go on with the nodes left when one fails or is drained (MIN at "
                        "least), and take nodes back up to MAX when they come free; each change restarts "
                        "the ranks from their checkpoint (docs/jobs.md, Elastic jobs)")


@dataclass
class Header:
    """What a script's header lines set (``warnings``: none now; kept for the callers that print
    them)."""

    options: argparse.Namespace
    warnings: list[str] = field(default_factory=list)


def parse_header(text: str) -> Header:
    """The options of the script's #MINIHPC and #SBATCH lines, later lines winning. An option
    minihpc cannot honour is an error that names it (a job must not land where it did not ask
    to), except the advisory ones (ADVISORY: mail, account...); a bad value is an error too."""
    header = Header(header_parser("").parse_args([]))
    for prefix, words in header_lines(text):
        _, unknown = header_parser(prefix).parse_known_args(words, namespace=header.options)
        if unknown:
            raise UsageError(f"{prefix} {' '.join(unknown)}: not an option minihpc supports (it cannot honour it, "
                             "so the job is not queued; docs/slurm.md lists what is)")
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

    nodelist = expand_hostlist(pick("nodelist")) if pick("nodelist") else []
    nodes, most = parse_node_range(pick("nodes", max(1, len(nodelist))))
    if most > nodes:
        given_total = [o for o, name in (("--ntasks", "ntasks"), ("--gpus", "gpus")) if pick(name) is not None]
        if given_total:
            raise UsageError(f"{given_total[0]} with a node range (-N {nodes}-{most}): give it per node "
                             f"(--ntasks-per-node, --gpus-per-node), as every node gets the same share")
    if pick("elastic") and most <= nodes:
        raise UsageError(f"--elastic needs a node range to change size within (-N MIN-MAX, e.g. -N {nodes}-"
                         f"{nodes + 1}), got -N {nodes}")
    tpn = tasks_per_node(nodes, pick("ntasks"), pick("ntasks_per_node"))
    progress_timeout, dependency = pick("progress_timeout"), pick("dependency")
    return Request(
        script=script,
        text=text,
        args=list(args),
        nodes=nodes,
        max_nodes=most if most > nodes else 0,
        tasks_per_node=tpn,
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
        elastic=bool(pick("elastic", False)),
        cold=bool(pick("cold", False)),
        mem_bytes=node_memory(pick("mem"), pick("mem_per_cpu"), tpn * int(pick("cpus_per_task", 1))),
        gpus=node_gpus(pick("gres"), pick("gpus_per_node"), pick("gpus"), pick("gpus_per_task"), nodes, tpn),
        gpus_per_task=gpus.count(pick("gpus_per_task"), "--gpus-per-task") if pick("gpus_per_task") else 0,
        partition=pick("partition", ""),
        array=parse_array(pick("array")) if pick("array") else None,
        hold=bool(pick("hold", False)),
        nodelist=nodelist,
        exclude=expand_hostlist(pick("exclude")) if pick("exclude") else [],
        constraint=check_constraint(pick("constraint")) if pick("constraint") else "",
    )


def _at_least_one(value: int, option: str) -> int:
    if int(value) < 1:
        raise UsageError(f"{option} must be at least 1, got {value}")
    return int(value)


def node_memory(mem: str | None, per_cpu: str | None, cpus: int) -> int:
    """Bytes a node must have: ``--mem``, or ``--mem-per-cpu`` times the CPUs the job uses on
    each node; Slurm refuses both at once."""
    if mem and per_cpu:
        raise UsageError("--mem and --mem-per-cpu are mutually exclusive")
    if per_cpu:
        return parse_mem(per_cpu) * cpus
    return parse_mem(mem) if mem else 0


def node_gpus(gres: str | None, per_node: str | None, total: str | None, per_task: str | None, nodes: int,
              tasks: int) -> int:
    """GPUs each node must have, from whichever of Slurm's GPU options is given (one only)."""
    given = [(o, v) for o, v in (("--gres", gres), ("--gpus-per-node", per_node), ("--gpus", total),
                                  ("--gpus-per-task", per_task)) if v]
    if len(given) > 1:
        raise UsageError(f"give one of --gres, --gpus-per-node, --gpus, --gpus-per-task, not {given[0][0]} "
                         f"and {given[1][0]}")
    if not given:
        return 0
    option, value = given[0]
    if option == "--gres":
        return parse_gres(value)
    count = gpus.count(value, option)
    if option == "--gpus-per-node":
        return count
    if option == "--gpus-per-task":
        return count * tasks
    if count % nodes:
        raise UsageError(f"--gpus {count} does not divide evenly over {nodes} nodes; minihpc gives every node "
                         "the same number (use --gpus-per-node)")
    return count // nodes
