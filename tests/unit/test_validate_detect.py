import math

from minihpc.validate import detect


def test_ewma_straggler_names_the_slow_rank_and_when():
    compute = {0: [2.0] * 20, 1: [2.0] * 5 + [502.0] * 15, 2: [2.5] * 20}
    (d,) = detect.straggler(compute)
    assert (d["detector"], d["rank"], d["step"]) == ("straggler-ewma", 1, 5)


def test_one_descheduled_step_is_not_a_straggler():
    compute = {0: [2.0] * 20, 1: [2.0] * 5 + [900.0] + [2.0] * 14, 2: [2.5] * 20}
    assert detect.straggler(compute) == []


def test_a_uniformly_slow_machine_is_not_a_straggler():
    assert detect.straggler({0: [300.0] * 20, 1: [320.0] * 20, 2: [310.0] * 20}) == []
    assert detect.straggler({0: [5.0] * 3}) == []


def per_rank(grads, losses=None):
    return {str(r): {"local_grad_norm": g, "local_loss": (losses or {}).get(r, [0.1] * len(g)),
                     "compute_time_ms": [1.0] * len(g), "step_time_ms": [1.0] * len(g)} for r, g in grads.items()}


def test_non_finite_gradient_names_rank_and_step():
    (d,) = detect.non_finite(per_rank({0: [1.0, 1.0, math.nan], 1: [1.0, math.nan, math.nan]}))
    assert (d["ranks"], d["step"]) == ([1], 1) and "nan" in d["why"]
    (d,) = detect.non_finite(per_rank({0: [1.0, 1.0], 1: [1.0, 1.0]}, {0: [0.1, math.inf], 1: [0.1, 0.1]}))
    assert (d["ranks"], d["step"]) == ([0], 1) and "loss" in d["why"]
    assert detect.non_finite(per_rank({0: [1.0], 1: [1.0]})) == []


def test_checksum_majority_names_the_odd_rank():
    sums = {"4": {"0": "a", "1": "a", "2": "a"}, "9": {"0": "a", "1": "b", "2": "a"}}
    (d,) = detect.checksum_mismatch(sums)
    assert (d["ranks"], d["step"]) == ([1], 9)


def test_checksum_with_two_ranks_uses_the_reference_or_names_both():
    assert detect.odd_ranks({0: "a", 1: "b"}) == [0, 1]
    assert detect.odd_ranks({0: "a", 1: "b"}, reference="a") == [1]
    assert detect.odd_ranks({0: "a", 1: "a"}) == []


def test_timeout_names_the_rank_outside_the_allreduce():
    beats = {"0": {"step": 5, "phase": "allreduce"}, "1": {"step": 5, "phase": "compute"},
             "2": {"step": 5, "phase": "allreduce"}}
    (d,) = detect.step_mismatch(20, 5, True, beats)
    assert (d["detector"], d["rank"], d["step"]) == ("step-mismatch", 1, 5) and "5 of 20" in d["why"]
    assert detect.step_mismatch(20, 20, False, {}) == []
    (d,) = detect.step_mismatch(20, 3, False, {"0": {"step": 7, "phase": "done"}, "1": {"step": 3, "phase": "data"}})
    assert d["rank"] == 1


def test_loss_divergence_and_grad_norm_against_references():
    rows = [{"step": 0, "single": 1.0, "multi": 1.0, "abs_delta": 0.0, "rel_delta": 0.0, "pass": True},
            {"step": 1, "single": 1.0, "multi": 1.5, "abs_delta": 0.5, "rel_delta": 0.5, "pass": False}]
    (d,) = detect.loss_divergence(rows)
    assert d["step"] == 1 and "(50%)" in d["why"]
    (d,) = detect.grad_norm_deviation(per_rank({0: [1.0, 1.0], 1: [1.0, 9.0]}), per_rank({0: [1.0, 1.0], 1: [1.0, 1.0]}))
    assert (d["rank"], d["step"]) == (1, 1)
    assert detect.grad_norm_deviation(per_rank({0: [1.0]}), per_rank({0: [1.0 + 1e-12]})) == []


def steps(times, samples=48):
    return [{"step": i, "step_time_ms": t, "throughput_samples_per_sec": samples / (t / 1e3)} for i, t in enumerate(times)]


def test_throughput_drop_needs_half_speed_and_real_time_lost():
    clean = steps([10.0] * 15)
    (d,) = detect.throughput_drop(steps([300.0, 10.0] + [10.0] * 3 + [510.0] * 10), clean)
    assert d["step"] == 5 and "below 50%" in d["why"]
    assert detect.throughput_drop(steps([25.0] * 15), clean) == []  # 2.5x slower, 15 ms: scheduler noise
    # A step a busy machine slowed (150 ms late) just before the fault (500 ms a step) is not its start.
    (d,) = detect.throughput_drop(steps([10.0] * 4 + [160.0] + [510.0] * 10), clean)
    assert d["step"] == 5, d
    assert detect.onset([]) == 0 and detect.onset([150.0, 500.0, 500.0]) == 1
    assert detect.throughput_drop(steps([10.0] * 15), clean) == []


def test_first_prefers_the_earliest_step_then_a_named_rank():
    ds = [detect.detection("a", None, 3, ""), detect.detection("b", [1], 3, ""), detect.detection("c", [2], 5, "")]
    assert detect.first(ds)["detector"] == "b"
    assert detect.first([]) is None
