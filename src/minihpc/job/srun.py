"""``srun`` inside a minihpc batch script: start a command once per task across the job's
allocation, wait for every task, exit with the step's code (the first failed task's).

It holds no credentials: it asks the first node's agent, over the socket in the job's private
directory (``MINIHPC_SRUN_SOCKET``), which starts the tasks on each node as the job's user.
Its I/O is Slurm's (``man srun``, IO Redirection): srun's stdin goes to every task (``-i/--input``
all, none, a task id, or a file), and every task's stdout and stderr come back through srun's
own, so pipes, ``$(srun ...)`` and redirections work (``-o/-e`` to files, ``-l`` labels,
``-u`` unbuffered; job.srun_output). Options that have no meaning here are accepted with one
warning; see docs/slurm.md.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import socket
import sys
import threading

from minihpc.core import gpus
from minihpc.core.errors import UsageError
from minihpc.job.srun_output import Sink, check_pattern
from minihpc.machine.files import read_chunks

SOCKET_ENV = "MINIHPC_SRUN_SOCKET"

IGNORED = ("--mpi", "--cpu-bind", "--cpu_bind", "--gpu-bind", "--mem", "--mem-per-cpu", "-c", "--cpus-per-task", "-J", "--job-name", "--hint", "-W", "--wait")
"""Options taking a value that srun accepts and ignores here (one warning each)."""
IGNORED_FLAGS = ("--exclusive", "--overlap", "-X", "--disable-status",
                 "-Q", "--quiet", "-v", "--verbose")
"""Flags srun accepts and ignores here."""
GPU_OPTIONS = ("--gres", "--gpus-per-node", "-G", "--gpus")
"""A step's GPUs are its job's on each node (a step asking more than that is refused)."""
OPTIONAL = ("-K", "--kill-on-bad-exit")
"""``-K[0|1]``: what minihpc always does (a failed task kills the step), so it is accepted
silently, with or without its value (``-K1``, ``--kill-on-bad-exit=1``)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        print(f"srun: error: {message}", file=sys.stderr)
        raise SystemExit(1)


def parser() -> Parser:
    p = Parser(prog="srun", allow_abbrev=False, description="Run a command once per task of the job's allocation.")
    p.add_argument("-N", "--nodes", type=int, default=None)
    p.add_argument("-n", "--ntasks", type=int, default=None)
    p.add_argument("--ntasks-per-node", type=int, default=None)
    p.add_argument("-m", "--distribution", default=None)
    p.add_argument("-i", "--input", default="all")
    p.add_argument("-o", "--output", default=None)
    p.add_argument("-e", "--error", default=None)
    p.add_argument("-l", "--label", action="store_true")
    p.add_argument("-u", "--unbuffered", action="store_true")
    p.add_argument("--gpus-per-task", default=None, metavar="[gpu:]N")
    for name in GPU_OPTIONS:
        p.add_argument(name, dest=f"gpu {name}", default=None, metavar="[gpu:]N")
    for name in IGNORED:
        p.add_argument(name, dest=f"ignored {name}", default=None)
    for name in IGNORED_FLAGS:
        p.add_argument(name, dest=f"ignored {name}", action="store_true")
    p.add_argument(*OPTIONAL, dest="kill_on_bad_exit", action="store_true")  # what minihpc always does
    p.add_argument("command", nargs=argparse.REMAINDER)
    return p


TAKES_VALUE = ("-N", "--nodes", "-n", "--ntasks", "--ntasks-per-node", "-i", "--input", "-o", "--output", "-e",
               "--error", "-m", "--distribution", *IGNORED)

CHUNK = 64 * 1024
"""Bytes of stdin read and sent at a time."""


def normalize(argv: list[str]) -> list[str]:
    """srun's own options with ``-K1``/``--kill-on-bad-exit=0`` made plain ``-K`` (its value is
    attached or absent, never the next word); the command and its arguments untouched."""
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg == "--":
            return out + argv[i:]
        if arg in ("-K0", "-K1") or arg.startswith("--kill-on-bad-exit="):
            arg = "-K"
        out.append(arg)
        if arg in TAKES_VALUE and i + 1 < len(argv):
            out.append(argv[i + 1])
            i += 1
        i += 1
    return out


def warnings(args: argparse.Namespace, env: dict[str, str] | None = None) -> list[str]:
    """srun's warnings: options it ignores here, and, as Slurm's, a job's --ntasks-per-node
    (SLURM_NTASKS_PER_NODE) that the step's -N and -n contradict (they win)."""
    out = []
    per_node = (env or {}).get("SLURM_NTASKS_PER_NODE", "")
    if args.ntasks_per_node is None and per_node.isdigit() and args.nodes and args.ntasks and \
            int(per_node) * args.nodes != args.ntasks:
        out.append(f"srun: Warning: can't honor --ntasks-per-node set to {per_node} which doesn't match the "
                   f"requested tasks {args.ntasks} with the number of requested nodes {args.nodes}. "
                   "Ignoring --ntasks-per-node.")
    for key, value in sorted(vars(args).items()):
        if key.startswith("ignored ") and value not in (None, False):
            out.append(f"srun: warning: {key[8:]} has no effect in minihpc; ignored")
    return out


def input_mode(value: str) -> str | int:
    """What the server is told of ``-i/--input``: all, none, a task id; a file is read here and
    sent to all tasks."""
    if value in ("all", "none"):
        return value
    if value.isdigit():
        return int(value)
    return "all"


def check(args: argparse.Namespace) -> None:
    """UsageError for options srun cannot honour here: a distribution other than block, I/O
    it cannot do."""
    if args.distribution is not None and args.distribution.split(":")[0] not in ("block", "*"):
        raise UsageError(f"-m/--distribution={args.distribution}: minihpc places a step's tasks in blocks only "
                         "(-m block, the default)")
    if "%" in args.input:
        raise UsageError(f"--input={args.input}: a per-task input file pattern is not supported; "
                         "use a file name, all, none or a task id")
    for option, value in (("--output", args.output), ("--error", args.error)):
        if value is not None:
            check_pattern(option, value)
    step_gpus(args, os.environ)


def step_gpus(args: argparse.Namespace, env: dict[str, str]) -> int:
    """``--gpus-per-task``'s N (0 without it); UsageError for a step asking more GPUs of a
    node than its job holds there (SLURM_GPUS_ON_NODE), as Slurm refuses it."""
    have = int(env.get("SLURM_GPUS_ON_NODE") or 0)
    per_task = gpus.count(args.gpus_per_task, "--gpus-per-task") if args.gpus_per_task else 0
    asked = [(name, gpus.count(getattr(args, f"gpu {name}"), name)) for name in GPU_OPTIONS
             if getattr(args, f"gpu {name}") is not None]
    if per_task:
        asked.append(("--gpus-per-task", per_task))
    for name, count in asked:
        if count > have:
            raise UsageError(f"{name}: the job holds {have} GPU(s) on each node; a step cannot ask for {count}")
    return per_task


def request(args: argparse.Namespace, env: dict[str, str], cwd: str) -> dict:
    return {"argv": list(args.command), "nodes": args.nodes, "ntasks": args.ntasks,
            "ntasks_per_node": args.ntasks_per_node, "env": env, "cwd": cwd, "input": input_mode(args.input),
            "unbuffered": args.unbuffered, "gpus_per_task": step_gpus(args, env)}


def pattern_values(env: dict[str, str], step: int) -> dict[str, str]:
    """What ``-o/-e`` patterns expand with, other than the task's own."""
    return {"j": env.get("SLURM_JOB_ID", ""), "s": str(step), "u": env.get("USER", ""),
            "x": env.get("SLURM_JOB_NAME", "")}


def _send(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _forward_stdin(conn: socket.socket, source: int) -> None:
    """srun's stdin (or ``--input``'s file) to the server, then its end; stops quietly when
    the connection goes."""
    try:
        for chunk in read_chunks(source, CHUNK):
            _send(conn, {"i": base64.b64encode(chunk).decode()})
        _send(conn, {"eof": True})
    except OSError:
        pass


def main(argv: list[str]) -> int:
    args = parser().parse_args(normalize(argv))
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        print("srun: error: no command to run", file=sys.stderr)
        return 1
    try:
        check(args)
    except UsageError as exc:
        print(f"srun: error: {exc}", file=sys.stderr)
        return 1
    path = os.environ.get(SOCKET_ENV)
    if not path or not os.path.exists(path):
        print("srun: error: not inside a minihpc batch job's first node (no step server); "
              "submit a batch script, or sbatch --wrap 'srun CMD'", file=sys.stderr)
        return 1
    source = 0
    if input_mode(args.input) == "all" and args.input != "all":
        try:
            source = os.open(args.input, os.O_RDONLY)
        except OSError as exc:
            print(f"srun: error: Could not open stdin file: {args.input}: {exc.strerror}", file=sys.stderr)
            return 1
    for line in warnings(args, dict(os.environ)):
        print(line, file=sys.stderr)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a closed pipe ends srun, and so its step, as Slurm's
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        _send(conn, request(args, dict(os.environ), os.getcwd()))
        sink = None
        try:
            for line in conn.makefile("rb"):
                answer = json.loads(line)
                if "o" in answer and sink is not None:
                    sink.write(int(answer["t"]), int(answer["f"]), base64.b64decode(answer["o"]))
                elif "step" in answer:
                    sink = Sink(args.output, args.error, args.label, pattern_values(os.environ, answer["step"]),
                                (answer.get("nodes") or [], answer.get("tasks") or []))
                    if input_mode(args.input) != "none":
                        threading.Thread(target=_forward_stdin, args=(conn, source), daemon=True).start()
                elif "warning" in answer:
                    print(answer["warning"], file=sys.stderr)
                elif "error" in answer:
                    print(f"srun: error: {answer['error']}", file=sys.stderr)
                    return 1
                elif "exit_code" in answer:
                    for error in answer.get("errors") or []:
                        print(error, file=sys.stderr)
                    return int(answer["exit_code"])
        finally:
            if sink is not None:
                sink.close()
    print("srun: error: the step server went away before the step ended (the job is ending)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
