from minihpc.core.models import Job, JobState
from minihpc.core.outcome import (
    NodeResult,
    after_report,
    format_exit,
    from_returncode,
    held_failure,
    starts_failure,
)


def _running(nodes):
    return Job(1, "j", "u", "s", "s", "x", nodes=nodes, nodes_requested=len(nodes), state=JobState.RUNNING)


def test_completed_only_when_every_node_exited_zero():
    job = _running(["a", "b", "c"])
    results = {"a": NodeResult(0), "b": NodeResult(0)}
    assert after_report(job, results, "b") is None
    results["c"] = NodeResult(0)
    assert after_report(job, results, "c").state is JobState.COMPLETED


def test_a_failure_is_held_while_other_nodes_have_not_reported():
    job = _running(["a", "b"])
    failure = NodeResult(134, "SIGABRT", rank=1)
    assert starts_failure(job, failure)
    assert after_report(job, {"b": failure}, "b") is None
    job.first_failure, job.failing_since = "b", 100.0
    assert not starts_failure(job, NodeResult(1))  # only the first failure starts the hold


def test_a_held_failure_fails_the_job_after_the_grace_with_the_first_failure():
    job = _running(["a", "b"])
    job.first_failure, job.failing_since = "b", 100.0
    results = {"b": NodeResult(134, "SIGABRT", rank=1)}
    assert held_failure(job, results, now=103.9, grace=4.0) is None
    out = held_failure(job, results, now=104.0, grace=4.0)
    assert (out.state, out.exit_code, out.signal, out.failed_node) == (JobState.FAILED, 134, "SIGABRT", "b")


def test_a_held_failure_is_the_failure_the_launchers_saw_first_not_the_first_reported():
    """e2e: one rank SIGKILLed; a peer's rank (exit 1, a broken connection) reported first, and
    the third node's ranks hung in a collective until the hold ended the job."""
    job = _running(["a", "b", "c"])
    job.first_failure, job.failing_since = "b", 100.0
    results = {"b": NodeResult(1, at=50.2), "a": NodeResult(137, "SIGKILL", at=50.1)}
    out = held_failure(job, results, now=104.0, grace=4.0)
    assert (out.exit_code, out.signal, out.failed_node) == (137, "SIGKILL", "a")


def test_when_every_node_reported_the_first_failure_decides():
    job = _running(["a", "b"])
    job.first_failure = "b"
    out = after_report(job, {"b": NodeResult(3), "a": NodeResult(1)}, "a")
    assert (out.state, out.exit_code, out.failed_node) == (JobState.FAILED, 3, "b")


def test_a_held_failure_is_not_ended_by_the_master_once_the_job_ended_otherwise():
    job = _running(["a", "b"])
    job.first_failure, job.failing_since, job.state = "b", 100.0, JobState.NODE_FAIL
    assert held_failure(job, {"b": NodeResult(1)}, now=200.0, grace=4.0) is None


def test_reports_after_the_job_ended_change_nothing():
    job = _running(["a", "b"])
    job.state = JobState.CANCELLED
    assert after_report(job, {"a": NodeResult(143, "SIGTERM")}, "a") is None


def test_returncodes():
    assert from_returncode(0) == (0, None)
    assert from_returncode(3) == (3, None)
    assert from_returncode(-9) == (137, "SIGKILL")
    assert format_exit(137, "SIGKILL") == "0:9"  # sacct: a signalled task set no exit status
    assert format_exit(3, None) == "3:0"
    assert format_exit(0, None) == "0:0"
    assert format_exit(None, None) == "-"


def test_the_failure_seen_first_is_the_cause_even_when_a_peer_reported_first():
    job = _running(["a", "b", "c"])
    job.first_failure = "a"  # a's rank died of the broken connection and reported first
    results = {
        "a": NodeResult(1, rank=0, at=100.08),
        "c": NodeResult(1, rank=2, at=100.09),
        "b": NodeResult(137, "SIGKILL", rank=1, at=100.01),
    }
    outcome = after_report(job, results, "b")
    assert (outcome.state, outcome.exit_code, outcome.signal, outcome.failed_node) == (JobState.FAILED, 137, "SIGKILL", "b")
    # Without times (an older node), the first report stands.
    untimed = {n: NodeResult(r.exit_code, r.signal, r.rank) for n, r in results.items()}
    assert after_report(job, untimed, "b").failed_node == "a"
