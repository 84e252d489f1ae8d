"""The suite's ``minihpc`` calls, each a real process forked from one that has imported the CLI.

Each call to the CLI costs a Python start and its imports (about 0.4 s of CPU on this kind of
machine, most of it redis-py and minihpc's modules): the integration tier makes about 800 of
them, a third of its CPU on 2 cores. This helper starts, once per pytest process, a server that
imports ``minihpc.cli.main`` and then forks a child per call, as the product's warm launcher
forks ranks. The child is the command as a user runs it, in a process of its own: its own
arguments, environment, working directory and stdin, stdout and stderr (the caller's files, passed
over a Unix socket), and it ends as ``python -m minihpc.cli`` ends (``sys.exit(main())``, atexit
handlers and all); its exit status, or the signal that ended it, is the one the caller gets.

What it does not repeat per call is the interpreter's start, so settings Python reads only at
start-up (PYTHON* variables) come from the server's environment: tests that need those, or that
test the start itself (tests/integration/test_bad_input.py), start ``python -m minihpc.cli``.
MINIHPC_TEST_CLI=exec starts every call that way.

    run(args, env=..., input=..., timeout=...) -> subprocess.CompletedProcess
"""

from __future__ import annotations

import atexit
import io
import json
import locale
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

HEADER = struct.Struct("!I")
"""A request's length, before its JSON: {"argv", "env", "cwd"}, with stdin, stdout and stderr attached."""

_server: tuple[subprocess.Popen, str] | None = None
_lock = threading.Lock()


def _server_path() -> str:
    """The running server's socket, started on first use (and again if it died)."""
    global _server
    with _lock:
        if _server is None or _server[0].poll() is not None:
            path = os.path.join(tempfile.mkdtemp(prefix="minihpc-cli-"), "sock")
            # Its stdin is a pipe from this process: when this process ends, the server does.
            proc = subprocess.Popen([sys.executable, __file__, path], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _server = (proc, path)
            for _ in range(600):  # its imports: seconds on a busy machine
                with socket.socket(socket.AF_UNIX) as probe:
                    try:
                        probe.connect(path)
                        probe.sendall(HEADER.pack(0))  # a ping: the server closes it
                        break
                    except (FileNotFoundError, ConnectionRefusedError):
                        if proc.poll() is not None:
                            raise RuntimeError(f"the warm CLI server exited {proc.returncode}") from None
                threading.Event().wait(0.05)
            else:
                raise RuntimeError("the warm CLI server did not start in 30 s")
        return _server[1]


def run(args, env=None, input: str | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """``minihpc ARGS`` like ``subprocess.run([python, -m, minihpc.cli, *args], capture_output=True,
    text=True, ...)``, with stdin from ``input`` (or /dev/null)."""
    argv = [str(a) for a in args]
    command = [sys.executable, "-m", "minihpc.cli", *argv]
    if os.environ.get("MINIHPC_TEST_CLI") == "exec":
        return subprocess.run(command, env=env, input=input, capture_output=True, text=True, timeout=timeout,
                              stdin=None if input is not None else subprocess.DEVNULL)
    encoding = locale.getpreferredencoding(False)
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout, \
            tempfile.TemporaryFile() as stderr, socket.socket(socket.AF_UNIX) as conn:
        if input is not None:
            stdin.write(input.encode(encoding))
            stdin.seek(0)
        request = json.dumps({"argv": argv, "env": dict(os.environ if env is None else env),
                              "cwd": os.getcwd()}).encode()
        conn.connect(_server_path())
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            socket.send_fds(conn, [HEADER.pack(len(request)) + request],
                            [stdin.fileno() if input is not None else devnull, stdout.fileno(), stderr.fileno()])
        finally:
            os.close(devnull)
        pid = int(_line(conn))
        conn.settimeout(timeout)
        try:
            line = _line(conn)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)  # as subprocess.run does on a timeout
            conn.settimeout(None)
            _line(conn)
            raise subprocess.TimeoutExpired(command, timeout, _read(stdout, encoding), _read(stderr, encoding)) from None
        except BaseException:
            os.kill(pid, signal.SIGKILL)
            raise
        code = os.waitstatus_to_exitcode(int(line))
        return subprocess.CompletedProcess(command, code, _read(stdout, encoding), _read(stderr, encoding))


def _line(conn: socket.socket) -> bytes:
    """One line of the server's reply (a pid, then a wait status)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            raise RuntimeError("the warm CLI server closed the connection")
        data += chunk
    return data


def _read(file, encoding: str) -> str:
    file.seek(0)
    return io.TextIOWrapper(io.BytesIO(file.read()), encoding=encoding).read()  # universal newlines, as text=True


# --- the server -------------------------------------------------------------------------------


def _receive(conn: socket.socket) -> tuple[dict | None, list[int]] | None:
    """A request and its three fds; (None, []) for the start-up ping; None for a torn one."""
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    if len(data) < HEADER.size:
        return None
    (size,) = HEADER.unpack_from(data)
    data = data[HEADER.size:]
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return (json.loads(data) if size else None), fds


def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: run ``minihpc ARGV`` and end as ``python -m minihpc.cli`` ends:
    ``sys.exit(main())``'s status, after its threads and atexit handlers (logging's flush among
    them), without tearing down every module, which took 0.15 s per call and shows nothing."""
    from minihpc.cli.main import main

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # as subprocess's close_fds: the server's sockets too
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [str(Path(sys.modules["minihpc.cli.main"].__file__).with_name("__main__.py")), *request["argv"]]
    try:
        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - printed and exit 1, as the interpreter does
        traceback.print_exc()
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # the non-daemon threads, joined as at interpreter exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit((code or 0) & 0xFF)


def serve(path: str) -> None:
    from minihpc.cli.main import build_parser

    build_parser()  # the warm part: every import a call makes, and argparse's gettext look-ups

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "reap")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
    waiting: dict[int, socket.socket] = {}
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                os._exit(0)  # the pytest process that started this server is gone
            if key.data == "reap":
                os.read(wake_r, 4096)
            else:
                conn, _ = listener.accept()
                received = _receive(conn)
                if received is None or received[0] is None:
                    conn.close()
                    continue
                request, fds = received
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    conn.close()
                    _child(request, fds)
                for fd in fds:
                    os.close(fd)
                conn.sendall(f"{pid}\n".encode())
                waiting[pid] = conn
            while waiting:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                conn = waiting.pop(pid, None)
                if conn is not None:
                    try:
                        conn.sendall(f"{status}\n".encode())
                    except OSError:
                        pass
                    conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
