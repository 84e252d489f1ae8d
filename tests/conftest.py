"""Shared test helpers: a polling wait, a free port, and whether a Docker engine answers."""

import shutil
import socket
import subprocess
import time

import pytest


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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def docker_answers() -> bool:
    """True when a Docker engine answers (the e2e and Ansible suites skip without one)."""
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0
