"""Jobs through the whole engine: submit, gang launch with torchrun, results, logs."""

import json
import signal
import time

import psutil
import pytest

from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration


def test_three_node_ddp_job_all_reduces_across_three_nodes(idle_cluster, tmp_path):
    report = tmp_path / "report.json"
    job_id = idle_cluster.submit("-N", 3, JOBS / "allreduce.py", report)
    job = idle_cluster.wait(job_id)
    assert job["state"] == "COMPLETED", job
    assert job["exit_code"] == 0
    assert sorted(job["nodes"]) == ["master-node", "worker-node-1", "worker-node-2"]
    ranks = json.loads(report.read_text())
    assert [r["sum"] for r in ranks] == [6.0, 6.0, 6.0]
    assert sorted(r["node"] for r in ranks) == sorted(job["nodes"])
    assert [r["slurm_procid"] for r in ranks] == ["0", "1", "2"]
    assert {r["slurm_ntasks"] for r in ranks} == {"3"}
    assert {r["nodelist"] for r in ranks} == {"master-node,worker-node-[1-2]"}
    assert {r["job_id"] for r in ranks} == {str(job_id)}
    assert job["started_at"] >= job["submitted_at"] and job["ended_at"] >= job["started_at"]

    logs = idle_cluster.cli("logs", job_id).stdout
    for node in job["nodes"]:
        assert f"==> {node} <==" in logs
    assert "sum=6.0 expected=6.0" in logs
    one = idle_cluster.cli("logs", job_id, "--node", "worker-node-2").stdout
    assert "==>" not in one
    assert f"job {job_id} attempt 1 on worker-node-2" in one
    assert "on master-node" not in one and "on worker-node-1" not in one

    rows = [line.split() for line in idle_cluster.cli("history").stdout.splitlines()]
    assert rows[0][:5] == ["JOBID", "JOBNAME", "USER", "STATE", "EXITCODE"]
    mine = next(r for r in rows[1:] if r[0] == str(job_id))
    assert mine[1] == "allreduce.py" and mine[3:5] == ["COMPLETED", "0:0"]


def test_two_ranks_per_node(idle_cluster, tmp_path):
    report = tmp_path / "report.json"
    job_id = idle_cluster.submit("-N", 2, "--ntasks-per-node", 2, JOBS / "allreduce.py", report)
    job = idle_cluster.wait(job_id)
    assert job["state"] == "COMPLETED", job
    ranks = json.loads(report.read_text())
    assert [r["sum"] for r in ranks] == [10.0] * 4
    assert len({r["node"] for r in ranks}) == 2


def test_failing_rank_fails_the_job_with_its_exit_code_and_stops_the_others(idle_cluster, tmp_path):
    job_id = idle_cluster.submit("-N", 3, JOBS / "fail_rank.py", 2, 3, tmp_path)
    job = idle_cluster.wait(job_id, timeout=60)
    assert job["state"] == "FAILED"
    assert job["exit_code"] == 3
    assert job["signal"] is None
    assert job["failed_node"] == job["nodes"][2]
    for pid_file in tmp_path.glob("rank*.pid"):
        pid = int(pid_file.read_text())
        wait_until(lambda: not psutil.pid_exists(pid), timeout=10, message=f"rank pid {pid} to exit")
    shown = idle_cluster.cli("show", job_id).stdout
    assert "ExitCode = 3:0" in shown


def test_rank_killed_by_signal_is_reported_as_that_signal(idle_cluster, tmp_path):
    job_id = idle_cluster.submit("-N", 2, JOBS / "fail_rank.py", 1, "SIGKILL", tmp_path)
    job = idle_cluster.wait(job_id, timeout=60)
    assert job["state"] == "FAILED"
    assert (job["exit_code"], job["signal"]) == (128 + signal.SIGKILL, "SIGKILL")


def test_cancel_removes_every_rank_within_five_seconds(idle_cluster, tmp_path):
    job_id = idle_cluster.submit("-N", 3, JOBS / "sleeper.py", tmp_path, 300)
    wait_until(lambda: len(list(tmp_path.glob("rank*.pid"))) == 3, timeout=60, message="3 ranks running")
    pids = [int(p.read_text()) for p in tmp_path.glob("rank*.pid")]
    assert all(psutil.pid_exists(p) for p in pids)
    started = time.time()
    out = idle_cluster.cli("cancel", job_id).stdout
    assert f"Cancelled job {job_id}" in out
    wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), timeout=5, message="ranks gone")
    assert time.time() - started < 5
    job = idle_cluster.show(job_id)
    assert job["state"] == "CANCELLED"
    wait_until(lambda: all(n["state"] == "idle" for n in idle_cluster.nodes()), timeout=10, message="nodes idle")


def test_cancel_pending_job(idle_cluster, tmp_path):
    gate = tmp_path / "open"
    blocker = idle_cluster.submit("-N", 3, JOBS / "gate.py", gate)
    waiting = idle_cluster.submit("-N", 1, JOBS / "gate.py", gate)
    wait_until(lambda: idle_cluster.show(blocker)["state"] == "RUNNING", timeout=30, message="blocker running")
    assert idle_cluster.show(waiting)["state"] == "PENDING"
    idle_cluster.cli("cancel", waiting)
    gate.touch()
    assert idle_cluster.wait(blocker)["state"] == "COMPLETED"
    job = idle_cluster.show(waiting)
    assert job["state"] == "CANCELLED" and job["attempts"] == 0 and job["nodes"] == []


def test_time_limit_ends_the_job_as_timeout(idle_cluster, tmp_path):
    job_id = idle_cluster.submit("-N", 2, "-t", "0:02", JOBS / "sleeper.py", tmp_path, 300)
    job = idle_cluster.wait(job_id, timeout=60)
    assert job["state"] == "TIMEOUT"
    assert job["reason"] == "TimeLimit"
    assert 2.0 <= job["ended_at"] - job["started_at"] < 10
    pids = [int(p.read_text()) for p in tmp_path.glob("rank*.pid")]
    wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), timeout=10, message="ranks gone")
    assert idle_cluster.cli("wait", job_id, check=False).returncode == 1


def test_dependency_runs_after_success_and_is_cancelled_after_failure(idle_cluster, tmp_path):
    order, gate = tmp_path / "order.txt", tmp_path / "open"
    # The first job runs until the test opens its gate: the second waits on it however slowly
    # a busy machine runs this test.
    first = idle_cluster.submit(JOBS / "record_start.py", order, gate)
    second = idle_cluster.submit("-d", f"afterok:{first}", JOBS / "record_start.py", order)
    assert idle_cluster.show(second)["state"] == "PENDING"
    failing = idle_cluster.submit(JOBS / "fail_rank.py", 0, 4, tmp_path / "f")
    never = idle_cluster.submit("--dependency", f"afterok:{failing}", JOBS / "record_start.py", order)
    assert idle_cluster.show(second)["state"] == "PENDING"
    gate.touch()
    assert idle_cluster.wait(second)["state"] == "COMPLETED"
    started = [int(line.split()[0]) for line in order.read_text().splitlines()]
    assert started == [first, second]
    assert idle_cluster.show(first)["ended_at"] <= idle_cluster.show(second)["started_at"]
    job = idle_cluster.wait(never)
    assert job["state"] == "CANCELLED"
    assert job["reason"] == "DependencyNeverSatisfied"


def test_priority_order_under_contention(idle_cluster, tmp_path):
    gate, order = tmp_path / "open", tmp_path / "order.txt"
    blocker = idle_cluster.submit("-N", 3, JOBS / "gate.py", gate)
    wait_until(lambda: idle_cluster.show(blocker)["state"] == "RUNNING", timeout=30, message="blocker running")
    low = idle_cluster.submit("-N", 3, "--priority", "low", JOBS / "record_start.py", order)
    normal = idle_cluster.submit("-N", 3, JOBS / "record_start.py", order)
    high = idle_cluster.submit("-N", 3, "--priority", "high", JOBS / "record_start.py", order)
    high2 = idle_cluster.submit("-N", 3, "--priority", "high", JOBS / "record_start.py", order)
    queue = idle_cluster.cli("queue").stdout.splitlines()
    assert [line.split()[0] for line in queue[2:]] == [str(high), str(high2), str(normal), str(low)]
    assert "(Resources)" in queue[2] and "(Priority)" in queue[-1]
    gate.touch()
    for job_id in (high, high2, normal, low):
        assert idle_cluster.wait(job_id)["state"] == "COMPLETED"
    started = [int(line.split()[0]) for line in order.read_text().splitlines()]
    assert started == [high, high2, normal, low]


def test_competing_gang_jobs_never_deadlock_or_split(idle_cluster, tmp_path):
    reports = [tmp_path / f"r{i}.json" for i in range(4)]
    ids = [idle_cluster.submit("-N", 2, JOBS / "allreduce.py", r) for r in reports]
    jobs = [idle_cluster.wait(i, timeout=120) for i in ids]
    assert [j["state"] for j in jobs] == ["COMPLETED"] * 4
    for job, report in zip(jobs, reports):
        ranks = json.loads(report.read_text())
        assert sorted(r["node"] for r in ranks) == sorted(job["nodes"])
    # Never more nodes in use than exist: jobs that overlapped in time used disjoint nodes.
    for a in jobs:
        for b in jobs:
            if a["id"] < b["id"] and a["started_at"] < b["ended_at"] and b["started_at"] < a["ended_at"]:
                assert not set(a["nodes"]) & set(b["nodes"])


def test_script_is_spooled_at_submit_and_header_options_apply(idle_cluster, tmp_path):
    gate = tmp_path / "open"
    blocker = idle_cluster.submit("-N", 3, JOBS / "gate.py", gate)
    script = tmp_path / "job.py"
    script.write_text("#MINIHPC --nodes 2\n#MINIHPC -J spooled\nprint('original version')\n")
    job_id = idle_cluster.submit(script)
    script.write_text("print('edited after submit')\n")
    gate.touch()
    job = idle_cluster.wait(job_id)
    assert job["state"] == "COMPLETED"
    assert job["name"] == "spooled" and len(job["nodes"]) == 2
    logs = idle_cluster.cli("logs", job_id).stdout
    assert logs.count("original version") == 2 and "edited" not in logs
    idle_cluster.wait(blocker)


def test_logs_follow_streams_until_the_job_ends(idle_cluster, tmp_path):
    script = tmp_path / "talk.py"
    script.write_text(
        "import time\nfor i in range(5):\n    print(f'line {i}', flush=True)\n    time.sleep(0.3)\n"
    )
    job_id = idle_cluster.submit("-N", 2, script)
    out = idle_cluster.cli("logs", job_id, "--follow", timeout=60).stdout
    job = idle_cluster.show(job_id)
    assert job["state"] == "COMPLETED" and len(job["nodes"]) == 2
    for node in job["nodes"]:
        assert [f"{node}: line {i}" in out for i in range(5)] == [True] * 5


def test_a_daemon_a_job_detaches_ends_with_its_rank_and_the_job_completes(idle_cluster, tmp_path):
    """Slurm ends what a task leaves running; so does a rank here (it is its children's
    subreaper). Without that, the daemon would also hold torchrun's pipes and the job never end."""
    pid_file = tmp_path / "daemon.pid"
    job_id = idle_cluster.submit(JOBS / "leave_daemon.py", pid_file)
    job = idle_cluster.wait(job_id, timeout=60)
    assert job["state"] == "COMPLETED", job
    pid = int(pid_file.read_text())
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
               timeout=5, message=f"daemon {pid} gone")
    logs = idle_cluster.cli("logs", job_id).stdout
    assert "1 process(es) the script left running were ended with its rank" in logs, logs
