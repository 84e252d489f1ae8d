"""Job arrays (sbatch --array) as pure functions: job ids as users type them, an array's state
for a dependency, its pending tasks collapsed into one squeue row, and sacct's JobID."""

import pytest

from minihpc.core import dependency
from minihpc.core.arrays import (
    JobRef,
    array_state,
    collapse_pending,
    format_indexes,
    parse_job_ref,
    parse_job_refs,
)
from minihpc.core.errors import UsageError
from minihpc.core.models import Job, JobState
from minihpc.core.slurm_formats import View, parse_sacct_fields, parse_squeue_format, sacct_lines, squeue_lines

PD, R, CD, F, CA = JobState.PENDING, JobState.RUNNING, JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED


def task(job_id, array=None, index=None, state=PD, reason="Priority", limit=0):
    return Job(job_id, "arr", "u", "s", "s", "x", state=state, reason=reason, submitted_at=1.0,
               array_job_id=array, array_task_id=index, array_spec="0-9" if array else "", array_limit=limit)


def array(first=12, indexes=range(4), states=None, reason="Priority", limit=0):
    states = states or [PD] * len(indexes)
    return [task(first + k, first, i, s, reason if s is PD else "None", limit)
            for k, (i, s) in enumerate(zip(indexes, states))]


def test_job_ids_as_typed():
    """squeue(1) -j: "<base_job_id>_<index>" names one array task; scancel(1): "JOB_ID[_ARRAY_ID]",
    and the array's own id alone names every task; Slurm also takes "12_[1-3,5]"."""
    assert parse_job_ref("12") == JobRef(12)
    assert parse_job_ref("12_3") == JobRef(12, (3,))
    assert parse_job_ref("12_[1-3,5]") == JobRef(12, (1, 2, 3, 5))
    assert parse_job_refs("12,13_2,14_[1-3,7],12") == [JobRef(12), JobRef(13, (2,)), JobRef(14, (1, 2, 3, 7))]
    assert [str(r) for r in parse_job_refs("12,13_2,14_[1-3,7]")] == ["12", "13_2", "14_[1-3,7]"]


@pytest.mark.parametrize("bad", ["x", "0", "12_", "12_x", "12.0", "12_[1-3%2]", "12_[3-1]", "-1"])
def test_malformed_job_ids_are_refused(bad):
    """A step (12.0) or anything that is neither ID, ID_INDEX nor ID_[INDEXES] is one UsageError."""
    with pytest.raises(UsageError, match="invalid job id"):
        parse_job_refs(bad, "--jobs")


def test_indexes_as_squeue_shows_them():
    """squeue(1) shows an array's pending tasks as "<base_job_id>_[<indexes>]", ranges a-b,
    and "%N" for a throttled array (sbatch --array=0-15%4)."""
    assert format_indexes([4, 5, 6, 7]) == "4-7"
    assert format_indexes((1, 3, 5, 6, 7)) == "1,3,5-7"
    assert format_indexes([4, 5, 6], limit=4) == "4-6%4"


def test_array_state_for_a_dependency():
    """sbatch(1) --dependency on an array's id is on the whole array: afterok once every task
    completed, afternotok once all ended and one failed, after once none is pending."""
    assert array_state([CD, R, PD]) is PD
    assert array_state([CD, R, CD]) is R
    assert array_state([CD, CD]) is CD
    assert array_state([CD, F, CA]) is F
    assert array_state([None, CD]) is CD and array_state([None]) is None and array_state([]) is None
    job = Job(99, "n", "u", "s", "s", "x", dependency=dependency.parse("afterok:12"))
    assert dependency.status(job, {12: array_state([CD, R])}) == dependency.WAITING
    assert dependency.status(job, {12: array_state([CD, CD])}) is None
    assert dependency.status(job, {12: array_state([CD, F])}) == dependency.NEVER
    notok = Job(98, "n", "u", "s", "s", "x", dependency=dependency.parse("afternotok:12"))
    assert dependency.status(notok, {12: array_state([F, R])}) == dependency.WAITING
    assert dependency.status(notok, {12: array_state([F, CD])}) is None


def test_a_dependency_on_one_array_task():
    """sbatch(1) --dependency=afterok:<jobid>_<taskid>: one task of the array; stored and shown
    as typed, its state looked up by that name."""
    stored = dependency.parse("afterok:12_3:13,afterany:12_0")
    assert stored == ["afterok:12_3", "afterok:13", "afterany:12_0"]
    assert dependency.refs(stored) == ["12_3", 13, "12_0"] and dependency.job_ids(stored) == [12, 13, 12]
    assert dependency.to_text(stored) == "afterok:12_3:13,afterany:12_0"
    job = Job(99, "n", "u", "s", "s", "x", dependency=stored)
    assert dependency.status(job, {"12_3": CD, 13: CD, "12_0": F}) is None
    assert dependency.status(job, {"12_3": F, 13: CD, "12_0": F}) == dependency.NEVER
    with pytest.raises(UsageError):
        dependency.parse("afterok:12_")


def test_pending_tasks_collapse_into_one_row():
    """squeue(1): an array's pending tasks waiting alike show as one row "12_[1-3]"; a running or
    ended task as "12_0"; %A is each task's own job id, %F the array's, %K the index."""
    jobs = array(states=[R, PD, PD, PD]) + [task(20)]
    kept, names = collapse_pending(jobs)
    assert [j.id for j in kept] == [12, 13, 20] and names == {13: "12_[1-3]"}
    jobs[0].nodes = ["n1"]
    prefix, columns = parse_squeue_format("%i %A %F %K %t")
    lines = squeue_lines(prefix, columns, jobs, View(0.0), header=False)
    assert lines == ["12_0 12 12 0 R", "12_[1-3] 13 12 1-3 PD", "20 20 20 N/A PD"]


def test_a_throttled_array_shows_its_limit_and_tasks_held_apart_keep_their_rows():
    """squeue(1) shows a throttled array's pending tasks as "12_[2-3%2]" (sbatch --array=...%2);
    tasks that wait for another reason (a hold) are a row of their own."""
    jobs = array(states=[R, R, PD, PD], reason="JobArrayTaskLimit", limit=2) + [task(16, 12, 4, PD, "JobHeldUser", 2)]
    kept, names = collapse_pending(jobs)
    assert names == {14: "12_[2-3%2]"} and [j.id for j in kept] == [12, 13, 14, 16]
    assert kept[-1].array_name == "12_4" and 16 not in names


def test_sacct_job_id_of_an_array_task():
    """sacct(1) JobID: "<jobid>_<index>" for an array task; JobIDRaw the task's own job id."""
    jobs = array(indexes=[5, 7], states=[CD, F])
    lines = sacct_lines(parse_sacct_fields("JobID,JobIDRaw"), jobs, 0.0, header=False, parsable="P")
    assert lines == ["12_5|12", "12_7|13"]


def test_an_arrays_tasks_queue_in_index_order_and_show_no_variable_values():
    """sbatch(1) --array: tasks start from the lowest index, though the last index holds the
    array's own (lowest) job id; a job's --export values never appear in its public JSON."""
    from minihpc.core.models import Job
    from minihpc.core.scheduler import queue_order_key

    tasks = [Job(id=12 if i == 3 else 13 + i, name="a", user="u", script="s", script_source="s", script_sha256="x",
                 submitted_at=1.0, array_job_id=12, array_task_id=i, environment={"TOKEN": "secret"})
             for i in range(4)]
    assert [t.array_task_id for t in sorted(tasks, key=queue_order_key)] == [0, 1, 2, 3]
    assert tasks[0].to_json()["environment"] == ["TOKEN"]
