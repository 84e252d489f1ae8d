import pytest

from minihpc.validate import aggregate


def test_percentiles_interpolate_like_numpy():
    assert aggregate.percentile([], 50) is None
    assert aggregate.percentile([3.0], 95) == 3.0
    assert aggregate.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert aggregate.percentile(list(map(float, range(1, 101))), 95) == pytest.approx(95.05)


def rec(rank, step, loss, st, comp=1.0):
    return {"event": "step", "rank": rank, "step": step, "loss": loss, "local_loss": loss, "local_grad_norm": 1.0,
            "samples": 8, "step_time_ms": st, "compute_time_ms": comp, "data_time_ms": 0.5, "allreduce_time_ms": 2.0}


def records():
    return {
        0: [{"event": "start", "time": 100.0, "torch": "2.x", "minihpc": "0.1.0", "python": "3.11", "hostname": "n0"},
            rec(0, 0, 1.0, 10.0), rec(0, 1, 0.5, 20.0), {"event": "checksum", "step": 1, "digest": "aa"},
            {"event": "end", "time": 101.0}],
        1: [{"event": "start", "time": 100.2, "hostname": "n1"}, rec(1, 0, 1.0, 12.0, 3.0), rec(1, 1, 0.5, 18.0),
            {"event": "checksum", "step": 1, "digest": "aa"}, {"event": "end", "time": 101.5}],
    }


def test_per_step_takes_the_max_over_ranks_and_the_global_loss():
    run = aggregate.merge(records(), 2, {"steps": 2, "strategy": "ddp"})
    assert [s["step_time_ms"] for s in run["steps"]] == [12.0, 20.0]
    assert run["steps"][0]["compute_time_ms"] == 3.0 and run["steps"][0]["samples"] == 16
    assert run["steps"][0]["throughput_samples_per_sec"] == pytest.approx(16 / 0.012)
    assert run["per_rank"]["1"]["step_time_ms"] == [12.0, 18.0]
    assert run["checksums"] == {"1": {"0": "aa", "1": "aa"}}


def test_aggregates():
    run = aggregate.merge(records(), 2, {"steps": 2})
    assert (run["num_workers"], run["num_steps"]) == (2, 2)
    assert run["total_time_sec"] == pytest.approx(1.5)
    assert (run["average_loss"], run["final_loss"]) == (0.75, 0.5)
    assert run["total_allreduce_time_ms"] == 4.0
    assert run["average_throughput_samples_per_sec"] == pytest.approx(32 / 0.032)
    assert run["step_time_p50_ms"] == 16.0 and run["versions"]["torch"] == "2.x"
    assert {"hostname", "cpus", "platform"} <= set(run["machine"])
    assert run["machine"]["rank_hosts"] == {"0": "n0", "1": "n1"}  # where each rank ran (--cluster: its node)


def test_a_step_some_rank_did_not_finish_is_left_out():
    recs = records()
    recs[1] = [r for r in recs[1] if r.get("step") != 1 or r["event"] != "step"]
    assert [s["step"] for s in aggregate.merge(recs, 2, {})["steps"]] == [0]
