"""``srun`` inside a minihpc batch script: start a command once per task across the job's
allocation, wait for every task, exit with the step's code (the first failed task's).

It holds no credentials: it asks the first node's agent, over the socket in the job's private
directory (``MINIHPC_SRUN_SOCKET``), which starts the tasks on each node as the job's user.
The tasks' output goes to each node's job log, not through srun. Options that have no meaning
here are accepted with one warning (``man srun``); see the README's table.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys

SOCKET_ENV = "MINIHPC_SRUN_SOCKET"

IGNORED = ("--mpi", "--cpu-bind", "--cpu_bind", "--gpus-per-task", "--gpu-bind", "--mem", "--mem-per-cpu",
           "--gres", "-c", "--cpus-per-task", "-J", "--job-name", "--distribution", "-m", "--hint", "-W", "--wait")
"""Options taking a value that srun accepts and ignores here (one warning each)."""
IGNORED_FLAGS = ("-l", "--label", "-u", "--unbuffered", "--exclusive", "--overlap", "-X", "--disable-status",
                 "-Q", "--quiet", "-v", "--verbose")
"""Flags srun accepts and ignores here."""
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
    for name in IGNORED:
        p.add_argument(name, dest=f"ignored {name}", default=None)
    for name in IGNORED_FLAGS:
        p.add_argument(name, dest=f"ignored {name}", action="store_true")
    p.add_argument(*OPTIONAL, dest="kill_on_bad_exit", action="store_true")  # what minihpc always does
    p.add_argument("command", nargs=argparse.REMAINDER)
    return p


TAKES_VALUE = ("-N", "--nodes", "-n", "--ntasks", "--ntasks-per-node", *IGNORED)


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


def warnings(args: argparse.Namespace) -> list[str]:
    out = []
    for key, value in sorted(vars(args).items()):
        if key.startswith("ignored ") and value not in (None, False):
            out.append(f"srun: warning: {key[8:]} has no effect in minihpc; ignored")
    return out


def request(args: argparse.Namespace, env: dict[str, str], cwd: str) -> dict:
    return {"argv": list(args.command), "nodes": args.nodes, "ntasks": args.ntasks,
            "ntasks_per_node": args.ntasks_per_node, "env": env, "cwd": cwd}


def main(argv: list[str]) -> int:
    args = parser().parse_args(normalize(argv))
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        print("srun: error: no command to run", file=sys.stderr)
        return 1
    path = os.environ.get(SOCKET_ENV)
    if not path or not os.path.exists(path):
        print("srun: error: not inside a minihpc batch job's first node (no step server); "
              "submit a batch script, or sbatch --wrap 'srun CMD'", file=sys.stderr)
        return 1
    for line in warnings(args):
        print(line, file=sys.stderr)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        conn.sendall(json.dumps(request(args, dict(os.environ), os.getcwd())).encode() + b"\n")
        reader = conn.makefile("r")
        for line in reader:
            answer = json.loads(line)
            if "error" in answer:
                print(f"srun: error: {answer['error']}", file=sys.stderr)
                return 1
            if "exit_code" in answer:
                for error in answer.get("errors") or []:
                    print(error, file=sys.stderr)
                return int(answer["exit_code"])
    print("srun: error: the step server went away before the step ended (the job is ending)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
