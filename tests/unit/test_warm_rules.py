"""The warm launcher's rules (what starts cold, a forked job's sys.path) and its processes: a
real launcher forking torchrun, whose status, signals and end reach the agent as a Popen's."""

import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from minihpc.core.launch_spec import LaunchSpec, direct_rank_env
from minihpc.core.warm import child_path, cold_reason, runs_direct, shadowed
from minihpc.machine import proctitle
from minihpc.machine.ports import free_port
from minihpc.node.warm import LOST, Died, Unavailable, WarmLauncher, WarmProcess, server_env
from tests.conftest import wait_until

SAME = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"}


def test_only_what_is_read_at_start_and_differs_sends_a_job_cold():
    assert cold_reason(False, False, SAME, dict(SAME, MINIHPC_JOB_ID="4", PYTHONPATH="/src", PYTHONUNBUFFERED="1")) is None
    assert cold_reason(True, False, SAME, SAME) == "the job asked for a cold start (--cold)"
    assert "-o/-e files" in cold_reason(False, True, SAME, SAME)
    why = cold_reason(False, False, SAME, dict(SAME, OMP_NUM_THREADS="1", PYTHONHASHSEED="0", LD_PRELOAD="x.so"))
    assert why.startswith("its environment sets LD_PRELOAD, OMP_NUM_THREADS, PYTHONHASHSEED differently"), why
    unset = cold_reason(False, False, SAME, {"PATH": "/usr/bin"})  # unset counts as different too
    assert "OMP_NUM_THREADS" in unset


def test_a_forked_job_s_path_is_a_new_interpreter_s_without_merging():
    base = ["/usr/lib/python3.11", "/venv/site-packages"]
    assert child_path("/work", "/src:/work", base) == ["/work", "/src", "/work", *base]
    assert child_path("/work", "", base) == ["/work", *base]


def test_the_launcher_holds_no_credential():
    env = server_env({"PATH": "/bin", "MINIHPC_REDIS_URL": "redis://node:pw@h", "REDIS_PASSWORD": "pw"})
    assert env == {"PATH": "/bin", "PYTHONSAFEPATH": "1", "PYTHONUNBUFFERED": "1"}


def test_a_forked_process_shows_its_own_command_line_and_environment():
    child = os.fork()
    if child == 0:
        ok = proctitle.become(["python", "-m", "job", "a b"], {"A": "1"})
        time.sleep(5 if ok else 0)
        os._exit(0 if ok else 1)
    try:
        proc = psutil.Process(child)
        wait_until(lambda: proc.cmdline() == ["python", "-m", "job", "a b"], timeout=5, message="the new title")
        assert proc.environ() == {"A": "1"}
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def test_a_share_of_one_rank_runs_it_without_torchrun_as_torchrun_would_number_it():
    assert runs_direct(1, "fork") and not runs_direct(2, "fork") and not runs_direct(1, "spawn")
    spec = LaunchSpec(job_id=4, attempt=1, name="j", node="worker-node-2", node_rank=2,
                      nodes=["master-node", "worker-node-1", "worker-node-2"], master_addr="10.0.0.1",
                      tasks_per_node=1, script="/s.py")
    env = direct_rank_env(spec, 29512, {"PATH": "/bin", "RANK": "stale"})
    assert {k: env[k] for k in ("PATH", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE")} == {
        "PATH": "/bin", "RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29512",
        "TORCHELASTIC_USE_AGENT_STORE": "True"}  # node rank 0's process hosts it, as torchrun's agent would


SLEEPER = ("import os, sys, time; print('up', os.environ.get('RANK'), 'MINIHPC_RESULT_FILE' in os.environ, flush=True); "
           "time.sleep(float(sys.argv[1])); sys.exit(int(sys.argv[2]))")


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    script = tmp_path_factory.mktemp("warm") / "sleeper.py"
    script.write_text(SLEEPER)
    w = WarmLauncher()
    w.start()
    yield w, str(script)
    w.close()


def launch(launcher, seconds: float, code: int, cwd: str = "/tmp", direct: bool = False, gang: dict | None = None):
    w, script = launcher
    read, write = os.pipe()
    env = {k: v for k, v in w.env.items() if k != "PYTHONSAFEPATH"}
    env["MINIHPC_RESULT_FILE"] = os.path.join(os.path.dirname(script), "result.json")
    args = ["--standalone", "--nproc-per-node=1", "--max-restarts=0", "--monitor-interval=0.02", "--module",
            "minihpc.node.rank", script, str(seconds), str(code)]
    try:
        gang = gang or {"GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "MASTER_PORT": str(free_port())}
        proc = w.launch(args, dict(env, RANK="5", MASTER_ADDR="127.0.0.1", **gang) if direct else env, cwd, None, write,
                        rank=[script, str(seconds), str(code)] if direct else None)
    finally:
        os.close(write)
    return proc, read


@pytest.mark.parametrize("direct", [False, True], ids=["torchrun", "the rank itself"])
def test_a_warm_job_s_exit_code_and_signal_are_the_real_ones(launcher, direct):
    proc, out = launch(launcher, 0, 7, direct=direct)
    assert proc.wait(timeout=60) == 7
    assert (b"up 5 False" if direct else b"up 0 False") in os.read(out, 65536)  # the launcher's file: not the job's
    os.close(out)
    proc, out = launch(launcher, 60, 0, direct=direct)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    assert proc.poll() is None and psutil.pid_exists(proc.pid)
    if direct:
        assert psutil.Process(proc.pid).children() == []  # the rank itself: no torchrun above it
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    os.close(out)


def test_a_warm_job_is_dated_when_it_ended_not_when_a_busy_agent_read_its_status(launcher):
    # A killed rank's peers fail a moment after it; the job's cause is the failure seen first.
    proc, out = launch(launcher, 60, 0, direct=True)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    killed = time.time()
    proc.kill()
    time.sleep(1.0)  # the agent busy elsewhere
    read = time.time()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert killed <= proc.ended_at < read - 0.5, (killed, proc.ended_at, read)
    os.close(out)


def test_a_rank_run_without_torchrun_waits_for_its_gang_and_node_0_for_the_others_to_end(launcher):
    port = str(free_port())
    first, out0 = launch(launcher, 0, 0, direct=True, gang={"GROUP_RANK": "0", "GROUP_WORLD_SIZE": "2", "MASTER_PORT": port})
    with pytest.raises(subprocess.TimeoutExpired):  # node 1 has not started: no code runs
        first.wait(timeout=1.0)
    second, out1 = launch(launcher, 3, 0, direct=True, gang={"GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_PORT": port})
    with pytest.raises(subprocess.TimeoutExpired):  # node 0 hosts the job's store: it ends after node 1
        first.wait(timeout=1.5)
    assert (second.wait(timeout=60), first.wait(timeout=60)) == (0, 0)
    assert b"up 5" in os.read(out0, 65536) and b"up 5" in os.read(out1, 65536)
    os.close(out0)
    os.close(out1)


def test_a_bad_working_directory_fails_the_launch_as_popen_would(launcher):
    with pytest.raises(FileNotFoundError, match="/no/such/dir"):
        launch(launcher, 0, 0, cwd="/no/such/dir")


def test_a_launcher_that_dies_loses_only_the_status_and_is_replaced(launcher):
    w, _ = launcher
    proc, out = launch(launcher, 1, 0)
    old = w.proc.pid
    os.kill(old, signal.SIGKILL)
    assert proc.wait(timeout=60) == LOST  # the job ran on; how it ended nobody could read
    os.close(out)
    proc, out = launch(launcher, 0, 5)  # a new launcher took over
    assert w.proc.pid != old and proc.wait(timeout=60) == 5
    os.close(out)


@pytest.mark.parametrize("asked", [True, False], ids=["ready", "not yet asked whether ready"])
def test_a_launcher_that_dies_under_the_request_is_replaced_and_the_rank_runs_warm(launcher, monkeypatch, asked):
    """Killed just after the look that found it running, the launcher takes no request: another
    one forks the rank, as every other node's launcher does (a cold start would be torchrun,
    whose rendezvous their warm ranks never meet)."""
    w, _ = launcher
    if asked:
        proc, out = launch(launcher, 0, 0)
        assert proc.wait(timeout=60) == 0
        os.close(out)
    else:
        w.close()
        w.start()  # importing: nobody has read its "ready" yet
    old = w.proc
    os.kill(old.pid, signal.SIGKILL)
    wait_until(lambda: psutil.Process(old.pid).status() == psutil.STATUS_ZOMBIE, timeout=10, message="the launcher dead")
    looks = [lambda: None]  # the first look misses the death, as one just before it does
    real = w._restart_if_gone
    monkeypatch.setattr(w, "_restart_if_gone", lambda: (looks.pop() if looks else real)())
    proc, out = launch(launcher, 0, 6, direct=True)
    assert w.proc is not old and w.proc.poll() is None
    assert proc.wait(timeout=60) == 6 and os.read(out, 100).startswith(b"up 5")
    os.close(out)


def test_a_launcher_killed_before_it_read_the_request_is_dead_not_a_failed_launch():
    """Killed with the job's request unread (an integration run found it), the launcher leaves a
    reset, not an end of file: it is found dead (and replaced), not a launch that failed."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.send(b'{"argv": []}')  # the request, never read
    theirs.close()  # the launcher's end, closed by its death
    with pytest.raises(Died, match="ended before the job started"):
        WarmProcess.started(ours, ["torchrun"])


def test_a_launcher_that_cannot_start_sends_jobs_cold(tmp_path):
    w = WarmLauncher({"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path)})
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('broken torch')\n")
    w.start()
    try:
        with pytest.raises(Unavailable, match="not ready .*broken torch"):
            w.launch([], {}, "/tmp", None, sys.stdout.fileno())
    finally:
        w.close()


def test_a_module_the_job_brings_itself_is_not_taken_from_the_launcher():
    assert shadowed({"numpy", "torch"}, {"/work": {"train", "numpy"}}) == (
        "/work has its own numpy, which the warm launcher has imported already (a new interpreter imports the job's)")
    assert shadowed({"numpy", "torch"}, {"/work": {"train", "models"}}) is None


def test_a_job_whose_folder_has_its_own_numpy_starts_cold(launcher, tmp_path):
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "__init__.py").write_text("raise ImportError('the job would get this one')\n")
    with pytest.raises(Unavailable, match=r"has its own numpy"):
        launch(launcher, 0, 0, cwd=str(tmp_path))
    (tmp_path / "numpy" / "__init__.py").unlink()  # a namespace folder is no package: it shadows nothing
    proc, out = launch(launcher, 0, 4, cwd=str(tmp_path))
    assert proc.wait(timeout=60) == 4
    os.close(out)


def test_the_launcher_s_own_pythonpath_in_a_job_s_shadows_nothing(tmp_path):
    # As on Ansible hosts: PYTHONPATH=/opt/minihpc/src in the agent's environment, and so in each job's.
    src = os.path.dirname(os.path.dirname(os.path.abspath(__import__("minihpc").__file__)))
    w = WarmLauncher(dict(os.environ, PYTHONPATH=src))
    w.start()
    try:
        (tmp_path / "sleeper.py").write_text(SLEEPER)
        proc, out = launch((w, str(tmp_path / "sleeper.py")), 0, 6)
        assert proc.wait(timeout=60) == 6
        os.close(out)
    finally:
        w.close()
