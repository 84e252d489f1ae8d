"""Job arrays (sbatch --array) on the real local cluster: one job per index with the SLURM_ARRAY_*
variables, squeue's collapsed row for the pending tasks, scancel of one task and of the whole
array, and a dependency on the whole array; and the Redis records an array leaves."""

import time

import pytest

from tests.conftest import wait_until

pytestmark = pytest.mark.integration

VARIABLES = ("SLURM_JOB_ID SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT "
             "SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_MAX SLURM_ARRAY_TASK_STEP").split()


def _script(path, body: str):
    path.write_text("#!/bin/bash\n" + body)
    return path


def _rows(cluster, *args) -> list[list[str]]:
    out = cluster.cli(*args).stdout
    return [line.split("|") if "|" in line else line.split() for line in out.splitlines() if line.strip()]


def test_array_tasks_see_their_index_and_afterok_waits_for_all(idle_cluster, tmp_path):
    """sbatch(1) --array=1-7:2 (an #SBATCH line): one job per index, the last one's id the
    array's ("Submitted batch job A"; the others A+1... as real Slurm numbers them), each with SLURM_ARRAY_JOB_ID, _TASK_ID, _COUNT, _MIN,
    _MAX, _STEP; sacct(1) -j A lists its tasks as A_i; --dependency=afterok:A starts only after
    every task completed."""
    names = " ".join(f"${v}" for v in VARIABLES)
    tasks = _script(tmp_path / "tasks.sh", f'#SBATCH --array=1-7:2\necho "{names}" > "$1/task-$SLURM_ARRAY_TASK_ID"\n'
                                           "sleep 1\n")
    after = _script(tmp_path / "after.sh", 'ls "$1" | grep -c ^task- > "$1/seen"\n')
    array = int(idle_cluster.cli("submit", tasks, tmp_path).stdout.split()[-1])
    follow = idle_cluster.submit("-d", f"afterok:{array}", after, tmp_path)
    assert idle_cluster.cli("wait", array, "--timeout", 90, timeout=120).returncode == 0
    assert idle_cluster.wait(follow)["state"] == "COMPLETED"
    for own, index in zip([array + 1, array + 2, array + 3, array], [1, 3, 5, 7]):
        values = (tmp_path / f"task-{index}").read_text().split()
        assert values == [str(own), str(array), str(index), "4", "1", "7", "2"]
    assert (tmp_path / "seen").read_text().strip() == "4"
    rows = _rows(idle_cluster, "history", "-j", array, "-o", "JobID,JobIDRaw,State", "-P", "-n")
    assert sorted(rows) == sorted([[f"{array}_{i}", str(own), "COMPLETED"]
                                   for own, i in zip([array + 1, array + 2, array + 3, array], [1, 3, 5, 7])])
    ended = max(idle_cluster.show(f"{array}_{i}")["ended_at"] for i in (1, 3, 5, 7))
    assert idle_cluster.show(follow)["started_at"] >= ended


def test_pending_tasks_show_as_one_row_and_cancel_reaches_one_or_all(idle_cluster, tmp_path):
    """squeue(1): an array's pending tasks show as one row "A_[0-5]" (%i), a running one as
    "A_i"; scancel(1) "JOB_ID[_ARRAY_ID]": A_2 cancels that task alone, A every task left;
    scontrol show job A shows every task (ArrayJobId=, ArrayTaskId=)."""
    blocker = idle_cluster.submit("--wrap", "sleep 300")
    wait_until(lambda: idle_cluster.show(blocker)["state"] == "RUNNING", timeout=30, message="blocker running")
    array = int(idle_cluster.cli("submit", "--array=0-5", "-d", f"afterok:{blocker}", "--wrap", "true")
                .stdout.split()[-1])
    wait_until(lambda: idle_cluster.show(f"{array}_5")["reason"] == "Dependency", timeout=30, message="tasks waiting")
    queue = _rows(idle_cluster, "queue", "-o", "%i %t %r", "--noheader")
    assert [f"{array}_[0-5]", "PD", "Dependency"] in queue and len(queue) == 2
    shown = idle_cluster.cli("scontrol", "show", "job", array).stdout
    assert shown.count(f"ArrayJobId={array} ") == 6 and f"JobId={array} ArrayJobId={array} ArrayTaskId=5" in shown
    assert f"JobId={array + 1} ArrayJobId={array} ArrayTaskId=0" in shown

    assert idle_cluster.cli("cancel", f"{array}_2").stdout.strip() == f"Cancelled job {array}_2"
    assert idle_cluster.show(f"{array}_2")["state"] == "CANCELLED"
    assert [f"{array}_[0-1,3-5]", "PD"] in _rows(idle_cluster, "queue", "-j", array, "-o", "%i %t", "--noheader")

    idle_cluster.cli("cancel", array)
    rows = _rows(idle_cluster, "history", "-j", array, "-o", "JobID,State", "-P", "-n")
    assert sorted(rows) == [[f"{array}_{i}", "CANCELLED"] for i in range(6)]
    assert _rows(idle_cluster, "queue", "-j", array, "--noheader") == []
    idle_cluster.cli("cancel", blocker)


def test_an_array_is_recorded_whole_and_forgotten_task_by_task(store, tmp_path):
    """sbatch(1) --array: N tasks take N job ids in a row (one INCRBY, never interleaved with
    another submit); the array's index of tasks follows each task that is forgotten."""
    from minihpc.core.models import Job
    store.next_job_id()
    first = store.reserve_job_ids(3)
    assert first == 2 and store.next_job_id() == 5
    jobs = [Job(first + k, "a", "u", "s", "s", "x", submitted_at=time.time(), array_job_id=first,
                array_task_id=index, array_spec="0,4,8") for k, index in enumerate((0, 4, 8))]
    store.add_jobs(jobs)
    assert store.array_tasks(first) == {0: 2, 4: 3, 8: 4}
    assert store.expand_refs([first, f"{first}_4", f"{first}_5", 9]) == {first: [2, 3, 4], f"{first}_4": [3],
                                                                       f"{first}_5": [], 9: [9]}
    from minihpc.core.models import JobState
    for job_id in (2, 3, 4):
        store.transition(job_id, JobState.CANCELLED, "test", only_from=[JobState.PENDING])
    assert store.dependency_states([first, f"{first}_8"]) == {first: JobState.CANCELLED,
                                                              f"{first}_8": JobState.CANCELLED}
    # States the caller already holds (the master's pending and running jobs) are taken as
    # given, not read again; the others are read.
    assert store.dependency_states([first, f"{first}_8"], {4: JobState.PENDING}) == {
        first: JobState.PENDING, f"{first}_8": JobState.PENDING}
    assert store.dependency_states([first], {2: JobState.COMPLETED, 3: JobState.COMPLETED}) == {
        first: JobState.CANCELLED}
    assert store.forget_ended(2)
    assert store.array_tasks(first) == {4: 3, 8: 4}
    store.delete_job(store.get_job(3))
    assert store.forget_ended(4) and store.array_tasks(first) == {}


def test_a_throttled_array_never_runs_more_than_its_limit(idle_cluster, tmp_path):
    """sbatch(1) --array: "A maximum number of simultaneously running tasks from the job array
    may be specified using a "%" separator ... --array=0-15%4 will limit the number of
    simultaneously running tasks from this job array to 4". Eight tasks with %2 on three idle
    nodes: each records when it ran; at no moment were more than two running, and two were
    (the limit is a ceiling, not a queue of one)."""
    tasks = _script(tmp_path / "throttled.sh",
                    'date +%s.%N > "$1/start-$SLURM_ARRAY_TASK_ID"\nsleep 1.5\ndate +%s.%N > "$1/end-$SLURM_ARRAY_TASK_ID"\n')
    array = idle_cluster.submit("--array=0-7%2", tasks, tmp_path)
    wait_until(lambda: "JobArrayTaskLimit" in idle_cluster.cli("queue", "--noheader", "-o", "%i %r").stdout, timeout=30,
               message="the array's waiting tasks with reason JobArrayTaskLimit")
    assert idle_cluster.cli("wait", array, "--timeout", 120, timeout=150).returncode == 0
    spans = [(float((tmp_path / f"start-{i}").read_text()), float((tmp_path / f"end-{i}").read_text()))
             for i in range(8)]
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 2, f"at most {most} tasks ran at once: {sorted(spans)}"
