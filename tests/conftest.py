"""Shared test helpers: a polling wait, a free port, and whether a Docker engine answers."""

import shutil
import subprocess
import time

import pytest

from minihpc.machine import ports


def wait_until(predicate, timeout=30.0, interval=0.05, message="condition"):
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def free_port() -> int:
    """A port for a server a test starts a moment later: outside the kernel's range for bind(0)
    and outgoing connections, so no node exporter (which binds port 0) takes it meanwhile (a CI
    run lost its API's port to one)."""
    return ports.free_listen_port()


def docker_answers() -> bool:
    """True when a Docker engine answers (the e2e and Ansible suites skip without one)."""
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


FREEZER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4206, 0x4207
tid = int(sys.argv[1])  # this thread alone stops: no group stop, the process's other threads run on
for request in (PTRACE_SEIZE, PTRACE_INTERRUPT):
    if libc.ptrace(request, tid, None, None) != 0:
        sys.exit(f"ptrace {request:#x} of {tid}: errno {ctypes.get_errno()}")
print("frozen", flush=True)
# The stop lasts while the trace does. A tracee that is killed is the tracer's to collect first
# (else it stays a zombie, and Docker never sees its container end): wait for its end, then go.
while True:
    try:
        _, status = os.waitpid(tid, 0x40000000)  # __WALL
    except ChildProcessError:
        break
    if os.WIFEXITED(status) or os.WIFSIGNALED(status):
        break
"""


def freeze_main_thread(pid: int) -> subprocess.Popen:
    """Stop the main thread of process ``pid`` (a node agent's worker) while its other threads
    (its heartbeat) run on, as a hung call would leave it: with ptrace, for as long as the
    returned process lives (root only). Kill that process to let the thread go."""
    import sys

    freezer = subprocess.Popen([sys.executable, "-c", FREEZER, str(pid)], stdout=subprocess.PIPE, text=True)
    line = freezer.stdout.readline().strip()
    if line != "frozen":
        freezer.kill()
        raise AssertionError(f"could not stop the main thread of {pid}: {line or freezer.wait()}")
    return freezer
