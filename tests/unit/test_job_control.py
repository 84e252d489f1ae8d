"""What ``minihpc scontrol`` may change in a job, and when (minihpc.core.job_control), the
scheduler passing held jobs over, and ``scontrol show job``'s layout."""

import dataclasses

import pytest

from minihpc.cli.scontrol import job_lines, time_limit, user_id
from minihpc.client.control import parse_job_list
from minihpc.core import job_control
from minihpc.core.errors import Conflict, Forbidden, UsageError
from minihpc.core.job_control import HELD_REASON, TimeChange, Update, apply_update, parse_update
from minihpc.core.models import Job, JobState, NodeStatus, Priority
from minihpc.core.scheduler import plan

NOW = 1000.0
ENDED = [JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL]


def job(state=JobState.PENDING, job_id=1, nodes=1, limit=None, **kw):
    j = Job(job_id, f"j{job_id}", "ada", "s", "s", "x", nodes_requested=nodes, time_limit=limit,
            submitted_at=float(job_id), **kw)
    j.state = state
    if state is not JobState.PENDING:
        j.attempts, j.nodes, j.started_at = 1, [f"n{i}" for i in range(1, nodes + 1)], NOW - 10
    return j


# -- hold / release ---------------------------------------------------------------------------

def test_hold_and_release_a_pending_job():
    """scontrol(1): hold "Prevent a pending job from being started"; release "Release a
    previously held job to begin execution"."""
    held = job_control.hold(job(), "ada")
    assert held.held and held.held_by == "ada" and held.reason == HELD_REASON == "JobHeldUser"
    assert held.state is JobState.PENDING  # a sub-state of PENDING, not a state of its own
    assert job_control.hold(held, "root") is held  # holding again changes nothing
    released = job_control.release(held)
    assert not released.held and released.held_by is None and released.reason == "None"
    assert job_control.release(released) is released  # releasing one not held changes nothing


@pytest.mark.parametrize("state", [JobState.RUNNING, *ENDED])
def test_only_a_pending_job_is_held_or_released(state):
    for change in (lambda j: job_control.hold(j, "ada"), job_control.release):
        with pytest.raises(Conflict, match=f"job 1 is {state.value}; only a pending job can be"):
            change(job(state))


def test_held_is_only_a_pending_sub_state_and_round_trips():
    j = job(held_by="ada")
    assert j.held and Job.from_record(j.to_record()) == j
    assert Job.from_record(job().to_record()).held_by is None
    assert not dataclasses.replace(j, state=JobState.CANCELLED).held  # a cancelled held job is not held
    j.begin_attempt(["n1"], NOW)
    assert j.held_by is None and j.to_json()["held"] is False


# -- requeue ----------------------------------------------------------------------------------

@pytest.mark.parametrize("state", [JobState.RUNNING, *ENDED])
def test_requeue_a_running_or_ended_job(state):
    """scontrol(1): requeue "Requeue a running, suspended or finished Slurm batch job into
    pending state"."""
    before = job(state, exit_code=3)
    before.ended_at = None if state is JobState.RUNNING else NOW
    after = job_control.requeue(before)
    assert after.state is JobState.PENDING and not after.held and after.ended_at is None
    assert (after.id, after.attempts, after.requeues, after.exit_code) == (1, 1, 0, 3)  # not a node-failure requeue
    held = job_control.requeue(before, held_by="ada")  # requeuehold
    assert held.held and held.reason == HELD_REASON


def test_requeue_clears_an_old_hold_and_a_held_failure():
    j = job(JobState.CANCELLED, held_by="ada", first_failure="n1", failing_since=NOW)
    after = job_control.requeue(j)
    assert (after.held_by, after.first_failure, after.failing_since) == (None, None, None)


def test_a_pending_job_is_not_requeued():
    with pytest.raises(Conflict, match="job 1 is already PENDING"):
        job_control.requeue(job())


# -- update -----------------------------------------------------------------------------------

def test_parse_update_takes_keys_in_any_case_and_order():
    """scontrol(1): update "SPECIFICATION is in the same format as the Slurm configuration
    file and the output of the show command" -- Key=Value words, keys case-insensitive."""
    assert parse_update(["TimeLimit=10", "jobid=5", "PRIORITY=High", "numnodes=2"]) == Update(
        5, TimeChange("=", 600.0), Priority.HIGH, (2, 2))
    assert parse_update(["JobId=5", "NumNodes=2-4"]).nodes == (2, 4)
    assert parse_update(["JobId=5", "TimeLimit=UNLIMITED"]).time_limit == TimeChange("=", None)
    assert parse_update(["JobId=5", "TimeLimit+=30"]).time_limit == TimeChange("+", 1800.0)
    assert parse_update(["JobId=5", "timelimit-=0:30"]).time_limit == TimeChange("-", 30.0)


@pytest.mark.parametrize(
    "words,says",
    [
        (["JobId=5", "Partition=gpu"], "unknown update key 'Partition' (in 'Partition=gpu')"),
        (["JobId=5", "Priority=100"], "priorities are names, not numbers: high, normal, low"),
        (["JobId=5", "Priority=urgent"], "priorities are high, normal, low"),
        (["JobId=5", "NumNodes=3-2"], "NumNodes must be a positive number or a range MIN-MAX"),
        (["JobId=5", "NumNodes=0"], "NumNodes must be a positive number"),
        (["JobId=5", "TimeLimit=soon"], "invalid time limit 'soon'"),
        (["JobId=5", "TimeLimit+=UNLIMITED"], "UNLIMITED cannot be added"),
        (["JobId=5", "Priority+=high"], "expected Key=Value"),
        (["JobId=5", "TimeLimit"], "expected Key=Value"),
        (["JobId=x", "TimeLimit=5"], "JobId must be a positive number"),
        (["TimeLimit=5"], "no JobId=ID"),
        (["JobId=5"], "nothing to update"),
        (["JobId=5", "TimeLimit=5", "timelimit=6"], "TimeLimit given twice"),
    ],
)
def test_a_bad_update_is_one_line_naming_it(words, says):
    with pytest.raises(UsageError) as info:
        parse_update(words)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_time_limit_of_pending_and_running_jobs():
    """scontrol(1): TimeLimit "Only the Slurm administrator or root can increase job's
    TimeLimit" -- of a running job (slurmctld lets a pending job's grow within its partition's
    limit; minihpc has none)."""
    shorter, longer = Update(1, TimeChange("=", 60.0)), Update(1, TimeChange("=", 7200.0))
    assert apply_update(job(JobState.RUNNING, limit=600.0), shorter, False, 3).time_limit == 60.0
    assert apply_update(job(limit=600.0), longer, False, 3).time_limit == 7200.0
    assert apply_update(job(JobState.RUNNING, limit=600.0), longer, True, 3).time_limit == 7200.0
    with pytest.raises(Forbidden, match="only an admin may raise it"):
        apply_update(job(JobState.RUNNING, limit=600.0), longer, False, 3)
    with pytest.raises(Forbidden):
        apply_update(job(JobState.RUNNING, limit=600.0), Update(1, TimeChange("=", None)), False, 3)
    assert apply_update(job(JobState.RUNNING), shorter, False, 3).time_limit == 60.0  # from UNLIMITED


def test_time_limit_plus_and_minus():
    """scontrol(1): "precede the time and equal sign with a "+" or "-" to increment or
    decrement the current time limit (e.g. "TimeLimit+=30")"."""
    assert apply_update(job(limit=600.0), Update(1, TimeChange("+", 60.0)), False, 3).time_limit == 660.0
    assert apply_update(job(limit=600.0), Update(1, TimeChange("-", 60.0)), False, 3).time_limit == 540.0
    with pytest.raises(UsageError, match="leaves nothing"):
        apply_update(job(limit=600.0), Update(1, TimeChange("-", 600.0)), False, 3)
    with pytest.raises(UsageError, match="no time limit"):
        apply_update(job(), Update(1, TimeChange("+", 60.0)), False, 3)


def test_priority_and_num_nodes_only_while_pending_and_within_the_cluster():
    after = apply_update(job(), Update(1, priority=Priority.LOW, nodes=(3, 3)), False, 3)
    assert (after.priority, after.nodes_requested) == (Priority.LOW, 3)
    with pytest.raises(Conflict, match="job 1 is RUNNING; only a pending job can be given another Priority"):
        apply_update(job(JobState.RUNNING), Update(1, priority=Priority.HIGH), True, 3)
    with pytest.raises(Conflict, match="only a pending job can be given another NumNodes"):
        apply_update(job(JobState.RUNNING), Update(1, nodes=(1, 1)), True, 3)
    with pytest.raises(UsageError, match="job 1 would need 4 nodes; the cluster has 3"):
        apply_update(job(), Update(1, nodes=(4, 4)), True, 3)
    ranged = apply_update(job(), Update(1, nodes=(2, 5)), False, 3)  # the most may be more than there are
    assert (ranged.nodes_requested, ranged.max_nodes, ranged.node_range) == (2, 5, "2-5")
    assert apply_update(ranged, Update(1, nodes=(3, 3)), False, 3).max_nodes == 0, "a number ends the range"


@pytest.mark.parametrize("state", ENDED)
def test_an_ended_job_is_not_updated(state):
    with pytest.raises(Conflict, match=f"job 1 is {state.value}; only a pending or running job can be updated"):
        apply_update(job(state), Update(1, TimeChange("=", 60.0)), True, 3)


def test_changed_fields_are_the_stored_differences():
    before = job(limit=600.0)
    after = apply_update(before, Update(1, TimeChange("=", None), Priority.HIGH), True, 3)
    assert job_control.changed_fields(before, after) == {"time_limit": "", "priority": "high"}
    assert job_control.changed_fields(before, before) == {}
    assert job_control.changed_fields(before, job_control.hold(before, "ada")) == {
        "held_by": "ada", "reason": "JobHeldUser"}


# -- the scheduler passes held jobs over ----------------------------------------------------

def nodes(n=3):
    return [NodeStatus(f"n{i}", f"n{i}", alive=True) for i in range(1, n + 1)]


def test_the_scheduler_never_starts_a_held_job():
    held = job(job_id=1, nodes=2, held_by="ada")
    p = plan([held, job(job_id=2, nodes=2)], nodes(3), [], {}, NOW)
    assert p.starts == [(2, ["n1", "n2"])] and p.reasons == {1: HELD_REASON}


def test_a_held_job_keeps_no_nodes_from_jobs_behind_it():
    # Unheld, the 3-node job 1 (first in line) would wait for the busy node, and job 2 with no
    # time limit could not jump ahead of it; held, it is as if it were not queued.
    busy = [NodeStatus("n1", "n1", True, job=9), *nodes(3)[1:]]
    running = job(JobState.RUNNING, job_id=9)
    behind = job(job_id=2, nodes=2)
    p = plan([job(job_id=1, nodes=3), behind], busy, [running], {}, NOW)
    assert p.starts == [] and p.reasons == {1: "Resources", 2: "Priority"}
    p = plan([job(job_id=1, nodes=3, held_by="ada"), behind], busy, [running], {}, NOW)
    assert p.starts == [(2, ["n2", "n3"])] and p.reasons == {1: HELD_REASON}


def test_a_released_job_is_planned_again():
    released = job_control.release(job_control.hold(job(), "ada"))
    assert plan([released], nodes(1), [], {}, NOW).starts == [(1, ["n1"])]


# -- scontrol show job ------------------------------------------------------------------------

def test_show_job_is_scontrols_key_value_layout():
    """scontrol(1): show job "Displays the state of the specified job"; the first line starts
    JobId=, the others are indented, each a run of Key=Value words."""
    j = job(JobState.RUNNING, nodes=2, limit=90.0, exit_code=None)
    j.user, j.workdir, j.args = "nobody-here-xyz", "/w", ["--lr", "0.1"]
    lines = job_lines(j, NOW, "/logs/job-1/%N.log")
    assert lines[0] == "JobId=1 JobName=j1"
    text = " ".join(lines)
    words = dict(w.split("=", 1) for w in text.split() if "=" in w)
    assert words["UserId"] == "nobody-here-xyz" and words["JobState"] == "RUNNING"
    assert words["Reason"] == "None" and words["Priority"] == "normal"
    assert (words["NumNodes"], words["NumTasks"], words["NodeList"]) == ("2", "2", "n[1-2]")
    assert (words["TimeLimit"], words["RunTime"], words["ExitCode"]) == ("00:01:30", "00:00:10", "0:0")
    assert words["StdOut"] == "/logs/job-1/%N.log" and words["WorkDir"] == "/w"
    assert "Command=s --lr 0.1" in text
    for key in ("SubmitTime", "StartTime", "EndTime", "Restarts"):
        assert key in words


def test_show_job_of_a_held_pending_job():
    j = job_control.hold(job(), "ada")
    words = dict(w.split("=", 1) for w in " ".join(job_lines(j, NOW, "/o")).split() if "=" in w)
    assert (words["JobState"], words["Reason"], words["NodeList"]) == ("PENDING", "JobHeldUser", "(null)")
    assert (words["StartTime"], words["EndTime"], words["TimeLimit"]) == ("Unknown", "Unknown", "UNLIMITED")


def test_time_limit_format():
    assert [time_limit(s) for s in (None, 59, 3600, 90061)] == ["UNLIMITED", "00:00:59", "01:00:00", "1-01:01:01"]


def test_user_id_is_name_and_uid_when_the_host_knows_the_user():
    assert user_id("root") == "root(0)"
    assert user_id("no-such-user-here") == "no-such-user-here"


def test_job_lists_as_scontrol_takes_them():
    """scontrol(1): hold/release/requeue take a job_list, "a comma separated list of job IDs"
    (or several words)."""
    assert parse_job_list(["5", "6,7", "8,"]) == [5, 6, 7, 8]
    for bad in (["x"], ["0"], ["5,-1"], [","]):
        with pytest.raises(UsageError):
            parse_job_list(bad)


def test_only_an_admin_gives_a_job_priority_high():
    with pytest.raises(Forbidden, match="priority high is for admins"):
        apply_update(job(), Update(1, priority=Priority.HIGH), False, 3)
    assert apply_update(job(), Update(1, priority=Priority.LOW), False, 3).priority is Priority.LOW
    with pytest.raises(Forbidden, match="priority high is for admins"):
        job_control.check_priority(Priority.HIGH, admin=False)
    job_control.check_priority(Priority.HIGH, admin=True)
    job_control.check_priority(Priority.NORMAL, admin=False)


def test_a_jobs_record_is_capped_alone_and_over_its_array_tasks():
    """Issue 33: a 100 KB args string, as 1,000 array tasks, took 100 MB of Redis."""
    from minihpc.core.job_control import ARRAY_RECORDS_MAX, RECORD_MAX, check_size

    check_size(["--lr", "0.1"], "train", {"WANDB_PROJECT": "x"}, ("out-%j.txt", ""), 1000)
    with pytest.raises(UsageError, match=rf"^the job's args, name, environment and output names take \d+ bytes, "
                                         rf"over the {RECORD_MAX} a job may have"):
        check_size(["x" * 100_000], "train", {}, ("", ""), 1)
    with pytest.raises(UsageError, match=rf"^the array's 1001 tasks would each copy \d+ bytes .* over the "
                                         rf"{ARRAY_RECORDS_MAX} an array may have$"):
        check_size(["x" * 10_000], "train", {}, ("", ""), 1001)
    with pytest.raises(UsageError, match="over the"):
        check_size([], "train", {"K": "v" * RECORD_MAX}, ("", ""), 1)


def test_a_users_jobs_are_capped_as_slurms_max_submit_jobs_caps_them():
    job_control.check_user_jobs("bob", 9, 1, 10)  # up to the cap
    job_control.check_user_jobs("bob", 10_000, 5_000, 0)  # 0: no cap
    with pytest.raises(UsageError) as err:
        job_control.check_user_jobs("bob", 8, 3, 10)  # an array of 3 past it: all or none
    assert str(err.value) == ("user bob has 8 job(s) pending or running and may have at most 10 "
                              "(MINIHPC_MAX_JOBS_PER_USER); this submit adds 3")
