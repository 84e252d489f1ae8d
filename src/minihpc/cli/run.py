"""``minihpc run`` (``srun`` outside a batch script): allocate nodes, run a command once per
task across them, stream its output, exit with the step's code -- as srun does when it is not
inside an allocation (``man srun``: "If necessary, srun will first create a resource
allocation in which to run the parallel job").

It is a batch job of one line, ``exec srun COMMAND``, followed until it ends: the job's
output is the tasks', in the order the nodes wrote it, less the agents' own ``===`` notes.
Its stdin is the job's: what ``run`` reads goes to the job's input stream, which is the batch
script's stdin, which srun gives to every task (``echo hi | minihpc run -N 2 cat``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading

from minihpc.client import access, logs, options
from minihpc.client.session import open_store
from minihpc.client.submit import STDIN, submit
from minihpc.core.batch import BATCH, wrap_script
from minihpc.core.config import Settings
from minihpc.core.errors import UsageError
from minihpc.core.models import JobState
from minihpc.core.outcome import exit_status
from minihpc.machine.files import read_chunks
from minihpc.state.connect import outages
from minihpc.state.steps import INPUT_MAX

CHUNK = 64 * 1024
"""Bytes of stdin read and sent at a time."""


def run_script(command: list[str], srun_options: list[str] = ()) -> str:
    """The batch script of ``minihpc run COMMAND``: srun's exit status is the job's."""
    return wrap_script(f"exec srun {shlex.join([*srun_options, '--', *command])}")


def srun_options(args) -> list[str]:
    """srun's own I/O options given to ``run`` (-l, -u, -i), for the srun inside the job."""
    return [*(["--label"] if args.label else []), *(["--unbuffered"] if args.unbuffered else []),
            *([f"--input={args.input}"] if args.input is not None else [])]


def cmd_run(args, settings: Settings) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("run needs a command: minihpc run -N 2 hostname")
    args.launch = BATCH
    args.job_name = args.job_name or os.path.basename(command[0])
    header = options.Header(options.HeaderParser("").parse_args([]))
    request = options.request(args, header, script=STDIN, text=run_script(command, srun_options(args)), args=[], script_name="run",
                              env=dict(os.environ))
    store = open_store(settings)
    who = access.for_cli(store)
    request.user, request.admin = who.user, who.admin
    request.stdin = True
    job = submit(store, request)
    print(f"srun: job {job.id} queued and waiting for resources", file=sys.stderr)
    threading.Thread(target=forward_stdin, args=(store, job.id), daemon=True).start()
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


def forward_stdin(store, job_id: int, source: int = 0) -> None:
    """What this process reads on ``source`` to the job's input stream, then its end (at
    INPUT_MAX bytes at the latest, with a line saying so). An outage ends it quietly (the tasks
    then see no more input)."""
    sent = 0
    try:
        for chunk in read_chunks(source, CHUNK):
            if sent + len(chunk) > INPUT_MAX:
                print(f"srun: error: stdin is over {INPUT_MAX >> 20} MiB, what minihpc forwards to a job; "
                      "the tasks see its end here (read a file instead)", file=sys.stderr)
                break
            sent += len(chunk)
            store.write_input(job_id, 0, None, chunk)
        store.write_input(job_id, 0, None, None)
    except outages():
        pass


def add_parsers(sub) -> None:
    p = sub.add_parser("run", help="run a command across nodes now and wait (Slurm's srun outside a batch script)")
    options.add_job_options(p)
    p.add_argument("-l", "--label", action="store_true", help="put each task's number before its lines (N: )")
    p.add_argument("-u", "--unbuffered", action="store_true", help="pass output on as it comes, not by lines")
    p.add_argument("-i", "--input", default=None, metavar="all|none|N",
                   help="which tasks read run's stdin: all (default), none, or task N")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    p.set_defaults(func=cmd_run)
