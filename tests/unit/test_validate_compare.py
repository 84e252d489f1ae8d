import math

from minihpc.validate import compare


def run(losses, workers=1):
    return {"num_workers": workers, "strategy": "ddp", "steps": [{"step": i, "loss": v} for i, v in enumerate(losses)]}


def test_equal_runs_pass_with_zero_delta():
    rep = compare.report(run([1.0, 0.5, 0.25]), run([1.0, 0.5, 0.25], 4), 1e-5)
    assert rep["verdict"] == "PASS" and rep["max_abs_delta"] == 0.0 and rep["steps_compared"] == 3


def test_a_step_beyond_tolerance_fails_and_is_named():
    rep = compare.report(run([1.0, 0.5, 0.25]), run([1.0, 0.52, 0.25]), 0.01)
    assert rep["verdict"] == "FAIL" and rep["failed_steps"] == [1]
    assert math.isclose(rep["max_abs_delta"], 0.02) and rep["max_delta_step"] == 1
    row = rep["steps"][1]
    assert math.isclose(row["rel_delta"], 0.04) and row["pass"] is False


def test_nan_loss_fails_its_step():
    rows = compare.compare_losses(run([1.0, 0.5])["steps"], run([1.0, float("nan")])["steps"], 1.0)
    assert [r["pass"] for r in rows] == [True, False]


def test_missing_steps_fail_the_verdict():
    rep = compare.report(run([1.0, 0.5, 0.25]), run([1.0, 0.5]), 0.01)
    assert rep["verdict"] == "FAIL" and rep["steps_in_one_run_only"] == [2] and not rep["failed_steps"]


def test_readable_report_and_plots(tmp_path):
    rep = compare.report(run([1.0, 0.5, 0.25]), run([1.0, 0.5, 0.26], 2), 0.001)
    text = compare.format_report(rep)
    assert "1 vs 2 workers" in text and "FAIL" in text and "✗" in text
    paths = compare.plot(rep, tmp_path / "loss.png")
    assert [p.name for p in paths] == ["loss.png", "loss-delta.png"] and all(p.stat().st_size > 0 for p in paths)


def test_the_report_says_what_a_parameter_server_left_out():
    ps = dict(run([1.0, 0.6], 2), strategy="parameter-server",
              parameter_server={"timeout_sec": 0.15, "skipped_total": 3, "steps_with_skips": 2, "steps": 2})
    rep = compare.report(run([1.0, 0.5]), ps, 0.01)
    assert rep["multi"]["parameter_server"] == {"timeout_sec": 0.15, "skipped_total": 3, "steps_with_skips": 2}
    assert "single" in rep and "parameter_server" not in rep["single"]
    assert ("multi run: parameter server, 3 worker-step(s) left out of the average by its 0.15 s timeout in 2 "
            "step(s) -- the losses cannot match there") in compare.format_report(rep)
