"""sbatch's dependency kinds beyond afterok on the real local cluster: afternotok, afterany and
singleton decided by the master, shown by squeue and scontrol."""

from tests.conftest import wait_until
from tests.integration.conftest import JOBS


def _started(order) -> list[int]:
    return [int(line.split()[0]) for line in order.read_text().splitlines()] if order.exists() else []


def _waits_on_dependency(cluster, job_id) -> bool:
    job = cluster.show(job_id)
    return job["state"] == "PENDING" and job["reason"] == "Dependency"


def test_afternotok_runs_after_a_failure_and_is_cancelled_after_a_success(idle_cluster, tmp_path):
    """man sbatch: afternotok -- "after the specified jobs have terminated in some failed state
    (non-zero exit code, node failure, timed out, etc)"; a success can never satisfy it."""
    order = tmp_path / "order.txt"
    failing = idle_cluster.submit(JOBS / "fail_rank.py", 0, 4, tmp_path / "f")
    rescue = idle_cluster.submit("-d", f"afternotok:{failing}", JOBS / "record_start.py", order)
    succeeding = idle_cluster.submit(JOBS / "record_start.py", tmp_path / "ok.txt")
    never = idle_cluster.submit("-d", f"afternotok:{succeeding}", JOBS / "record_start.py", order)
    assert "Dependency=afternotok:" + str(failing) in idle_cluster.cli("scontrol", "show", "job", rescue).stdout
    assert idle_cluster.wait(rescue)["state"] == "COMPLETED"
    assert idle_cluster.show(failing)["state"] == "FAILED"
    assert idle_cluster.show(failing)["ended_at"] <= idle_cluster.show(rescue)["started_at"]
    job = idle_cluster.wait(never)
    assert (job["state"], job["reason"], job["attempts"]) == ("CANCELLED", "DependencyNeverSatisfied", 0)
    assert _started(order) == [rescue]


def test_afterany_runs_after_a_cancelled_job(idle_cluster, tmp_path):
    """man sbatch: afterany -- "after the specified jobs have terminated", cancelled included;
    it waits (reason Dependency) while the job runs."""
    gate, order = tmp_path / "never-opened", tmp_path / "order.txt"
    blocker = idle_cluster.submit(JOBS / "gate.py", gate)
    wait_until(lambda: idle_cluster.show(blocker)["state"] == "RUNNING", timeout=30, message="blocker running")
    after = idle_cluster.submit("-d", f"afterany:{blocker}", JOBS / "record_start.py", order)
    wait_until(lambda: _waits_on_dependency(idle_cluster, after), timeout=30, message="afterany job waiting")
    row = idle_cluster.cli("queue", "-j", after, "-o", "%i %E", "--noheader").stdout.split()
    assert row == [str(after), f"afterany:{blocker}"]
    idle_cluster.cli("cancel", blocker)
    assert idle_cluster.wait(after)["state"] == "COMPLETED"
    assert idle_cluster.show(blocker)["state"] == "CANCELLED"
    assert _started(order) == [after]


def test_singleton_serialises_two_same_named_jobs(idle_cluster, tmp_path):
    """man sbatch: singleton -- "only one job by that name and owned by that user can be running
    ... at any point in time": with nodes free for both, the second waits for the first to end."""
    gate, order = tmp_path / "open", tmp_path / "order.txt"
    first = idle_cluster.submit("-J", "solo", "-d", "singleton", JOBS / "gate.py", gate)
    second = idle_cluster.submit("-J", "solo", "-d", "singleton", JOBS / "record_start.py", order)
    wait_until(lambda: idle_cluster.show(first)["state"] == "RUNNING", timeout=30, message="first running")
    wait_until(lambda: _waits_on_dependency(idle_cluster, second), timeout=30, message="second waiting")
    assert any(n["state"] == "idle" for n in idle_cluster.nodes())  # it waits on its name, not on nodes
    assert not _started(order)
    gate.touch()
    assert idle_cluster.wait(second)["state"] == "COMPLETED"
    assert idle_cluster.show(first)["ended_at"] <= idle_cluster.show(second)["started_at"]
