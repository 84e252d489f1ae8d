"""sbatch's --dependency kinds (minihpc.core.dependency): parsing, the stored form (old records
too), display, and when each kind lets a job start, waits, or can never be satisfied."""

import json

import pytest

from minihpc.core import dependency
from minihpc.core.dependency import NEVER, WAITING
from minihpc.core.errors import UsageError
from minihpc.core.models import Job, JobState, NodeStatus
from minihpc.core.scheduler import plan

ENDED = [JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL]
NOT_OK = [s for s in ENDED if s is not JobState.COMPLETED]


def job(job_id, dep=(), name="train", user="u", state=JobState.PENDING):
    return Job(job_id, name, user, "s", "s", "x", dependency=list(dep), state=state, submitted_at=float(job_id))


def status_on(text, state, dep_id=1):
    """The status of a pending job 10 whose --dependency is ``text`` while job ``dep_id`` is in ``state``."""
    return dependency.status(job(10, dependency.parse(text)), {dep_id: state})


# -- parsing and the stored form ------------------------------------------------------------

def test_every_kind_parses_to_one_stored_term_per_job():
    """man sbatch: "<type:job_id[:job_id][,type:job_id[:job_id]]> ... All dependencies must be
    satisfied if the ',' separator is used"; singleton takes no job id."""
    assert dependency.parse("after:1") == ["after:1"]
    assert dependency.parse("afterany:1:2") == ["afterany:1", "afterany:2"]
    assert dependency.parse("afterok:3:4,afterok:7") == ["afterok:3", "afterok:4", "afterok:7"]
    assert dependency.parse("afternotok:5,singleton") == ["afternotok:5", "singleton"]
    assert dependency.parse(" singleton ") == ["singleton"]
    assert dependency.parse("afterok:3,afterok:3") == ["afterok:3"]


@pytest.mark.parametrize(
    "text,problem",
    [
        ("afterok:1?afterany:2", "'?' (any of) is not supported"),
        ("afterwards:3", "unknown type 'afterwards'"),
        ("aftercorr:3", "aftercorr is not supported"),
        ("expand:3", "expand is not supported"),
        ("after:3+10", "+time delay is not supported"),
        ("afterok", "afterok needs job ids"),
        ("afterok:", "afterok needs job ids"),
        ("afterany:x", "afterany needs job ids"),
        ("afternotok:0", "afternotok needs job ids"),
        ("singleton:3", "singleton takes no job ids"),
        (",", "expected after, afterany, afterok or afternotok"),
        ("", "expected after, afterany, afterok or afternotok"),
    ],
)
def test_bad_dependency_is_one_usage_line_naming_the_problem(text, problem):
    """man sbatch: the dependency list is "of the form <type:job_id[:job_id][,type:job_id[:job_id]]>
    or <type:job_id[:job_id][?type:job_id[:job_id]]>"; what minihpc does not do ('?', after's
    "+time", aftercorr, expand) is refused, never silently ignored."""
    with pytest.raises(UsageError) as exc:
        dependency.parse(text)
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(f"invalid dependency {text!r}: ")
    assert problem in message


def test_every_kind_names_its_jobs_so_they_are_kept_while_pending_jobs_wait():
    """man sbatch: after, afterany, afternotok and afterok each take "job_id[:jobid...]",
    singleton none -- the jobs minihpc keeps (master.retention) and refuses to delete
    (client.jobs.waiting_on) while a pending job names them, whatever the kind."""
    stored = dependency.parse("after:1,afterany:2,afterok:3,afternotok:4,singleton")
    assert dependency.job_ids(stored) == [1, 2, 3, 4]
    assert dependency.job_ids(["singleton"]) == []


def test_display_is_sbatch_text_with_ids_of_one_kind_joined():
    """man sbatch spells a term type:job_id[:job_id]; squeue/scontrol show "(null)" for none."""
    text = "afterok:3:4,afternotok:5,singleton"
    assert dependency.to_text(dependency.parse(text)) == text
    assert dependency.to_text(["after:1", "afterany:2", "after:3"]) == "after:1,afterany:2,after:3"
    assert dependency.to_text([]) == "(null)"


def test_old_records_hold_ints_meaning_afterok():
    """man sbatch: afterok "can begin execution after the specified jobs have successfully
    executed" -- the only kind minihpc stored before, as a JSON list of ids; such records keep
    meaning exactly that."""
    old = job(10)
    old_record = dict(old.to_record(), dependency=json.dumps([5, 6]))
    loaded = Job.from_record(old_record)
    assert dependency.job_ids(loaded.dependency) == [5, 6]
    assert dependency.to_text(loaded.dependency) == "afterok:5:6"
    assert dependency.status(loaded, {5: JobState.COMPLETED, 6: JobState.RUNNING}) == WAITING
    assert dependency.status(loaded, {5: JobState.COMPLETED, 6: JobState.COMPLETED}) is None
    assert dependency.status(loaded, {5: JobState.COMPLETED, 6: JobState.FAILED}) == NEVER
    new = job(11, dependency.parse("afternotok:5,singleton"))
    assert Job.from_record(new.to_record()).dependency == ["afternotok:5", "singleton"]
    assert dependency.job_ids(new.dependency) == [5]


# -- when each kind holds ---------------------------------------------------------------------

def test_after_holds_once_the_job_started_or_was_cancelled():
    """man sbatch: after -- "After the specified jobs start or are cancelled ... this job can
    begin execution"."""
    assert status_on("after:1", JobState.PENDING) == WAITING
    for state in [JobState.RUNNING, *ENDED]:
        assert status_on("after:1", state) is None, state


def test_afterany_holds_once_the_job_ended_in_any_state():
    """man sbatch: afterany -- "This job can begin execution after the specified jobs have
    terminated"."""
    for state in (JobState.PENDING, JobState.RUNNING):
        assert status_on("afterany:1", state) == WAITING
    for state in ENDED:
        assert status_on("afterany:1", state) is None, state


def test_afterok_needs_completed_and_is_never_satisfied_otherwise():
    """man sbatch: afterok -- "after the specified jobs have successfully executed (ran to
    completion with an exit code of zero)"; "Once a job dependency fails due to the termination
    state of a preceding job, the dependent job will never be run"."""
    assert status_on("afterok:1", JobState.RUNNING) == WAITING
    assert status_on("afterok:1", JobState.COMPLETED) is None
    for state in NOT_OK:
        assert status_on("afterok:1", state) == NEVER, state


def test_afternotok_needs_a_failed_end_cancelled_included():
    """man sbatch: afternotok -- "after the specified jobs have terminated in some failed state
    (non-zero exit code, node failure, timed out, etc)"; CANCELLED counts, as in slurmctld,
    which fulfils afternotok for every ended job that is not COMPLETE."""
    for state in (JobState.PENDING, JobState.RUNNING):
        assert status_on("afternotok:1", state) == WAITING
    for state in NOT_OK:
        assert status_on("afternotok:1", state) is None, state
    assert status_on("afternotok:1", JobState.COMPLETED) == NEVER


@pytest.mark.parametrize("kind", ["after", "afterany", "afterok", "afternotok"])
def test_a_job_with_no_record_is_never_satisfied(kind):
    """man sbatch: "the dependent job will never be run" once a dependency cannot hold; a job
    id with no record can never start, end or fail."""
    assert status_on(f"{kind}:1", None) == NEVER


def test_all_terms_must_hold():
    """man sbatch: "All dependencies must be satisfied if the ',' separator is used"."""
    waiting = job(10, dependency.parse("afterok:1,afternotok:2"))
    assert dependency.status(waiting, {1: JobState.COMPLETED, 2: JobState.RUNNING}) == WAITING
    assert dependency.status(waiting, {1: JobState.COMPLETED, 2: JobState.FAILED}) is None
    assert dependency.status(waiting, {1: JobState.RUNNING, 2: JobState.COMPLETED}) == NEVER


def test_singleton_waits_for_running_and_earlier_pending_jobs_of_its_name_and_user():
    """man sbatch: singleton -- "after any previously launched jobs sharing the same job name and
    user have terminated. In other words, only one job by that name and owned by that user can
    be running or suspended at any point in time" (slurmctld: a RUNNING one, or a PENDING one
    with a lower id)."""
    me = job(10, ["singleton"])
    assert dependency.status(me, {}, [me]) is None
    assert dependency.status(me, {}, [job(12, state=JobState.RUNNING)]) == WAITING
    assert dependency.status(me, {}, [job(4, state=JobState.PENDING)]) == WAITING
    assert dependency.status(me, {}, [job(12, state=JobState.PENDING)]) is None
    for state in ENDED:
        assert dependency.status(me, {}, [job(4, state=state)]) is None, state
    assert dependency.status(me, {}, [job(4, user="v", state=JobState.RUNNING)]) is None
    assert dependency.status(me, {}, [job(4, name="eval", state=JobState.RUNNING)]) is None


def test_singleton_serialises_same_named_jobs_in_the_scheduler():
    """man sbatch: singleton -- "only one job by that name and owned by that user can be running
    ... at any point in time": with nodes for all, only the first of two same-named singleton
    jobs starts; the other waits (reason Dependency) while the first runs."""
    nodes = [NodeStatus(f"n{i}", f"n{i}", alive=True) for i in range(3)]
    first, second = job(1, ["singleton"]), job(2, ["singleton"])
    other = job(3, ["singleton"], name="eval")
    decided = plan([first, second, other], nodes, [], {}, 1000.0)
    assert [j for j, _ in decided.starts] == [1, 3]
    assert decided.reasons == {2: WAITING}
    first.state, first.nodes = JobState.RUNNING, ["n0"]
    nodes[0] = NodeStatus("n0", "n0", alive=True, job=1)
    decided = plan([second], nodes, [first], {}, 1000.0)
    assert decided.starts == [] and decided.reasons == {2: WAITING} and decided.cancels == {}
    assert [j for j, _ in plan([second], nodes[1:], [], {}, 1000.0).starts] == [2]


def test_scheduler_cancels_what_can_never_run_and_starts_what_may():
    """man sbatch: afternotok "after the specified jobs have terminated in some failed state";
    afterany "after the specified jobs have terminated": the master starts both after a failure,
    and cancels (DependencyNeverSatisfied) an afterok on the same failed job."""
    nodes = [NodeStatus(f"n{i}", f"n{i}", alive=True) for i in range(3)]
    jobs = [job(10, ["afternotok:1"]), job(11, ["afterany:1"]), job(12, ["afterok:1"])]
    decided = plan(jobs, nodes, [], {1: JobState.FAILED}, 1000.0)
    assert [j for j, _ in decided.starts] == [10, 11]
    assert decided.cancels == {12: NEVER}


def test_a_singleton_among_jobs_of_other_kinds_still_waits_for_its_running_namesake():
    """The scheduler compares jobs by name and user only when some pending job has a singleton
    term: one such job among others without any (or with afterok) still waits for its running
    namesake, and the others start."""
    assert dependency.has_singleton(["afterok:3", "singleton"]) and not dependency.has_singleton(["afterok:3"])
    assert not dependency.has_singleton([]) and not dependency.has_singleton([5])
    nodes = [NodeStatus(f"n{i}", f"n{i}", alive=True) for i in range(4)]
    running = job(1, state=JobState.RUNNING)
    running.nodes = ["n0"]
    nodes[0] = NodeStatus("n0", "n0", alive=True, job=1)
    pending = [job(2, name="other"), job(3, ["singleton"]), job(4, ["afterok:9"], name="other")]
    decided = plan(pending, nodes, [running], {9: JobState.COMPLETED}, 1000.0)
    assert [j for j, _ in decided.starts] == [2, 4]
    assert decided.reasons == {3: WAITING}
