"""Runs one rank's script: ``python -m minihpc.node.rank SCRIPT [ARGS...]`` (torchrun's entry point),
or :func:`forked` in a rank that torchrun forked (see minihpc.node.torchrun).

It adds Slurm's per-rank variables (SLURM_PROCID, SLURM_LOCALID) from torchrun's, runs the
script as ``__main__``, and then ends the process with ``os._exit`` after running the atexit
handlers and flushing output. Skipping the interpreter's final teardown avoids a known gloo
abort ("terminate called without an active exception", SIGABRT) that otherwise kills about
one rank in fifteen *after* a successful ``destroy_process_group()``. The exit status is the
script's own: 0, its ``sys.exit`` code, or 1 on an uncaught exception (traceback printed).
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import traceback

from minihpc.core import gpus


def exit_code(exc: SystemExit) -> int:
    """The status ``sys.exit(...)`` asks for, as the interpreter reads it."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def flush_output() -> None:
    """Flush stdout and stderr before an ``os._exit``, whatever state they are in."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass


def _become_subreaper() -> bool:
    """Processes the script detaches (a double fork, setsid) become this rank's children rather
    than init's, so that they can be found, and ended with the rank, as Slurm ends a task's."""
    from minihpc.machine.processes import become_subreaper

    return become_subreaper()


def _has_children() -> bool:
    """Whether this process has a child, from the kernel's own list (no scan of every process,
    which psutil's needs: ~15 ms at the end of every rank); True when the list cannot be read."""
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as fh:
                if fh.read().strip():
                    return True
    except OSError:
        return True
    return False


def _end_leftovers(grace: float = 1.0) -> None:
    """Nothing the script started outlives its rank (a daemon it left would also hold
    torchrun's pipes open, so the job would never end): SIGTERM, then SIGKILL after ``grace``."""
    if not _has_children():
        return
    import psutil

    from minihpc.machine.processes import terminate

    left = psutil.Process().children(recursive=True)
    if not left:
        return
    terminate(left, grace)
    print(f"minihpc: {len(left)} process(es) the script left running were ended with its rank "
          f"(pids {', '.join(str(p.pid) for p in left)})", file=sys.stderr, flush=True)


def run(script: str, args: list[str]) -> int:
    """Run the script as ``__main__`` with ``args``; its exit status, after the atexit
    handlers and flushing output, and after ending whatever it left running."""
    reaper = _become_subreaper()
    os.environ["SLURM_PROCID"] = os.environ.get("RANK", "0")
    os.environ["SLURM_LOCALID"] = os.environ.get("LOCAL_RANK", "0")
    os.environ.update(gpus.task_env(os.environ, int(os.environ["SLURM_LOCALID"])))  # --gpus-per-task
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exit_code(exc)
    except _Exit as exc:
        code = exc.status
    except BaseException:  # noqa: BLE001 - report like the interpreter would
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        flush_output()
    if reaper:
        try:
            _end_leftovers()
        except Exception as exc:  # noqa: BLE001 - the script's own status still stands
            print(f"minihpc: could not end what the script left running: {exc}", file=sys.stderr, flush=True)
    return code


def main() -> None:
    if len(sys.argv) < 2:
        print("usage: python -m minihpc.node.rank SCRIPT [ARGS...]", file=sys.stderr)
        os._exit(2)
    os._exit(run(sys.argv[1], sys.argv[2:]))


# Signals torchrun's agent handles itself; a forked rank must die of them as a spawned one would.
_DEFAULT_SIGNALS = ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def forked(script: str, *args: str) -> None:
    """A rank forked from torchrun's agent, torch (and what DDP imports) already loaded.

    It undoes what it inherited that a fresh rank would not have -- the agent's signal
    handlers, and buffered output (a spawned rank runs ``python -u``) -- then runs the script.
    Multiprocessing ends the process with ``os._exit`` after this returns, so no interpreter
    teardown happens here either; a non-zero status leaves as SystemExit, which becomes the
    process's exit code."""
    import signal

    for name in _DEFAULT_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(write_through=True)
    # Scripts end with os._exit(0) after destroy_process_group() to dodge gloo's abort at
    # teardown. Here that would leave torchrun's agent waiting for a result that never comes,
    # so in this process (not in processes it forks, e.g. DataLoader workers) os._exit
    # unwinds instead: multiprocessing then ends the process with the real os._exit, which
    # skips the teardown all the same.
    real_exit, me = os._exit, os.getpid()

    def _exit(status: int) -> None:
        if os.getpid() != me:
            real_exit(status)
        raise _Exit(status)

    os._exit = _exit
    try:
        code = run(script, list(args))
    finally:
        os._exit = real_exit
    if code != 0:
        raise SystemExit(code)


class _Exit(BaseException):
    """os._exit(status) called by a forked rank's script."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


if __name__ == "__main__":
    main()
