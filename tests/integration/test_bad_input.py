"""Bad input: one clear line on stderr, a non-zero exit, and nothing changed."""

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import free_port
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration


def _one_line_error(proc, *fragments):
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _job_count(cluster):
    return len(cluster.queue()) + len(json.loads(cluster.cli("history", "--json").stdout))


@pytest.mark.parametrize(
    "args,fragments",
    [
        (["does/not/exist.py"], ["'does/not/exist.py' does not exist"]),
        ([str(JOBS)], ["is not a file"]),
        (["-N", "4", str(JOBS / "gate.py")], ["job needs 4 nodes; the cluster has 3"]),
        (["-N", "0", str(JOBS / "gate.py")], ["--nodes must be at least 1"]),
        (["--priority", "urgent", str(JOBS / "gate.py")], ["invalid choice: 'urgent'"]),
        (["-t", "1:xx", str(JOBS / "gate.py")], ["invalid time limit '1:xx'"]),
        (["-d", "afterok:99999", str(JOBS / "gate.py")], ["names job 99999, which does not exist"]),
        (["-d", "afterwards:1", str(JOBS / "gate.py")], ["invalid dependency 'afterwards:1'", "unknown type"]),
        (["-d", "afternotok:99999", str(JOBS / "gate.py")], ["afternotok:99999 names job 99999, which does not exist"]),
    ],
)
def test_bad_submissions_are_refused_and_change_nothing(cluster, args, fragments):
    before = _job_count(cluster)
    _one_line_error(cluster.cli("submit", *args, check=False), *fragments)
    assert _job_count(cluster) == before


def test_bad_header_line_is_refused(cluster, tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("#MINIHPC --nodes many\nprint(1)\n")
    _one_line_error(cluster.cli("submit", script, check=False), "--nodes", "'many'")


@pytest.mark.parametrize("command", [["show", "99999"], ["cancel", "99999"], ["wait", "99999"], ["logs", "99999"]])
def test_unknown_job_id(cluster, command):
    _one_line_error(cluster.cli(*command, check=False), "job 99999 does not exist")


def test_non_numeric_job_id(cluster):
    _one_line_error(cluster.cli("show", "abc", check=False), "invalid job id 'abc'")


def test_redis_unreachable(cluster):
    env = dict(cluster.env, MINIHPC_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    for command in (["queue"], ["nodes"], ["submit", str(JOBS / "gate.py")]):
        _one_line_error(cluster.cli(*command, check=False, env=env), "cannot reach Redis at redis://127.0.0.1:")


def test_wrong_password_is_named(cluster):
    env = dict(cluster.env, MINIHPC_REDIS_URL=f"redis://127.0.0.1:{cluster.port}/0")
    _one_line_error(cluster.cli("queue", check=False, env=env), "needs a password")


def _as_in_a_terminal() -> None:
    """Ctrl-C's signal as a terminal's foreground program gets it: a suite started in the
    background of a non-interactive shell (`make test &`) runs with SIGINT ignored, which its
    programs inherit and keep (Python then installs no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_watch_exits_cleanly(cluster):
    proc = subprocess.Popen(
        [sys.executable, "-m", "minihpc.cli", "queue", "--watch", "--interval", "0.2"],
        env=cluster.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_in_a_terminal,
    )
    # Its first frame: Ctrl-C during the imports is Python's (a traceback), not the watch's.
    first = proc.stdout.readline() + proc.stdout.readline()
    assert "every 0.2s, Ctrl-C to stop" in first, first
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 130
    assert "JOBID" in out
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_second_up_on_the_same_state_is_refused(cluster):
    proc = cluster.cli("up", "--local", "--port", free_port(), "--state-dir", cluster.state_dir, check=False)
    _one_line_error(proc, "already running")


def test_up_on_a_busy_port_is_refused(cluster, tmp_path):
    proc = cluster.cli("up", "--local", "--port", cluster.port, "--state-dir", tmp_path / "other", check=False)
    _one_line_error(proc, f"port {cluster.port}", "in use")
