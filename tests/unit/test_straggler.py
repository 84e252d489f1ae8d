"""Straggler detection (minihpc.core.straggler): a rank's own compute time per step, smoothed,
against the median of the other ranks'."""

import pytest

from minihpc.core import straggler
from minihpc.ops.job_report import compute_by_rank


def report(rank, node, compute, step=1, attempt=1, allreduce=0.0):
    # compute split over the four own phases; the all-reduce (waiting) never counts
    part = compute / 4
    return {"step": step, "at": 1000.0 + step, "attempt": attempt, "node": node, "rank": float(rank),
            "data_seconds": part, "forward_seconds": part, "backward_seconds": part, "optimizer_seconds": part,
            "allreduce_seconds": allreduce}


def series(times: dict[int, list[float]], attempt=1):
    out = []
    for step in range(max(len(v) for v in times.values())):
        for rank, values in times.items():
            if step < len(values):
                out.append(report(rank, f"node-{rank}", values[step], step=step + 1, attempt=attempt,
                                  allreduce=0.3 if rank != 1 else 0.0))
    return out


def test_own_seconds_leaves_the_allreduce_out_and_needs_a_phase():
    assert straggler.own_seconds(report(0, "a", 0.2, allreduce=5.0)) == pytest.approx(0.2)
    assert straggler.own_seconds({"step": 1, "allreduce_seconds": 1.0}) is None
    assert straggler.own_seconds({"forward_seconds": float("nan"), "data_seconds": 0.1}) == pytest.approx(0.1)


def test_ewma_weights_the_newest_most():
    assert straggler.ewma([1.0]) == 1.0
    assert straggler.ewma([1.0, 2.0], alpha=0.5) == 1.5
    assert straggler.ewma([1.0] * 10 + [10.0]) == pytest.approx(1.0 + 0.3 * 9)


def test_a_rank_three_times_slower_is_named_with_its_node_and_ratio():
    paces = straggler.paces(series({0: [0.1] * 8, 1: [0.3] * 8, 2: [0.1] * 8}))
    assert [(p.rank, p.node, p.reports) for p in paces] == [(0, "node-0", 8), (1, "node-1", 8), (2, "node-2", 8)]
    slow = straggler.stragglers(paces)
    assert [(p.rank, p.node) for p in slow] == [(1, "node-1")]
    assert slow[0].ratio == pytest.approx(3.0) and slow[0].others == pytest.approx(0.1)


def test_equal_ranks_and_a_single_slow_step_are_not_stragglers():
    assert straggler.stragglers(straggler.paces(series({0: [0.1] * 8, 1: [0.11] * 8, 2: [0.1] * 8}))) == []
    for after in range(0, 5):  # one step 20x as long (a checkpoint, a page fault), then back to normal
        blip = [0.1] * (29 - after) + [2.0] + [0.1] * after
        assert straggler.stragglers(straggler.paces(series({0: [0.1] * 30, 1: blip, 2: [0.1] * 30}))) == [], after


def test_no_verdict_before_every_rank_has_enough_reports_or_with_one_rank():
    few = series({0: [0.1] * 8, 1: [0.5] * 8, 2: [0.1] * 3})
    assert straggler.stragglers(straggler.paces(few)) == []
    assert straggler.stragglers(straggler.paces(series({1: [0.5] * 8}))) == []


def test_two_ranks_compare_with_each_other():
    slow = straggler.stragglers(straggler.paces(series({0: [0.1] * 6, 1: [0.2] * 6})))
    assert [(p.rank, round(p.ratio, 6)) for p in slow] == [(1, 2.0)]


def test_only_the_given_attempt_counts_and_bad_reports_are_skipped():
    old = series({0: [0.1] * 8, 1: [0.9] * 8, 2: [0.1] * 8}, attempt=1)
    new = series({0: [0.1] * 8, 1: [0.1] * 8, 2: [0.1] * 8}, attempt=2)
    bad = [{"step": 1, "attempt": 2, "node": "x", "rank": "one", "forward_seconds": 9.0},
           {"step": 1, "attempt": 2, "rank": 3.0, "forward_seconds": 9.0},  # no node
           {"step": 1, "attempt": 2, "node": "y", "rank": 4.5, "forward_seconds": 9.0},
           {"step": 1, "attempt": 2, "node": "z", "rank": True, "forward_seconds": 9.0}]
    assert straggler.stragglers(straggler.paces(old + new + bad, attempt=2)) == []
    assert [p.rank for p in straggler.paces(old + new + bad, attempt=2)] == [0, 1, 2]
    assert [p.rank for p in straggler.stragglers(straggler.paces(old + new, attempt=1))] == [1]


def test_a_rank_that_slows_down_is_seen_within_a_few_reports():
    for slow_reports, named in ((1, False), (2, False), (3, True), (6, True)):
        times = {0: [0.1] * 30, 1: [0.1] * (30 - slow_reports) + [0.4] * slow_reports, 2: [0.1] * 30}
        assert [p.rank for p in straggler.stragglers(straggler.paces(series(times)))] == ([1] if named else []), \
            slow_reports


def test_the_report_plots_each_ranks_compute_by_step():
    lines = compute_by_rank(series({0: [0.1, 0.2], 1: [0.3, 0.4]}))
    assert list(lines) == ["rank 0 (node-0)", "rank 1 (node-1)"]
    assert lines["rank 1 (node-1)"] == [(1.0, pytest.approx(0.3)), (2.0, pytest.approx(0.4))]
