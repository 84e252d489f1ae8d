"""machine.ports: a port a job's server will listen on later is outside the range the kernel
hands to outgoing connections, so none of those takes it in between."""

import socket

from minihpc.machine import ports


def test_a_later_listeners_port_is_free_and_below_the_ephemeral_range():
    low, _ = ports._ephemeral()
    for _ in range(20):
        port = ports.free_listen_port()
        assert 10000 <= port < low
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", port))  # free: binding it works


def test_a_taken_port_is_never_given(monkeypatch):
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("", 0))
    taken.listen()
    port = taken.getsockname()[1]
    monkeypatch.setattr(ports, "_ephemeral", lambda: (port + 1, 60999))
    monkeypatch.setattr(ports.random, "randrange", lambda a, b: port)
    try:
        assert ports.free_listen_port(tries=3) != port  # every try taken: the kernel's choice
    finally:
        taken.close()


def test_a_port_is_a_processs_own_only_while_it_listens_there_itself():
    """`up --local` waits for the API's own socket: a port in use by another process (one that
    took it before the API could bind it) is not the API started."""
    import os
    import subprocess
    import sys

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as mine:
        mine.bind(("127.0.0.1", 0))
        mine.listen()
        port = mine.getsockname()[1]
        assert ports.listens(os.getpid(), port)
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert not ports.listens(other.pid, port), "in use, but not by that process"
        finally:
            other.kill()
            other.wait()
        assert not ports.listens(other.pid, port), "a process gone listens nowhere"
    assert not ports.listens(os.getpid(), port), "closed"
