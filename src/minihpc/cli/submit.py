"""``minihpc submit`` (Slurm's sbatch): a script, its ``#SBATCH``/``#MINIHPC`` lines and the
command line's options, queued as one job or an array -- thin over :mod:`minihpc.client.submit`.

A module of its own: its options are most of the CLI's, and ``squeue`` should not pay for them.
"""

from __future__ import annotations

import argparse
import os
import sys

from minihpc.client import access, arrays, options, tree
from minihpc.client import jobs as client_jobs
from minihpc.client.session import open_store
from minihpc.client.submit import STDIN, read_script, read_stdin, submit, test_only
from minihpc.core.batch import wrap_script
from minihpc.core.config import Settings
from minihpc.core.errors import UsageError
from minihpc.core.outcome import exit_status


def add_parsers(sub) -> None:
    _add_submit(sub)


def cmd_submit(args, settings: Settings) -> int:
    if args.wrap is not None:
        if args.script is not None:
            raise UsageError(f"--wrap runs its command; a script ({args.script}) cannot be given too")
        args.script, args.script_name, args.job_name = STDIN, "wrap", args.job_name or "wrap"
        text = wrap_script(args.wrap)
    elif args.script is None:
        raise UsageError("submit needs a script (or - for standard input, or --wrap COMMAND)")
    elif args.tree is not None:
        working_tree = tree.read_archive(sys.stdin.buffer) if args.tree == STDIN else tree.pack(args.tree)
        text = tree.read_member(working_tree, args.script)
    else:
        text = read_stdin(sys.stdin) if args.script == STDIN else read_script(args.script)
    header = options.parse_header(text)
    for warning in header.warnings:
        print(f"minihpc submit: warning: {warning}", file=sys.stderr)
    request = options.request(args, header, script=args.script, text=text, args=args.script_args,
                              script_name=args.script_name, env=dict(os.environ))
    if args.tree is not None:
        request.tree, request.script_name = working_tree, args.script
    store = open_store(settings)
    who = access.for_cli(store)
    request.user, request.admin = who.user, who.admin
    if args.test_only:
        print(test_only(store, request), file=sys.stderr)
        return 0
    job = submit(store, request)
    if not args.quiet:
        print(job.id if args.parsable else f"Submitted batch job {job.id}", flush=True)
    if not args.wait:
        return 0
    ids = [j.id for j in arrays.named_jobs(store, str(job.array_job_id or job.id))] if request.array else [job.id]
    try:
        job, _ = client_jobs.wait_all(store, ids)
    except KeyboardInterrupt:
        return 130
    return exit_status(job.state, job.exit_code)  # sbatch --wait: "the same exit code as the submitted job"


def _add_submit(sub) -> None:
    p = sub.add_parser("submit", help="queue a job script")
    options.add_job_options(p)
    p.add_argument("--parsable", action="store_true", help="print only the job id")
    p.add_argument("-W", "--wait", action="store_true",
                   help="wait for the job to end; exit with its exit code (0 when it COMPLETED)")
    p.add_argument("--test-only", action="store_true",
                   help="check the job and say when it would start; queue nothing")
    p.add_argument("-Q", "--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--script-name", default=None, help="file name for a script read from standard input (SCRIPT is -)")
    p.add_argument("--wrap", default=None, metavar="COMMAND",
                   help="run COMMAND as a batch job (sbatch's --wrap: a #!/bin/sh script of that one line)")
    p.add_argument("--tree", default=None, metavar="DIR",
                   help="bring DIR along as the job's working directory (its code and configs, capped at "
                        f"{tree.TREE_MAX >> 20} MiB); SCRIPT is then a path inside DIR. - : a tar archive on standard input")
    p.add_argument("script", nargs="?", help="the job script, or - to read it from standard input")
    p.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS")
    p.set_defaults(func=cmd_submit)
