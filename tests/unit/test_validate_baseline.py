import json
import math

import pytest

from minihpc.validate import baseline

RUN = {"average_loss": 0.2, "final_loss": 0.1, "average_throughput_samples_per_sec": 1000.0,
       "total_allreduce_time_ms": 50.0, "step_time_p50_ms": 10.0, "step_time_p95_ms": 20.0,
       "config": {"workers": 2, "steps": 20, "seed": 42}}


def base(*runs):
    b = None
    for i, r in enumerate(runs):
        b = baseline.add_run(b, "stable_v1", baseline.entry(r, f"run{i}.json", float(i)))
    return b


def test_spread_is_twice_the_relative_std_or_the_range():
    assert baseline.spread_pct([10.0]) == 0.0
    assert math.isclose(baseline.spread_pct([9.0, 11.0]), max(200 * 1.4142135 / 10, 20.0), rel_tol=1e-6)


def test_no_regression_for_the_same_run():
    rep = baseline.compare(base(RUN), RUN, 5.0, 5.0)
    assert rep["verdict"] == "OK" and baseline.exit_code(rep) == 0 and len(rep["rows"]) == 6


def test_slower_beyond_threshold_regresses_faster_does_not():
    slower = {**RUN, "step_time_p50_ms": 11.0}
    assert baseline.compare(base(RUN, RUN, RUN), slower, 5.0, 5.0)["regressions"] == ["step_time_p50_ms"]
    faster = {**RUN, "step_time_p50_ms": 5.0, "average_throughput_samples_per_sec": 2000.0}
    assert baseline.compare(base(RUN, RUN, RUN), faster, 5.0, 5.0)["regressions"] == []
    lower_tp = {**RUN, "average_throughput_samples_per_sec": 900.0}
    rep = baseline.compare(base(RUN, RUN, RUN), lower_tp, 5.0, 5.0)
    assert rep["regressions"] == ["average_throughput_samples_per_sec"] and baseline.exit_code(rep) == 1


def test_the_users_threshold_judges_even_a_fresh_baseline():
    # the spec's CI gate, "fail if throughput drops more than 5%": a 30% drop fails against one run
    drop = {**RUN, "average_throughput_samples_per_sec": 700.0}
    rep = baseline.compare(base(RUN), drop, 5.0, 5.0)
    assert rep["regressions"] == ["average_throughput_samples_per_sec"] and baseline.exit_code(rep) == 1
    assert {r["allowed_pct"] for r in rep["rows"] if r["metric"] not in ("average_loss", "final_loss")} == {5.0}
    assert baseline.compare(base(RUN, RUN), {**RUN, "step_time_p50_ms": 10.6}, 5.0, 5.0)["regressions"] == [
        "step_time_p50_ms"]
    assert baseline.compare(base(RUN), {**RUN, "average_throughput_samples_per_sec": 960.0}, 5.0, 5.0)["regressions"] == []


def test_allow_spread_widens_a_fresh_baseline_to_the_unmeasured_drift_of_timings_not_of_losses():
    drifted = {**RUN, "step_time_p50_ms": 13.0, "average_throughput_samples_per_sec": 700.0}
    rep = baseline.compare(base(RUN, RUN), drifted, 5.0, 5.0, allow_spread=True)
    assert rep["regressions"] == [] and {r["allowed_pct"] for r in rep["rows"] if r["metric"] != "final_loss"} >= {35.0}
    assert baseline.compare(base(RUN), {**RUN, "step_time_p50_ms": 14.0}, 5.0, 5.0, allow_spread=True)["regressions"] == [
        "step_time_p50_ms"]
    assert baseline.compare(base(RUN), {**RUN, "final_loss": 0.1001}, 5.0, 5.0, allow_spread=True)["regressions"] == [
        "final_loss"]
    assert baseline.compare(base(RUN, RUN, RUN), drifted, 5.0, 5.0, allow_spread=True)["regressions"] == [
        "average_throughput_samples_per_sec", "step_time_p50_ms"]


def test_allow_spread_widens_the_threshold_to_the_baselines_own_spread():
    noisy = base(RUN, {**RUN, "step_time_p50_ms": 12.0})  # the baseline itself wobbles 20%
    assert baseline.compare(noisy, {**RUN, "step_time_p50_ms": 12.0}, 5.0, 5.0)["regressions"] == ["step_time_p50_ms"]
    assert baseline.compare(noisy, {**RUN, "step_time_p50_ms": 12.0}, 5.0, 5.0, allow_spread=True)["regressions"] == []
    assert baseline.compare(noisy, {**RUN, "step_time_p50_ms": 15.0}, 5.0, 5.0, allow_spread=True)["regressions"] == [
        "step_time_p50_ms"]


def test_allowance_is_the_threshold_unless_asked():
    assert baseline.allowance("lower", 5.0, [10.0], False) == (5.0, 5.0)
    assert baseline.allowance("lower", 5.0, [10.0], True) == (5.0, baseline.UNMEASURED_SPREAD_PCT)
    assert baseline.allowance("loss", 5.0, [0.1, 0.1, 0.1], True) == (baseline.LOSS_RTOL * 100,) * 2
    with pytest.raises(baseline.BaselineError, match="--throughput-threshold -1"):
        baseline.compare(base(RUN), RUN, 5.0, -1)


def test_losses_allow_no_change_either_way():
    for loss in (0.1 * (1 + 1e-5), 0.1 * (1 - 1e-5), float("nan")):
        assert baseline.compare(base(RUN), {**RUN, "final_loss": loss}, 50.0, 50.0)["regressions"] == ["final_loss"]
    assert baseline.compare(base(RUN), {**RUN, "final_loss": 0.1 * (1 + 1e-9)}, 5.0, 5.0)["regressions"] == []


def test_a_baseline_keeps_the_newest_ten_runs():
    b = base(*[{**RUN, "step_time_p50_ms": float(i)} for i in range(13)])
    assert len(b["runs"]) == baseline.MAX_RUNS and b["runs"][0]["metrics"]["step_time_p50_ms"] == 3.0


def test_save_appends_and_load_reads(tmp_path):
    baseline.save(tmp_path, "stable_v1", RUN, "a.json")
    saved = baseline.save(tmp_path, "stable_v1", RUN, "b.json")
    assert [r["source"] for r in saved["runs"]] == ["a.json", "b.json"]
    assert saved["runs"][0]["saved_at"].endswith("Z") and isinstance(saved["runs"][0]["saved_at_unix"], float)
    assert baseline.load(tmp_path, "stable_v1") == json.loads((tmp_path / "stable_v1.json").read_text())


@pytest.mark.parametrize("name", ["../x", "", ".hidden", "a b"])
def test_bad_names_are_errors(tmp_path, name):
    with pytest.raises(baseline.BaselineError):
        baseline.path_of(tmp_path, name)


def test_missing_and_unreadable_files_are_baseline_errors(tmp_path):
    with pytest.raises(baseline.BaselineError, match="no baseline named 'nope'"):
        baseline.load(tmp_path, "nope")
    with pytest.raises(baseline.BaselineError, match="does not exist"):
        baseline.load_metrics(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(baseline.BaselineError, match="not readable JSON"):
        baseline.load_metrics(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(baseline.BaselineError, match="not a run report"):
        baseline.load_metrics(tmp_path / "other.json")


def test_table_shows_arrow_delta_and_marks():
    text = baseline.format_table(baseline.compare(base(RUN), {**RUN, "step_time_p95_ms": 30.0}, 5.0, 5.0))
    assert "step_time_p95_ms" in text and "20 → 30 (+50.00%)  ✗ REGRESS" in text and "✓" in text


def _cli(argv):
    import argparse

    from minihpc.cli.validate import add_parsers
    from minihpc.core.config import Settings

    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args, Settings())


def test_cli_applies_the_threshold_and_allow_spread_on_request(tmp_path, capsys):
    good, drop = tmp_path / "run.json", tmp_path / "drop.json"
    good.write_text(json.dumps(RUN))
    drop.write_text(json.dumps({**RUN, "average_throughput_samples_per_sec": 700.0}))
    d = ["--baseline-dir", str(tmp_path / "b")]
    assert _cli(["validate", "baseline", "save", "--metrics", str(good), "--name", "v1", *d]) == 0
    assert _cli(["validate", "baseline", "compare", "--metrics", str(drop), "--name", "v1", *d]) == 1
    assert _cli(["validate", "baseline", "compare", "--metrics", str(drop), "--name", "v1", *d, "--allow-spread"]) == 0
    out = capsys.readouterr().out
    assert "Throughput threshold:        5.0%" in out and "Spread allowance:            on (--allow-spread)" in out


def test_cli_exit_codes_0_1_2(tmp_path, capsys):
    good, slow = tmp_path / "run.json", tmp_path / "slow.json"
    good.write_text(json.dumps(RUN))
    slow.write_text(json.dumps({**RUN, "step_time_p95_ms": 40.0}))
    d = ["--baseline-dir", str(tmp_path / "b")]
    assert _cli(["validate", "baseline", "save", "--metrics", str(good), "--name", "v1", *d]) == 0
    assert _cli(["validate", "baseline", "compare", "--metrics", str(good), "--name", "v1", *d]) == 0
    out = tmp_path / "cmp.json"
    assert _cli(["validate", "baseline", "compare", "--metrics", str(slow), "--name", "v1", *d, "--output", str(out)]) == 1
    assert json.loads(out.read_text())["regressions"] == ["step_time_p95_ms"]
    assert _cli(["validate", "baseline", "compare", "--metrics", str(good), "--name", "v2", *d]) == 2
    assert _cli(["validate", "baseline", "compare", "--metrics", str(tmp_path / "x.json"), "--name", "v1", *d]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("minihpc validate baseline compare: error: ") for line in err)
