"""Process trees on this machine: finding one, signalling one, and the one way minihpc ends
one (SIGTERM, a grace period, then SIGKILL for whatever is left)."""

from __future__ import annotations

import signal
import subprocess

import psutil


def process_tree(pid: int) -> list[psutil.Process]:
    """A process and its live descendants (the root first); empty if it is gone."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def send(procs: list[psutil.Process], sig: int) -> None:
    """Send ``sig`` to each of ``procs``; one that is already gone is skipped."""
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.NoSuchProcess:
            pass


def terminate(procs: list[psutil.Process], grace: float, term: list[psutil.Process] | None = None) -> None:
    """SIGTERM ``term`` (default: all of ``procs``), give them ``grace`` seconds to exit, then
    SIGKILL whatever of ``procs`` is left, with any children they started meanwhile (a rank
    spawning a worker while dying), and reap them."""
    term = procs if term is None else term
    send(term, signal.SIGTERM)
    psutil.wait_procs(term, timeout=grace)
    left = [p for p in procs if _running(p)]
    late = [c for p in left for c in _children(p) if c not in left]
    send(left + late, signal.SIGKILL)
    psutil.wait_procs(left + late, timeout=max(grace, 1.0))


def teardown(launched: list[subprocess.Popen], kill_wait: float) -> None:
    """End processes this one started, with everything they started (:func:`terminate`, all at
    once); each Popen then keeps its real status: psutil reaps a child while waiting, after
    which Popen alone would read 0."""
    trees = [(proc, process_tree(proc.pid)) for proc in launched]
    terminate([p for _, tree in trees for p in tree], kill_wait)
    for proc, tree in trees:
        root = next((p for p in tree if p.pid == proc.pid), None)
        if proc.returncode is None and getattr(root, "returncode", None) is not None:
            proc.returncode = root.returncode


def running(pid: int) -> bool:
    """Alive and not a zombie (a dead child nobody reaped yet holds its pid)."""
    try:
        return _running(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make the processes that descendants of this one detach (a double fork, setsid) its
    children rather than init's, so they stay in its tree, to be found and ended (prctl
    PR_SET_CHILD_SUBREAPER). False where the kernel does not offer it."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
