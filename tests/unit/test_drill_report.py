"""Drill figures from the incidents and per-attempt steps the cluster recorded; the monitor's training row; the report's series splits."""

import pytest

from minihpc.core.errors import UsageError
from minihpc.ops.drill import Drill, finished, format_drill, summarize
from minihpc.ops.faults import check_kind

T = 1000.0


def incident(kind, at, node="worker-node-1"):
    return {"kind": kind, "at": T + at, "node": node, "job": None}


def mark(step, at):
    return {"step": step, "at": T + at}


def test_figures_count_from_the_fault_and_ignore_earlier_and_other_nodes_incidents():
    incidents = [
        incident("down", -50), incident("back", -40),  # an earlier outage
        incident("down", 0.5, node="worker-node-2"),
        incident("down", 2.4), incident("restart", 2.5), incident("back", 7.9),
    ]
    steps = {2: {"first": mark(1, -60), "last": mark(57, -0.1)}, 3: {"first": mark(51, 11.2), "last": mark(80, 20)}}
    d = summarize(Drill("kill", "worker-node-1", 4, T, attempt=2), incidents, steps)
    assert d.detected == pytest.approx(2.4)
    assert d.back == pytest.approx(7.9)
    assert d.resumed == pytest.approx(11.2)
    assert (d.last_step, d.resumed_from, d.steps_lost) == (57, 50, 7)
    assert finished(d)


def test_a_job_that_reports_no_progress_has_resumed_when_its_next_attempt_starts():
    incidents = [incident("down", 2.2), incident("restart", 2.3), incident("back", 4.8)]
    d = Drill("kill", "worker-node-1", 29, T, attempt=1, attempt_now=1, job_state="RUNNING")
    summarize(d, incidents, {}, {1: T - 40})
    assert d.resumed is None and not finished(d)  # only the interrupted attempt has started
    d.attempt_now = 2
    summarize(d, incidents, {}, {1: T - 40, 2: T + 5.1})
    assert d.resumed == pytest.approx(5.1) and (d.resumed_attempt, d.resumed_by) == (2, "start")
    assert d.resumed_from is None and d.steps_lost is None
    assert finished(d)  # the drill returns now, not when its timeout runs out
    text = format_drill(d)
    assert "job resumed   5.10s  (job 29: attempt 2 started; attempt 1 reported no progress)" in text, text


def test_a_job_that_reported_progress_has_resumed_at_its_next_first_step_not_at_its_start():
    steps = {1: {"first": mark(1, -30), "last": mark(40, -0.1)}}
    d = Drill("kill", "worker-node-1", 7, T, attempt=1)
    summarize(d, [incident("down", 2.0), incident("back", 5.0)], steps, {1: T - 31, 2: T + 6.0})
    assert d.resumed is None and not finished(d)  # started, but not training yet
    steps[2] = {"first": mark(36, 14.0), "last": mark(38, 15.0)}
    summarize(d, [incident("down", 2.0), incident("back", 5.0)], steps, {1: T - 31, 2: T + 6.0})
    assert d.resumed == pytest.approx(14.0) and (d.resumed_attempt, d.resumed_by) == (2, "step")
    assert (d.resumed_from, d.steps_lost) == (35, 5) and finished(d)
    assert "(job 7, attempt 1 -> 2, from step 35)" in format_drill(d)


def test_a_drill_that_has_not_seen_the_resume_shows_the_jobs_current_attempt():
    d = Drill("kill", "worker-node-1", 29, T, attempt=1, attempt_now=2, job_state="RUNNING")
    text = format_drill(summarize(d, [incident("down", 2.2)], {}, {}))
    assert "(job 29: RUNNING, attempt 2; the fault hit attempt 1)" in text, text


def test_not_finished_until_the_job_resumes_or_ends():
    steps = {1: {"first": mark(1, -10), "last": mark(30, -0.2)}}
    d = summarize(Drill("stop", "worker-node-1", 1, T, attempt=1), [incident("down", 0.3), incident("back", 6)], steps)
    assert d.resumed is None and not finished(d)
    d.job_state = "FAILED"
    assert finished(d)


def test_a_back_before_the_down_is_not_the_node_coming_back():
    d = summarize(Drill("pause", "worker-node-1", None, T), [incident("back", 0.1), incident("down", 3.0)], {})
    assert d.detected == pytest.approx(3.0) and d.back is None and not finished(d)


def test_redis_restart_counts_a_job_that_trained_on_as_losing_nothing():
    d = Drill("redis-restart", None, 5, T, attempt=1, redis_back=1.5)
    summarize(d, [], {1: {"first": mark(1, -30), "last": mark(90, 2.0)}})
    assert d.kept_running and d.steps_lost == 0 and finished(d)
    assert "kept running" in format_drill(d)


def test_redis_restart_waits_for_a_step_after_redis_is_back():
    d = Drill("redis-restart", None, 5, T, attempt=1, redis_back=1.5)
    summarize(d, [], {1: {"first": mark(1, -30), "last": mark(90, 1.0)}})
    assert not d.kept_running and not finished(d)


def test_unknown_kinds_are_refused_by_name():
    with pytest.raises(UsageError, match="unknown drill 'reboot'"):
        check_kind("reboot")


def test_monitor_training_row_shows_progress_loss_throughput_and_eta():
    from minihpc.core.training import eta, row

    marks = {"first": {"step": 21, "at": 100.0}, "last": {"step": 61, "at": 120.0}}  # 2 steps/s
    report = {"step": 61, "total": 161, "loss": 0.12345, "samples_per_second": 2950.4}
    assert eta(61, 161, marks["first"], marks["last"]) == 50.0
    assert row(4, "train", report, marks) == ["4", "train", "61/161", "38%", "0.1235", "2950", "0:50"]
    assert row(5, "hello", None, None)[-1] == "(no progress reported yet)"
    assert eta(10, None, marks["first"], marks["last"]) is None


def test_report_splits_loss_by_attempt_and_step_time_by_rank():
    from minihpc.ops.job_report import attempt_spans, loss_by_attempt, phases_by_rank

    series = [
        {"attempt": 1, "rank": 0, "step": 1, "at": 10.0, "loss": 2.0, "forward_seconds": 0.01, "data_seconds": 0.03},
        {"attempt": 1, "rank": 1, "step": 1, "at": 10.1, "loss": 2.2, "forward_seconds": 0.03},
        {"attempt": 2, "rank": 0, "step": 2, "at": 30.0, "loss": 1.5, "forward_seconds": 0.03, "data_seconds": 0.01},
    ]
    assert loss_by_attempt(series) == {"attempt 1": [(1.0, 2.0)], "attempt 2": [(2.0, 1.5)]}
    assert phases_by_rank(series) == {"rank 0": {"forward": pytest.approx(0.02), "data": pytest.approx(0.02)},
                                      "rank 1": {"forward": pytest.approx(0.03)}}
    assert attempt_spans(series) == [("attempt 1", 10.0, 10.1), ("attempt 2", 30.0, 30.0)]


def test_an_elastic_job_continued_on_the_nodes_left_and_the_drill_waits_until_it_grew_back():
    steps = {1: {"first": mark(1, -30), "last": mark(40, -0.1)}, 2: {"first": mark(41, 1.9), "last": mark(60, 9)}}
    shrunk = {"kind": "resized", "at": T + 0.2, "node": "worker-node-1", "job": 7, "nodes": 2, "was": 3, "grew": False}
    seen = [incident("down", 0.1), shrunk, incident("back", 0.5)]
    d = summarize(Drill("kill", "worker-node-1", 7, T, attempt=1, job_state="RUNNING"), seen, steps)
    assert (d.continued_on, d.resumed, d.resumed_from, d.steps_lost) == (2, pytest.approx(1.9), 40, 0)
    assert d.grew_back is None and not finished(d)  # the node is back; the job has not taken it yet
    grown = dict(shrunk, at=T + 12.5, nodes=3, was=2, grew=True)
    summarize(d, [*seen, grown], steps)
    assert d.grew_back == pytest.approx(12.5) and finished(d)
    text = format_drill(d)
    assert "continued on 2 nodes after 1.90s (job 7, no requeue, from step 40)" in text, text
    assert "grew back     12.50s" in text and "steps lost    0" in text
