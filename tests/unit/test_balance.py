"""Proportional batch sizes: the apportionment, when to re-split, the global-batch sampler, the
balancer's bookkeeping (with a fake gather), and the --profile STEPS parser."""

import argparse

import pytest

from minihpc.job import balance, profiling
from minihpc.job.balance import Balancer, GlobalBatchSampler, imbalance, plan, shares, should_rebalance


@pytest.mark.parametrize("speeds, batch, expected", [
    ([4, 2, 1], 28, [16, 8, 4]),          # exact
    ([410, 170, 85], 32, [20, 8, 4]),     # 19.73, 8.18, 4.09: the spare sample to the largest remainder
    ([1, 1, 1], 96, [32, 32, 32]),
    ([1, 1, 1], 10, [4, 3, 3]),           # a tie: the lower rank first
    ([1, 1, 1, 1], 6, [2, 2, 1, 1]),
    ([1.0], 7, [7]),
    ([1, 3, 2], 28, [5, 14, 9]),
])
def test_shares_are_proportional_and_sum_to_the_global_batch(speeds, batch, expected):
    assert shares(speeds, batch) == expected
    assert sum(expected) == batch


def test_shares_stay_within_one_sample_of_the_exact_quota():
    speeds = [1.7, 0.3, 2.9, 1.1, 0.61]
    for batch in range(23, 200):  # from 23 on no quota is below the minimum of 1
        got = shares(speeds, batch)
        assert sum(got) == batch
        for s, b in zip(speeds, got):
            assert abs(b - batch * s / sum(speeds)) < 1


def test_a_slow_rank_gets_the_minimum_and_the_rest_is_shared_again():
    assert shares([100, 1, 1], 12) == [10, 1, 1]
    assert shares([100, 1, 1], 12, minimum=3) == [6, 3, 3]
    assert shares([1000, 10, 1], 30, minimum=2) == [26, 2, 2]


def test_shares_are_deterministic_for_equal_inputs():
    speeds = [0.1 + 0.2, 0.3, 0.30000000000000004]
    assert shares(speeds, 10) == shares(list(speeds), 10)


@pytest.mark.parametrize("speeds, batch, minimum, message", [
    ([], 8, 1, "no speeds"),
    ([1, 0, 1], 8, 1, "speed of rank 1 is 0"),
    ([1, -2], 8, 1, "speed of rank 1 is -2"),
    ([1, float("nan")], 8, 1, "speed of rank 1 is nan"),
    ([1, float("inf")], 8, 1, "speed of rank 1 is inf"),
    ([1, 1, 1], 2, 1, "global batch 2 cannot give 3 ranks at least 1 each"),
    ([1, 1], 5, 3, "global batch 5 cannot give 2 ranks at least 3 each (needs 6)"),
    ([1, 1], 5, 0, "minimum batch 0 is below 1"),
])
def test_bad_input_is_refused_with_a_message(speeds, batch, minimum, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        shares(speeds, batch, minimum)


def test_should_rebalance_when_a_speed_moves_past_the_threshold():
    used = [400.0, 200.0, 100.0]
    assert not should_rebalance(used, [420, 190, 105], 0.1)
    assert should_rebalance(used, [400, 200, 111], 0.1)
    assert should_rebalance(used, [400, 179, 100], 0.1)
    assert not should_rebalance(used, used, 0.0)
    with pytest.raises(ValueError, match="2 speeds measured for 3 ranks"):
        should_rebalance(used, [1, 2], 0.1)
    with pytest.raises(ValueError, match="negative"):
        should_rebalance(used, used, -0.1)


def test_plan_waits_for_every_rank_then_follows_the_threshold():
    assert plan(None, [400, 0.0, 100], 28, 0.1) is None  # rank 1 not measured yet
    assert plan(None, [400, 200, 100], 28, 0.1) == [16, 8, 4]  # the first measurement decides
    assert plan([400, 200, 100], [410, 195, 100], 28, 0.1) is None
    assert plan([400, 200, 100], [400, 400, 100], 28, 0.1) == [13, 12, 3]


def test_plan_re_splits_while_the_current_split_leaves_ranks_waiting():
    # Speeds barely moved since the split (under the threshold), but at them the current split
    # gives rank 2 a step 1.5x as long as the others': the speeds alone would keep it.
    assert imbalance([16, 8, 6], [400, 200, 100]) == pytest.approx(0.5)
    assert plan([400, 200, 110], [400, 200, 100], 30, 0.1) is None
    assert plan([400, 200, 110], [400, 200, 100], 30, 0.1, current=[16, 8, 6]) == [17, 9, 4]
    assert plan([400, 200, 110], [400, 200, 100], 28, 0.1, current=[16, 8, 4]) is None  # equal times


def test_loss_weights_make_the_average_the_global_mean():
    split, world, batch = [16, 8, 4], 3, 28
    weights = [balance.loss_weight(b, batch, world) for b in split]
    # DDP averages: sum_r weight_r * mean_r / world must be sum_r (b_r / B) * mean_r.
    assert [w / world for w in weights] == pytest.approx([b / batch for b in split])
    assert balance.loss_weight(7, 7, 1) == 1.0


def test_own_seconds_leave_the_all_reduce_out():
    lap = {"data_seconds": 0.01, "forward_seconds": 0.02, "backward_seconds": 0.03,
           "allreduce_seconds": 5.0, "optimizer_seconds": 0.004, "samples_per_second": 1.0}
    assert balance.own_seconds(lap) == pytest.approx(0.064)


# The sampler


def batches(sampler, epoch=0, start=0):
    sampler.set_epoch(epoch, start)
    return list(sampler)


def global_sequence(size, batch, epoch, seed=0):
    import torch

    perm = torch.randperm(size, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    return [perm[s * batch:(s + 1) * batch] for s in range(size // batch)]


def test_every_rank_takes_its_slice_of_one_global_sequence():
    split = [6, 3, 1]
    ranks = [GlobalBatchSampler(105, 10, r, lambda: split, seed=7) for r in range(3)]
    for epoch in (0, 1):
        per_rank = [batches(s, epoch) for s in ranks]
        expected = global_sequence(105, 10, epoch, seed=7)
        assert len(ranks[0]) == 10 and all(len(b) == 10 for b in per_rank)  # the last 5 samples dropped
        for step, whole in enumerate(expected):
            assert per_rank[0][step] + per_rank[1][step] + per_rank[2][step] == whole
            assert [len(per_rank[r][step]) for r in range(3)] == split
    assert batches(ranks[0], 0) != batches(ranks[0], 1)  # a new order each epoch


def test_one_rank_yields_exactly_the_single_process_batches():
    sampler = GlobalBatchSampler(50, 8, 0, lambda: [8], seed=3)
    assert batches(sampler, 2) == global_sequence(50, 8, 2, seed=3)


def test_shares_are_read_as_each_batch_is_yielded():
    current = [[2, 2]]
    samplers = [GlobalBatchSampler(40, 4, r, lambda: current[0]) for r in range(2)]
    for s in samplers:
        s.set_epoch(0)
    iters = [iter(s) for s in samplers]
    got = [[], []]
    for step in range(10):
        if step == 4:
            current[0] = [3, 1]  # a re-balance between steps 4 and 5
        for r in range(2):
            got[r].append(next(iters[r]))
    whole = global_sequence(40, 4, 0)
    assert [len(b) for b in got[0]] == [2] * 4 + [3] * 6
    assert all(got[0][s] + got[1][s] == whole[s] for s in range(10))


def test_resume_starts_at_a_step_whatever_the_shares():
    before = GlobalBatchSampler(60, 6, 1, lambda: [3, 2, 1])
    after = GlobalBatchSampler(60, 6, 1, lambda: [1, 4, 1])
    whole = global_sequence(60, 6, 1)
    assert batches(after, 1, start=7) == [w[1:5] for w in whole[7:]]
    assert batches(before, 1, start=7) == [w[3:5] for w in whole[7:]]
    assert batches(after, 1, start=10) == []
    with pytest.raises(ValueError, match="step 11 is outside an epoch of 10 steps"):
        after.set_epoch(1, start=11)


def test_shares_that_do_not_add_up_are_refused():
    sampler = GlobalBatchSampler(20, 4, 0, lambda: [2, 1])
    with pytest.raises(ValueError, match=r"shares \[2, 1\] sum to 3, not the global batch 4"):
        batches(sampler)
    with pytest.raises(ValueError, match="no global batch of 30"):
        GlobalBatchSampler(20, 30, 0, lambda: [30])


# The balancer, with every rank's speed handed in by a fake gather


def fake_balancer(others, rank=0, **kwargs):
    """A balancer for rank ``rank`` of three whose gather returns ``others`` with its own value
    put in at ``rank``."""
    def gather(value):
        values = list(others)
        values[rank] = value
        return values
    return Balancer(28, rank, 3, gather=gather, **kwargs)


def test_the_balancer_starts_equal_or_from_given_speeds():
    assert fake_balancer([0, 0, 0]).shares == [10, 9, 9]
    b = fake_balancer([0, 0, 0], rank=2, speeds=[4, 2, 1])
    assert (b.shares, b.share, b.weight(), b.weight(16)) == ([16, 8, 4], 4, 3 * 4 / 28, 3 * 16 / 28)
    assert list(b.history) == [balance.Rebalance(0, (16, 8, 4), (4.0, 2.0, 1.0))]


def test_the_balancer_re_splits_every_few_steps_by_measured_speed():
    b = fake_balancer([0, 200.0, 100.0], every=10, threshold=0.1)
    for step in range(1, 10):
        b.observe(10, 10 / 400)  # 400 samples/s
        assert b.step(step) is None  # not a check step
    b.observe(10, 10 / 400)
    change = b.step(10)
    assert b.speed == pytest.approx(400)
    assert change == balance.Rebalance(10, (16, 8, 4), (pytest.approx(400), 200.0, 100.0))
    assert str(change) == "step 10: batch sizes 16/8/4 (speeds 400/200/100 samples/s)"
    b.observe(10, 10 / 430)  # within the threshold: kept
    assert b.step(20) is None and b.shares == [16, 8, 4]
    b.gather = lambda value: [400.0, 400.0, 200.0]  # ranks 1 and 2 doubled their speed
    assert b.step(30).shares == (11, 11, 6)
    assert [c.step for c in b.history] == [10, 30]


def test_the_balancer_waits_until_every_rank_has_a_speed():
    b = fake_balancer([0, 0.0, 100.0], every=1)
    b.observe(10, 0.1)
    assert b.step(1) is None and b.shares == [10, 9, 9]


def test_the_global_loss_is_the_mean_over_the_global_batch():
    b = Balancer(28, 0, 3, speeds=[4, 2, 1], gather=lambda value: [value, 0.5 * 8, 2.0 * 4])
    assert b.global_loss(1.0, 16) == pytest.approx((16 * 1.0 + 8 * 0.5 + 4 * 2.0) / 28)


def test_saved_shares_come_back_only_when_they_fit():
    b = fake_balancer([0, 0, 0], speeds=[4, 2, 1])
    fresh = fake_balancer([0, 0, 0])
    assert fresh.load_state_dict(b.state_dict()) and fresh.shares == [16, 8, 4]
    assert fresh.used_speeds == [4.0, 2.0, 1.0]
    other = Balancer(30, 0, 3, gather=lambda v: [v] * 3)
    assert not other.load_state_dict(b.state_dict()) and other.shares == [10, 10, 10]
    assert not fresh.load_state_dict({})
    assert fresh.load_state_dict({"shares": [14, 10, 4], "used_speeds": [1.0]}) and fresh.used_speeds is None


# --profile STEPS


@pytest.mark.parametrize("text, window", [
    ("5", profiling.Window(profiling.WARMUP + 1, profiling.WARMUP + 5, relative=True)),
    ("2:3", profiling.Window(2, 3)),
    (" 7 : 7 ", profiling.Window(7, 7)),
])
def test_profile_steps_parse(text, window):
    assert profiling.parse_steps(text) == window


@pytest.mark.parametrize("text", ["", "x", "0", "3:2", "0:4", "1:2:3", "-1", "1-3", "2:"])
def test_bad_profile_steps_give_one_line(text):
    with pytest.raises(ValueError, match="profile steps") as err:
        profiling.parse_steps(text)
    assert "\n" not in str(err.value)
    with pytest.raises(argparse.ArgumentTypeError):
        profiling.steps_argument(text)


def test_a_relative_window_counts_from_the_first_step_trained():
    window = profiling.parse_steps("2")
    assert window.anchored(1) == profiling.Window(profiling.WARMUP + 1, profiling.WARMUP + 2)
    assert window.anchored(101) == profiling.Window(profiling.WARMUP + 101, profiling.WARMUP + 102)
    assert profiling.Window(2, 3).anchored(50) == profiling.Window(2, 3)


def test_no_profiler_without_steps(monkeypatch, tmp_path):
    monkeypatch.delenv(profiling.ENV, raising=False)
    quiet = profiling.Profiler.configured(None, tmp_path)
    quiet.begin(1)
    assert quiet.end(1) is None and quiet.active is None and quiet.close() is None
    monkeypatch.setenv(profiling.ENV, "4:6")
    assert profiling.Profiler.configured(None, tmp_path, rank=2).window == profiling.Window(4, 6)
    monkeypatch.setenv(profiling.ENV, "soon")
    with pytest.raises(ValueError, match="profile steps 'soon'"):
        profiling.Profiler.configured(None, tmp_path)


def test_the_default_profile_directory_is_the_checkpoint_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIHPC_CHECKPOINT_DIR", str(tmp_path))
    assert profiling.default_directory() == tmp_path / "profile"
    monkeypatch.delenv("MINIHPC_CHECKPOINT_DIR")
    assert profiling.default_directory().name == "minihpc-profile"
    assert profiling.trace_name(2, 5, 9) == "profile-rank2-steps5-9.json"
