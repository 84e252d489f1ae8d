"""``minihpc run`` (``srun`` outside a batch script): allocate nodes, run a command once per
task across them, stream its output, exit with the step's code -- as srun does when it is not
inside an allocation (``man srun``: "If necessary, srun will first create a resource
allocation in which to run the parallel job").

It is a batch job of one line, ``exec srun COMMAND``, followed until it ends: the job's
output is the tasks', in the order the nodes wrote it, less the agents' own ``===`` notes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from minihpc.client import access, logs, options
from minihpc.client.session import open_store
from minihpc.client.submit import STDIN, submit
from minihpc.core.batch import BATCH, wrap_script
from minihpc.core.config import Settings
from minihpc.core.errors import UsageError
from minihpc.core.models import JobState


def run_script(command: list[str]) -> str:
    """The batch script of ``minihpc run COMMAND``: srun's exit status is the job's."""
    return wrap_script(f"exec srun -- {shlex.join(command)}")


def exit_status(state: JobState, exit_code: int | None) -> int:
    """What ``run`` exits with: the tasks' code; 1 for a job that ended without one."""
    if state is JobState.COMPLETED:
        return 0
    return exit_code if exit_code else 1


def cmd_run(args, settings: Settings) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("run needs a command: minihpc run -N 2 hostname")
    args.launch = BATCH
    args.job_name = args.job_name or os.path.basename(command[0])
    header = options.Header(options.HeaderParser("").parse_args([]))
    request = options.request(args, header, script=STDIN, text=run_script(command), args=[], script_name="run",
                              env=dict(os.environ))
    store = open_store(settings)
    request.user = access.for_cli(store).user
    job = submit(store, request)
    print(f"srun: job {job.id} queued and waiting for resources", file=sys.stderr)
    try:
        for _node, line in logs.follow(store, job.id):
            if not (line.startswith("=== ") and line.endswith(" ===")):
                print(line, flush=True)
    except KeyboardInterrupt:
        print(f"srun: interrupted; job {job.id} goes on (scancel {job.id} to stop it)", file=sys.stderr)
        return 130
    job = store.get_job(job.id)
    if job.state is not JobState.COMPLETED:
        print(f"srun: job {job.id} {job.state.value} ({job.reason})", file=sys.stderr)
    return exit_status(job.state, job.exit_code)


def add_parsers(sub) -> None:
    p = sub.add_parser("run", help="run a command across nodes now and wait (Slurm's srun outside a batch script)")
    options.add_job_options(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    p.set_defaults(func=cmd_run)
