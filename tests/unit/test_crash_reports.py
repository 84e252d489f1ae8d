"""Crash reports: how an ended agent is described, whether a report is about the agent that
beats now, and local mode's watcher, on real processes (pidfds)."""

import subprocess
import sys
import threading
import time

import pytest

from minihpc.core.crashes import Crash, applies, container_phrase, docker_death, exit_phrase, systemd_phrase
from minihpc.machine.local_state import LocalState
from minihpc.restart.exits import ExitWatcher, is_agent
from tests.conftest import wait_until


def test_exit_phrases_name_the_signal_or_the_status_and_never_guess():
    assert exit_phrase(-9) == "its process was killed by SIGKILL"
    assert exit_phrase(-15) == "its process was killed by SIGTERM"
    assert exit_phrase(3) == "its process exited with status 3"
    assert exit_phrase(None) == "its process ended"
    assert container_phrase(137) == "its container exited with code 137 (SIGKILL)"
    assert container_phrase(1) == "its container exited with code 1"
    assert container_phrase(None) == "its container stopped"


def test_a_report_ends_only_the_agent_that_beat_before_it():
    crash = Crash("n1", 100.0, "its process ended")
    assert applies(99.6, crash)
    assert applies(100.0, crash)
    assert not applies(100.2, crash)  # a newer agent (a restart) has beaten since
    assert not applies(None, crash)  # already DOWN


def agent_like(node: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "agent", "--name", node])


@pytest.fixture
def watched(tmp_path):
    state = LocalState(tmp_path)
    procs = {n: agent_like(n) for n in ("n1", "n2")}
    state.save_node_commands({n: {"argv": [], "log": ""} for n in procs})
    state.save_pids({n: p.pid for n, p in procs.items()})
    reports: list[Crash] = []
    stop = threading.Event()
    codes = {p.pid: p for p in procs.values()}
    watcher = ExitWatcher(state, reports.append, stop, lambda node, pid: codes[pid].wait())
    watcher.start()
    wait_until(lambda: len(watcher.fds) == 2, timeout=5, message="both agents watched")
    yield state, procs, reports, watcher
    stop.set()
    for p in procs.values():
        p.kill()
        p.wait()


def test_the_watcher_reports_a_killed_agent_at_once_with_its_signal(watched):
    state, procs, reports, _ = watched
    killed_at = time.time()
    procs["n2"].kill()
    wait_until(lambda: reports, timeout=5, message="a crash report")
    (crash,) = reports
    assert crash.node == "n2" and crash.cause == "its process was killed by SIGKILL"
    assert killed_at <= crash.at <= time.time()
    assert procs["n1"].poll() is None and len(reports) == 1


def test_a_respawned_agent_is_watched_too(watched):
    state, procs, reports, watcher = watched
    procs["n1"].terminate()
    wait_until(lambda: reports, timeout=5, message="a crash report")
    assert reports[0].cause == "its process was killed by SIGTERM"
    again = agent_like("n1")
    procs["n1b"] = again
    watcher.returncode = lambda node, pid: again.wait()
    state.set_pid("n1", again.pid)
    wait_until(lambda: again.pid in {pid for _, pid in watcher.fds.values()}, timeout=5, message="the new agent")
    again.send_signal(9)
    wait_until(lambda: len(reports) == 2, timeout=5, message="a second report")
    assert reports[1].node == "n1" and reports[1].cause == "its process was killed by SIGKILL"


def test_a_pid_that_is_not_the_nodes_agent_is_not_watched(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "agent", "--name", "n9"])
    try:
        assert is_agent(other.pid, "n9") and not is_agent(other.pid, "n1")
    finally:
        other.kill()
        other.wait()
    assert not is_agent(other.pid, "n9")  # gone


def test_a_docker_die_event_names_the_node_its_time_and_exit_code():
    event = {"Type": "container", "Action": "die", "time": 1700000000, "timeNano": 1700000000123456789,
             "Actor": {"ID": "abc", "Attributes": {"com.docker.compose.service": "worker-node-1", "exitCode": "137"}}}
    assert docker_death(event) == {"node": "worker-node-1", "at": 1700000000.1234567, "exit_code": 137}
    assert docker_death(dict(event, Action="start")) is None
    assert docker_death({**event, "Actor": {"ID": "abc", "Attributes": {"exitCode": "0"}}}) is None  # not Compose's
    oneoff = {"com.docker.compose.service": "worker-node-1", "com.docker.compose.oneoff": "True", "exitCode": "0"}
    assert docker_death({**event, "Actor": {"ID": "abc", "Attributes": oneoff}}) is None  # compose run: not the node


def test_systemd_s_account_of_a_unit_s_end_is_told_and_a_clean_stop_is_not():
    assert systemd_phrase("signal", "killed", "KILL") == "its unit's process was killed by SIGKILL"
    assert systemd_phrase("core-dump", "dumped", "SEGV") == "its unit's process was killed by SIGSEGV (core dumped)"
    assert systemd_phrase("exit-code", "exited", "1") == "its unit's process exited with status 1"
    assert systemd_phrase("timeout", "", "") == "its unit stopped (timeout)"
    assert systemd_phrase("success", "exited", "0") is None
    assert systemd_phrase("", "", "") is None  # not run by systemd: nothing is known to have ended
