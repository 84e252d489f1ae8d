from minihpc.models import Job, JobState
from minihpc.outcome import NodeResult, after_report, format_exit, from_returncode


def _running(nodes):
    return Job(1, "j", "u", "s", "s", "x", nodes=nodes, nodes_requested=len(nodes), state=JobState.RUNNING)


def test_completed_only_when_every_node_exited_zero():
    job = _running(["a", "b", "c"])
    results = {"a": NodeResult(0), "b": NodeResult(0)}
    assert after_report(job, results, "b") is None
    results["c"] = NodeResult(0)
    assert after_report(job, results, "c").state is JobState.COMPLETED


def test_first_non_zero_exit_fails_the_job_with_its_code_and_signal():
    job = _running(["a", "b"])
    out = after_report(job, {"b": NodeResult(134, "SIGABRT", rank=1)}, "b")
    assert (out.state, out.exit_code, out.signal, out.failed_node) == (JobState.FAILED, 134, "SIGABRT", "b")


def test_reports_after_the_job_ended_change_nothing():
    job = _running(["a", "b"])
    job.state = JobState.CANCELLED
    assert after_report(job, {"a": NodeResult(143, "SIGTERM")}, "a") is None


def test_returncodes():
    assert from_returncode(0) == (0, None)
    assert from_returncode(3) == (3, None)
    assert from_returncode(-9) == (137, "SIGKILL")
    assert format_exit(137, "SIGKILL") == "137:9"
    assert format_exit(0, None) == "0:0"
    assert format_exit(None, None) == "-"
