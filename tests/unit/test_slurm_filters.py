"""Slurm's filters and formats for queue/history/cancel (squeue, sacct, scancel), as pure
functions, and the client's selections over an in-memory store. Each test cites the man page
option it follows."""

from datetime import datetime

import pytest

from minihpc.cli.main import main
from minihpc.client import jobs as client_jobs
from minihpc.client.access import Principal
from minihpc.core.arrays import JobRef, parse_job_refs
from minihpc.core.errors import Conflict, Forbidden, NotFound, UsageError
from minihpc.core.models import Job, JobState, NodeStatus, Priority
from minihpc.core.scheduler import plan
from minihpc.core.slurm_filters import (
    JobFilter,
    in_window,
    parse_cancel_state,
    parse_slurm_time,
    parse_states,
    split_list,
)
from minihpc.core.slurm_formats import (
    START_FORMAT,
    View,
    expected_starts,
    parse_sacct_fields,
    parse_squeue_format,
    sacct_lines,
    squeue_lines,
)

NOW = datetime(2026, 3, 10, 15, 30, 0).timestamp()
PD, R, CD, F, CA, TO, NF = (JobState.PENDING, JobState.RUNNING, JobState.COMPLETED, JobState.FAILED,
                            JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL)


def job(job_id, state=PD, user="alice", name="train.py", nodes=(), requested=1, limit=None,
        submitted=None, started=None, ended=None, reason="None", priority=Priority.NORMAL, deps=()):
    return Job(job_id, name, user, "spool", name, "sha", nodes_requested=requested, time_limit=limit,
               state=state, nodes=list(nodes), reason=reason, priority=priority, dependency=list(deps),
               submitted_at=NOW - 100 + job_id if submitted is None else submitted,
               started_at=started, ended_at=ended, exit_code=0 if state is CD else None)


def at(*fields) -> float:
    return datetime(*fields).timestamp()


# -- lists, states, ids ---------------------------------------------------------------------

def test_state_lists_take_names_and_codes_in_any_case():
    """squeue(1) -t, --states=<state_list>: "a comma separated list of state names" --
    long names (PENDING) and compact codes (PD), case-insensitive; ``all`` is every state."""
    assert parse_states("PENDING,RUNNING") == {PD, R}
    assert parse_states("pd,r") == {PD, R}
    assert parse_states("CD,F,CA,TO,NF") == {CD, F, CA, TO, NF}
    assert parse_states("node_fail,,timeout,") == {NF, TO}
    assert parse_states("all") is None and parse_states("ALL") is None


def test_a_slurm_state_minihpc_never_enters_is_accepted_and_matches_nothing():
    """squeue(1) -t: Slurm's other states (SUSPENDED, COMPLETING (CG), ...) are valid there, so
    a script's ``-t PD,R,CG`` still works here; CG alone selects no job."""
    assert parse_states("PD,R,CG") == {PD, R}
    assert parse_states("SUSPENDED,S") == frozenset()
    assert not JobFilter(states=parse_states("CG")).matches(job(1))


@pytest.mark.parametrize("text", ["DONE", "PD,xx", ",", ""])
def test_an_unknown_state_names_the_value_and_the_choices(text):
    """squeue(1) -t: "Invalid job state specified" -- here one UsageError line."""
    with pytest.raises(UsageError) as exc:
        parse_states(text, "--states")
    assert "--states" in str(exc.value)
    if text.strip(","):
        assert "PENDING (PD)" in str(exc.value)


def test_job_id_lists_and_steps_refused():
    """squeue(1) -j, --jobs=<job_id_list>; sacct(1) -j, --jobs=(job(.step)),...: minihpc jobs
    have no steps, so ``12.0`` is refused with a reason."""
    assert parse_job_refs("12,13,,12") == [JobRef(12), JobRef(13)]
    for bad in ("x", "0", "-3", "12.batch"):
        with pytest.raises(UsageError) as exc:
            parse_job_refs(bad)
        assert repr(bad) in str(exc.value)
    with pytest.raises(UsageError, match="no steps"):
        parse_job_refs("12.0")
    assert split_list(" a , b,", "--user") == ["a", "b"]


def test_cancel_state_is_one_of_pending_running_suspended():
    """scancel(1) -t, --state=job_state_name: "may have a value of either PENDING, RUNNING or
    SUSPENDED"."""
    assert parse_cancel_state("PENDING") == {PD} and parse_cancel_state("pd") == {PD}
    assert parse_cancel_state("running") == {R} and parse_cancel_state("R") == {R}
    assert parse_cancel_state("SUSPENDED") == frozenset()
    with pytest.raises(UsageError, match="PENDING, RUNNING, SUSPENDED"):
        parse_cancel_state("COMPLETED")


def test_filters_and_each_part_given():
    """scancel(1): "the job_id and the filters are ANDed"; squeue(1) -u/-t/-j likewise."""
    flt = JobFilter(users=frozenset({"alice"}), states=frozenset({PD}), names=frozenset({"a.py"}))
    assert flt.matches(job(1, name="a.py"))
    assert not flt.matches(job(2, name="a.py", user="bob"))
    assert not flt.matches(job(3, name="a.py", state=R))
    assert not flt.matches(job(4, name="b.py"))
    assert not flt.matches(job(5, name="A.PY"))  # scancel's --name is an exact match
    assert JobFilter().empty and not flt.empty
    assert not JobFilter(states=frozenset({PD, R})).wants_ended() and JobFilter().wants_ended()


# -- sacct's times and window ---------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("now", NOW),
    ("now-2hours", NOW - 7200),
    ("now-1days", NOW - 86400),
    ("now-1day", NOW - 86400),
    ("now-90minutes", NOW - 5400),
    ("now+1week", NOW + 7 * 86400),
    ("now-30", NOW - 30),  # a bare count is seconds
    ("2026-01-05", at(2026, 1, 5)),
    ("2026-01-05T10:30", at(2026, 1, 5, 10, 30)),
    ("2026-01-05T10:30:15", at(2026, 1, 5, 10, 30, 15)),
    ("01/05", at(2026, 1, 5)),
    ("12/25", at(2025, 12, 25)),  # a month still to come is last year's (sacct looks back)
    ("12/25/24", at(2024, 12, 25)),
    ("01/05-10:30", at(2026, 1, 5, 10, 30)),
    ("0105", at(2026, 1, 5)),
    ("10:30", at(2026, 3, 10, 10, 30)),
    ("3:00 PM", at(2026, 3, 10, 15)),
    ("today", at(2026, 3, 10)),
    ("midnight", at(2026, 3, 10)),
    ("noon", at(2026, 3, 10, 12)),
])
def test_sacct_time_forms(text, expected):
    """sacct(1) -S, --starttime / -E, --endtime: "Valid time formats are: HH:MM[:SS][AM|PM],
    MMDD[YY][-HH:MM[:SS]], MM.DD[.YY][-HH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]],
    YYYY-MM-DD[THH:MM[:SS]], today, midnight, noon, now[{+|-}count[seconds(default)|minutes|
    hours|days|weeks]]"."""
    assert parse_slurm_time(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "now-1h", "now-", "2026-13-01", "25:00", "13/01", "", "1/2/3"])
def test_a_bad_time_names_the_option_and_the_forms(text):
    """sacct(1) -S: "Invalid time specification" -- here one UsageError line."""
    with pytest.raises(UsageError) as exc:
        parse_slurm_time(text, NOW, "--endtime")
    assert repr(text) in str(exc.value) and "--endtime" in str(exc.value) and "YYYY-MM-DD" in str(exc.value)


def test_time_window_without_states_is_any_overlap():
    """sacct(1) DEFAULT TIME WINDOW: -S/-E select "jobs in any state" during the window."""
    early = job(1, CD, submitted=NOW - 500, started=NOW - 400, ended=NOW - 300)
    late = job(2, CD, submitted=NOW - 50, started=NOW - 40, ended=NOW - 30)
    running = job(3, R, submitted=NOW - 1000, started=NOW - 900)
    assert [j.id for j in (early, late, running) if in_window(j, NOW - 100, None)] == [2, 3]
    assert [j.id for j in (early, late, running) if in_window(j, None, NOW - 350)] == [1, 3]
    assert [j.id for j in (early, late, running) if in_window(j, NOW - 350, NOW - 320)] == [1, 3]


def test_time_window_with_states_needs_that_state_in_the_window():
    """sacct(1) -s: "only jobs in this state at this time will be returned": an ended job
    ended inside the window; a running one started by its end."""
    ended = job(1, CD, submitted=NOW - 500, started=NOW - 400, ended=NOW - 300)
    running = job(2, R, submitted=NOW - 500, started=NOW - 200)
    cd, r = frozenset({CD}), frozenset({R})
    assert in_window(ended, NOW - 350, NOW - 250, cd) and not in_window(ended, NOW - 250, None, cd)
    assert in_window(running, None, NOW - 100, r) and not in_window(running, None, NOW - 300, r)


# -- squeue -o ------------------------------------------------------------------------------

def test_squeue_format_widths_and_justification():
    """squeue(1) -o, --format=<output_format>: "%[[.]size]type[suffix]" -- "." right-justifies,
    size is the field's width (a longer value is cut), text around the fields is kept."""
    prefix, columns = parse_squeue_format(">%.6i|%-10j|%5t%%")
    lines = squeue_lines(prefix, columns, [job(7, name="a-very-long-name")], View(NOW))
    assert lines == ["> JOBID|NAME      |ST   %", ">     7|a-very-lon|PD   %"]
    assert parse_squeue_format("%10j")[1][0].right is False  # left is squeue's default


def test_squeue_fields_from_the_man_page():
    """squeue(1) -o fields %i %j %u %t %T %M %l %D %R %P %Q %V %S."""
    running = job(5, R, user="bob", nodes=["n1", "n2"], requested=2, limit=3600, started=NOW - 65)
    pending = job(6, reason="Resources", priority=Priority.HIGH, limit=600)
    fmt = parse_squeue_format("%i;%j;%u;%t;%T;%M;%l;%D;%R;%P;%Q;%V;%S")
    header, row_r, row_p = squeue_lines(*fmt, [running, pending], View(NOW, {6: NOW + 60}))
    assert header == "JOBID;NAME;USER;ST;STATE;TIME;TIME_LIMIT;NODES;NODELIST(REASON);PARTITION;PRIORITY;SUBMIT_TIME;START_TIME"
    submitted = datetime.fromtimestamp(running.submitted_at).strftime("%Y-%m-%dT%H:%M:%S")
    assert row_r.split(";") == ["5", "train.py", "bob", "R", "RUNNING", "1:05", "1:00:00", "2", "n[1-2]", "main", "2",
                                submitted, datetime.fromtimestamp(NOW - 65).strftime("%Y-%m-%dT%H:%M:%S")]
    assert row_p.split(";")[3:9] == ["PD", "PENDING", "0:00", "10:00", "1", "(Resources)"]
    assert row_p.split(";")[10] == "3"
    assert row_p.split(";")[12] == datetime.fromtimestamp(NOW + 60).strftime("%Y-%m-%dT%H:%M:%S")
    no_estimate = squeue_lines(*parse_squeue_format("%S"), [pending], View(NOW), header=False)
    assert no_estimate == ["N/A"]


def test_squeue_cuts_values_but_not_node_lists():
    """squeue(1) -o: sizes cut values (``%.8j`` shows 8 characters of the name); a node list
    (%N, %R of a running job) is printed whole."""
    running = job(1, R, name="a-long-name", nodes=["master-node", "worker-node-1"])
    lines = squeue_lines(*parse_squeue_format("%.8j %.5R"), [running], View(NOW))
    assert lines == ["    NAME NODELIST(REASON)", "a-long-n master-node,worker-node-1"]


@pytest.mark.parametrize("text", ["%.18i %z", "%i %", "no fields"])
def test_an_unknown_squeue_field_is_one_error_naming_it(text):
    """squeue(1) -o: "Invalid job format specification" -- here an error, not a blank column."""
    with pytest.raises(UsageError) as exc:
        parse_squeue_format(text)
    assert repr(text) in str(exc.value)


def test_start_format_is_squeues():
    """squeue(1) --start: "equivalent to --format="%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"."""
    header, row = squeue_lines(*parse_squeue_format(START_FORMAT), [job(3, reason="Priority")], View(NOW, {3: None}))
    assert header.split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME", "NODES", "SCHEDNODES",
                              "NODELIST(REASON)"]
    assert row.split() == ["3", "main", "train.py", "alice", "PD", "N/A", "1", "(null)", "(Priority)"]


# -- sacct -o, -P, -n -----------------------------------------------------------------------

def test_sacct_fields_any_case_with_widths():
    """sacct(1) -o, --format: "Comma separated list of fields" (any case); "format=name%30
    will print 30 characters of field name right justified. A %-30 will print 30 characters
    left justified"; a longer value is cut and ends in "+"."""
    columns = parse_sacct_fields("jobid,JOBNAME,State%-12,exitcode%4")
    ended = job(9, CD, name="allreduce.py", started=NOW - 10, ended=NOW)
    lines = sacct_lines(columns, [ended], NOW)
    assert lines == [
        "JobID           JobName State        Exit ",
        "------------ ---------- ------------ ---- ",
        "9            allreduce+ COMPLETED     0:0 ",
    ]


def test_sacct_parsable_and_noheader():
    """sacct(1) -P, --parsable2: "delimited without a delimiter at the end"; -p, --parsable:
    with one; -n, --noheader: "No header will be added"."""
    columns = parse_sacct_fields("JobID,JobName,State,ExitCode,Elapsed,NNodes,NodeList")
    ended = job(4, F, nodes=["n1", "n2"], started=NOW - 3725, ended=NOW)
    ended.exit_code = 3
    assert sacct_lines(columns, [ended], NOW, parsable="P") == [
        "JobID|JobName|State|ExitCode|Elapsed|NNodes|NodeList", "4|train.py|FAILED|3:0|01:02:05|2|n[1-2]"]
    assert sacct_lines(columns, [ended], NOW, header=False, parsable="p") == ["4|train.py|FAILED|3:0|01:02:05|2|n[1-2]|"]
    assert len(sacct_lines(columns, [ended], NOW, header=False)) == 1


@pytest.mark.parametrize("text", ["JobID,Foo", "JobName%wide", ","])
def test_an_unknown_sacct_field_is_one_error(text):
    """sacct(1) -o: 'Invalid field requested: "Foo"'."""
    with pytest.raises(UsageError):
        parse_sacct_fields(text)


# -- squeue --start: the backfill plan's start estimates ------------------------------------

def node(name, job_id=None):
    return NodeStatus(name, name, alive=True, job=job_id)


def test_expected_starts_follow_the_backfill_plan():
    """squeue(1) --start: "the expected start time ... of pending jobs": the job the plan
    starts now starts now; the one waiting for a running job's time limit starts when it
    ends; one behind a job without a limit, or on a dependency, has none (N/A)."""
    nodes = [node("n1", 9), node("n2"), node("n3")]
    running = [job(9, R, nodes=["n1"], limit=600, started=NOW - 100)]
    pending = [job(1, requested=2, limit=60), job(2, requested=3, limit=60), job(3, deps=[9]),
               job(4, requested=3), job(5, requested=3, limit=60)]
    starts = expected_starts(pending, nodes, running, {9: R}, NOW)
    assert starts[1] == NOW
    assert starts[2] == NOW + 500  # job 9 ends by its limit
    assert starts[3] is None
    assert starts[4] == NOW + 560  # after job 2's promised minute
    assert starts[5] is None  # job 4 never ends
    decided = plan(pending, nodes, running, {9: R}, NOW)
    assert {i for i, _ in decided.starts} == {i for i, s in starts.items() if s == NOW}


def test_expected_start_of_a_job_that_can_never_fit_is_none():
    """squeue(1) --start: N/A where no start is known (ReqNodeNotAvail)."""
    assert expected_starts([job(1, requested=5)], [node("n1")], [], {}, NOW) == {1: None}


# -- the client's selections over an in-memory store -----------------------------------------

class FakeStore:
    def __init__(self, jobs):
        self.jobs = {j.id: j for j in jobs}

    def running_jobs(self):
        return [j for j in self.jobs.values() if j.state is R]

    def pending_jobs(self):
        return [j for j in self.jobs.values() if j.state is PD]

    def ended_jobs(self, limit=100):
        ended = sorted((j for j in self.jobs.values() if j.state.terminal), key=lambda j: -(j.ended_at or 0))
        return ended[:limit]

    def get_jobs(self, ids):
        return [self.jobs[i] for i in ids if i in self.jobs]

    def get_job(self, job_id):
        if job_id not in self.jobs:
            raise NotFound(f"job {job_id} does not exist")
        return self.jobs[job_id]

    def transition(self, job_id, state, reason, only_from):
        if self.jobs[job_id].state not in only_from:
            return False
        self.jobs[job_id].state = state
        return True


def cluster_jobs():
    return FakeStore([
        job(1, R, user="alice", name="a.py", nodes=["n1"], started=NOW - 50),
        job(2, PD, user="bob", name="a.py"),
        job(3, PD, user="alice", name="b.py"),
        job(4, CD, user="alice", name="a.py", submitted=NOW - 400, started=NOW - 300, ended=NOW - 200),
        job(5, F, user="bob", name="c.py", submitted=NOW - 95, started=NOW - 90, ended=NOW - 80),
    ])


def test_queue_filters_users_states_and_ids():
    """squeue(1) -u, --user=<user_list>; -t, --states; -j, --jobs: without -t only pending and
    running jobs; -t naming an ended state shows ended ones too."""
    store = cluster_jobs()
    active = frozenset({PD, R})
    assert [j.id for j in client_jobs.queue_jobs(store, JobFilter(states=active))] == [1, 2, 3]
    assert [j.id for j in client_jobs.queue_jobs(store, JobFilter(users=frozenset({"bob"}), states=active))] == [2]
    assert [j.id for j in client_jobs.queue_jobs(store, JobFilter(states=frozenset({CD, F})))] == [4, 5]
    assert [j.id for j in client_jobs.queue_jobs(store, JobFilter(ids=frozenset({5, 3}), states=None))] == [3, 5]
    assert [j.id for j in client_jobs.queue_jobs(store, JobFilter(ids=frozenset({5, 3}), states=active))] == [3]


def test_history_filters_ids_states_and_window():
    """sacct(1) -j (any state), -s, --state=state_list, -S/-E: ended jobs newest first by
    default; running and pending ones when -s or -j names them."""
    store = cluster_jobs()
    assert [j.id for j in client_jobs.history(store, JobFilter())] == [5, 4]
    assert [j.id for j in client_jobs.history(store, JobFilter(ids=frozenset({1, 4})))] == [1, 4]
    assert [j.id for j in client_jobs.history(store, JobFilter(states=frozenset({R, F})))] == [1, 5]
    assert [j.id for j in client_jobs.history(store, JobFilter(), start=NOW - 100)] == [5]
    assert [j.id for j in client_jobs.history(store, JobFilter(), end=NOW - 250)] == [4]
    assert [j.id for j in client_jobs.history(store, JobFilter(), limit=1)] == [5]


def test_cancel_by_filters_only_takes_the_callers_jobs():
    """scancel(1) -u, --user / -n, --name / -t, --state without ids: every matching pending or
    running job the caller may cancel; others' jobs are left alone, not errors."""
    store = cluster_jobs()
    report = client_jobs.cancel_matching(store, [], JobFilter(names=frozenset({"a.py"})), Principal("alice"))
    assert report.cancelled == [1] and report.not_yours == [2] and report.errors == []
    assert store.jobs[2].state is PD
    admin = client_jobs.cancel_matching(store, [], JobFilter(states=frozenset({PD})), Principal("root", admin=True))
    assert admin.cancelled == [2, 3]


def test_cancel_ids_and_filters_are_anded():
    """scancel(1): with ids and filters, "only jobs matching both"; an id that has ended or does
    not exist is an error; another user's job is Forbidden."""
    store = cluster_jobs()
    report = client_jobs.cancel_matching(store, [1, 3, 4, 99, 2], JobFilter(names=frozenset({"a.py"})), Principal("alice"))
    assert report.cancelled == [1]
    assert [(i, type(e)) for i, e in report.errors] == [(4, Conflict), (99, NotFound), (2, Forbidden)]
    assert store.jobs[3].state is PD  # b.py: the name filter passed over it
    with pytest.raises(UsageError, match="no job identification"):
        client_jobs.cancel_matching(store, [], JobFilter(), Principal("alice"))


# -- the CLI: bad input is one line and a non-zero exit, before any cluster is needed --------

@pytest.mark.parametrize("argv, words", [
    (["queue", "-t", "DONE"], "invalid job state 'DONE' for --states"),
    (["queue", "-o", "%.18i %z"], "format field %z"),
    (["queue", "-j", "4.1"], "no steps"),
    (["history", "-S", "yesterday"], "invalid time 'yesterday' for --starttime"),
    (["history", "-E", "now-1h"], "invalid time 'now-1h' for --endtime"),
    (["history", "-o", "JobID,Foo"], "invalid field 'Foo'"),
    (["history", "-s", "XX"], "invalid job state 'XX' for --state"),
    (["cancel", "-t", "COMPLETED"], "invalid job state 'COMPLETED' for --state"),
    (["cancel"], "no job identification provided"),
    (["cancel", "--signal", "FOO", "5"], "invalid signal 'FOO' for --signal"),
    (["cancel", "-b", "5"], "-b/--batch and -f/--full choose whom --signal reaches"),
])
def test_cli_refuses_bad_input_in_one_line(argv, words, capsys, monkeypatch):
    """squeue(1)/sacct(1)/scancel(1) options; scancel(1) -s, --signal takes a signal's name or
    number, and -b/--batch, -f/--full only say whom it reaches."""
    monkeypatch.setenv("MINIHPC_REDIS_URL", "redis://127.0.0.1:1")  # never reached
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and err.startswith(f"minihpc {argv[0]}: error: ")


def test_history_n_is_noheader_and_limit_is_long_only(capsys):
    """sacct(1) -n, --noheader: -n no longer means --limit."""
    from minihpc.cli.main import build_parser

    args = build_parser().parse_args(["history", "-n", "--limit", "5", "-P", "-X"])
    assert args.noheader is True and args.limit == 5 and args.parsable == "P" and args.allocations
    with pytest.raises(SystemExit):
        build_parser().parse_args(["history", "-n", "5"])
