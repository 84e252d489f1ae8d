"""The validator's contract with specs/validator.md and specs/parameter-server.md, decision by
decision: relative vs absolute tolerance, the reports' keys and ISO-8601 timestamps, the output
path check, the parameter-server config's keys, and the ``minicluster`` command's parser.
(The baseline rule -- the user's threshold, the spread only on request -- is in
test_validate_baseline.py.)"""

import datetime
import json
import shlex
import tomllib
from pathlib import Path

import pytest

from minihpc.core.errors import MinihpcError, UsageError
from minihpc.validate import aggregate, compare, config, faulttest, outputs, psconfig, runner
from minihpc.validate.records import iso_utc

ROOT = Path(__file__).resolve().parents[2]


def run(losses, workers=1):
    return {"num_workers": workers, "strategy": "ddp", "steps": [{"step": i, "loss": v} for i, v in enumerate(losses)]}


# --- tolerance: relative as in the spec, absolute on request ---------------------------------

def test_tolerance_is_relative_by_default_and_absolute_only_when_asked():
    assert compare.tolerances(None, None) == (0.01, None)
    assert compare.tolerances(0.02, None) == (0.02, None)
    assert compare.tolerances(None, 1e-3) == (None, 1e-3)
    assert compare.tolerances(0.01, 1e-3) == (0.01, 1e-3)
    for bad in ((-0.1, None), (None, float("nan")), (float("inf"), None)):
        with pytest.raises(UsageError):
            compare.tolerances(*bad)


def test_a_relative_tolerance_scales_with_the_loss():
    # losses near 10: a 0.05 delta is 0.5% -- within 1% relative, beyond 0.01 absolute
    single, multi = run([10.0, 10.0]), run([10.0, 10.05])
    assert compare.report(single, multi, 0.01)["verdict"] == "PASS"
    assert compare.report(single, multi, None, 0.01)["verdict"] == "FAIL"
    assert compare.report(single, multi, 0.01, 0.01)["verdict"] == "FAIL"  # both given: both kept
    # losses near 0.1: a 0.005 delta is 5% -- beyond 1% relative, within 0.01 absolute
    small = compare.report(run([0.1]), run([0.105]), 0.01)
    assert small["verdict"] == "FAIL" and small["steps"][0]["pct_delta"] == pytest.approx(5.0)
    assert compare.report(run([0.1]), run([0.105]), None, 0.01)["verdict"] == "PASS"


def test_compare_losses_keeps_its_absolute_positional_argument():
    rows = compare.compare_losses(run([1.0])["steps"], run([1.004])["steps"], 0.005)
    assert rows[0]["pass"] and not compare.compare_losses(run([1.0])["steps"], run([1.004])["steps"], rtol=0.001)[0]["pass"]


def test_the_report_says_the_tolerance_as_the_spec_does():
    assert compare.tolerance_text(0.01, None) == "1.00%"
    assert compare.tolerance_text(0.05, None) == "5.00%"
    assert compare.tolerance_text(1e-5, None) == "0.001%"
    assert compare.tolerance_text(None, 0.01) == "0.01 absolute"
    assert compare.tolerance_text(0.01, 1e-3) == "1.00% and 0.001 absolute"
    rep = compare.report(run([1.0, 0.5, 0.25]), run([1.0, 0.5, 0.25], 2), 0.01, paths=("s.json", "m.json"))
    text = compare.format_report(rep)
    for line in ("CORRECTNESS VALIDATION REPORT", "Single-process run: s.json", "Multi-process run:  m.json",
                 "Tolerance:          1.00%", "Steps compared:     3", "  Passed:           3", "  Failed:           0",
                 "RESULT: ✓ PASSED: All 3 steps passed correctness check within 1.00% tolerance"):
        assert line in text.splitlines(), line
    assert (rep["passed"], rep["steps_passed"], rep["steps_failed"], rep["tolerance_pct"]) == (True, 3, 0, 1.0)
    failed = compare.format_report(compare.report(run([1.0, 0.5]), run([1.0, 0.6]), 0.01))
    assert "RESULT: ✗ FAILED: 1 of 2 steps failed correctness check at 1.00% tolerance" in failed


# --- reports: the spec's keys, ISO-8601 timestamps ---------------------------------------

def test_iso_timestamps_are_utc_seconds_that_parse_back():
    assert iso_utc(0.0) == "1970-01-01T00:00:00Z" and iso_utc(None) is None
    stamp = iso_utc(1705314600.9)
    assert stamp == "2024-01-15T10:30:00Z"
    assert datetime.datetime.fromisoformat(stamp).timestamp() == 1705314600


def test_the_run_report_has_iso_timestamps_and_keeps_the_epoch_floats():
    records = {0: [{"event": "start", "time": 1705314600.0},
                   {"event": "step", "step": 0, "loss": 1.0, "local_loss": 1.0, "local_grad_norm": 1.0, "samples": 8,
                    "step_time_ms": 10.0, "compute_time_ms": 1.0, "data_time_ms": 0.5, "allreduce_time_ms": 2.0},
                   {"event": "eval", "step": 0, "loss": 0.7, "eval_time_ms": 1.0},
                   {"event": "end", "time": 1705314642.0}]}
    rep = aggregate.merge(records, 1, {"steps": 1})
    assert (rep["start_timestamp"], rep["end_timestamp"]) == ("2024-01-15T10:30:00Z", "2024-01-15T10:30:42Z")
    assert (rep["start_time_unix"], rep["total_time_sec"]) == (1705314600.0, 42.0)
    assert rep["eval"] == [{"step": 0, "test_loss": 0.7, "eval_time_ms": 1.0}]


def _outcomes():
    found = [{"detector": "straggler-ewma", "rank": 1, "ranks": [1], "step": 4, "why": "rank 1 is slow"}]
    return [faulttest.outcome("slow", 1, 4, found), faulttest.outcome("grad-noise", 1, 4, []),
            faulttest.outcome("hang", 1, 4, [{**found[0], "detector": "step-mismatch"}])]


def test_the_fault_report_has_the_specs_keys_and_keeps_its_own():
    report = faulttest.summarize(_outcomes(), [{"seed": 42, "detections": []}])
    assert (report["num_faults"], report["num_detected"], report["num_missed"]) == (3, 2, 1)
    assert (report["injected"], report["detected"], report["located"]) == (3, 2, 2)  # today's keys stay
    assert report["num_detected"] / report["num_faults"] == report["detection_rate"]
    assert report["summary"] == "Fault injection testing complete: 2/3 faults detected, 1 missed"
    slow, noise, hang = report["faults"]
    assert [o["fault_type"] for o in report["faults"]] == ["SLOW_WORKER", "GRADIENT_SYNC_ANOMALY", "WORKER_TIMEOUT"]
    assert (slow["affected_rank"], slow["detected"], slow["reason"]) == (1, True, "Detected via straggler-ewma: rank 1 is slow")
    assert (noise["detected"], noise["reason"]) == (False, "no detector fired")
    assert set(faulttest.FAULT_TYPES) == set(faulttest.EXPECTED)
    text = faulttest.format_table(report)
    for line in ("FAULT INJECTION TEST REPORT", "Total faults tested:  3", "Faults detected:      2",
                 "Faults missed:        1", "Detection rate:       66.7%", "SLOW_WORKER: ✓ DETECTED", "  Affected rank: 1",
                 "GRADIENT_SYNC_ANOMALY: ✗ MISSED", "SUMMARY: Fault injection testing complete: 2/3 faults detected, 1 missed"):
        assert line in text.splitlines(), line


def test_fault_test_stamps_its_report_and_judges_losses_relatively():
    def execute(cfg):
        loss = 1.0 if cfg.get("inject") != "grad-noise" else 1.02  # 2% off the single-process loss
        steps = [{"step": i, "loss": loss, "step_time_ms": 10.0, "throughput_samples_per_sec": 100.0}
                 for i in range(cfg["steps"])]
        per_rank = {str(r): {"local_grad_norm": [1.0] * cfg["steps"], "local_loss": [loss] * cfg["steps"],
                             "compute_time_ms": [1.0] * cfg["steps"], "step_time_ms": [10.0] * cfg["steps"]}
                    for r in range(cfg["workers"])}
        return {"steps": steps, "per_rank": per_rank, "detections": [], "final_loss": loss}

    opts = {"steps": 6, "seeds": "42", "faults": "grad-noise", "workers": 2, "batch_size": 4}
    report = faulttest.run_all({**opts, "tolerance": 0.01}, execute)
    assert report["num_detected"] == 1 and report["faults"][0]["detectors"] == ["loss-divergence"]
    assert report["start_timestamp"].endswith("Z") and report["end_time_unix"] >= report["start_time_unix"]
    assert faulttest.run_all({**opts, "tolerance": 0.05}, execute)["num_detected"] == 0
    assert faulttest.run_all({**opts, "abs_tolerance": 0.01}, execute)["num_detected"] == 1


# --- output paths: checked, and their folder made, before any work ------------------------

def test_output_problems_are_one_line_each():
    ok = outputs.Probe()
    assert outputs.problem("--output", "r/x.json", ok) is None
    assert outputs.problem("--output", "r", outputs.Probe(is_dir=True)) == (
        "--output r is a folder; give a file name, e.g. r/report.json")
    assert outputs.problem("--output", "/ro/x.json", outputs.Probe(made_error="Permission denied")) == (
        "--output /ro/x.json: cannot make its folder /ro (Permission denied)")
    assert outputs.problem("--output", "/ro/x.json", outputs.Probe(write_error="Read-only file system")) == (
        "--output /ro/x.json: cannot write in /ro (Read-only file system)")
    assert outputs.problem("--tensorboard", "tb", outputs.Probe(write_error="Permission denied"), want_dir=True) == (
        "--tensorboard tb: cannot write in tb (Permission denied)")


def test_prepare_makes_the_folder_and_refuses_what_cannot_be_written(tmp_path):
    outputs.prepare("--output", tmp_path / "results" / "deep" / "x.json")
    assert (tmp_path / "results" / "deep").is_dir() and not list((tmp_path / "results" / "deep").iterdir())
    (tmp_path / "afile").write_text("")
    with pytest.raises(UsageError, match="afile is a file, not a folder"):
        outputs.prepare("--output", tmp_path / "afile" / "x.json")
    with pytest.raises(UsageError, match="is a folder"):
        outputs.prepare("--output", tmp_path / "results")
    with pytest.raises(UsageError, match="cannot make its folder"):
        outputs.prepare("--output", "/proc/no-such-dir/x.json")
    outputs.prepare("--output", None)


def test_a_report_that_cannot_be_written_is_saved_elsewhere_and_said_so(tmp_path, monkeypatch):
    def refuse(path, data):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(outputs, "write_json", refuse)
    with pytest.raises(MinihpcError, match=r"cannot write .*x.json \(Permission denied\); the report was saved to") as err:
        outputs.write_report(tmp_path / "x.json", {"num_steps": 3})
    rescued = Path(str(err.value).rsplit(" ", 1)[1])
    assert json.loads(rescued.read_text()) == {"num_steps": 3}
    rescued.unlink()


def _main(argv):
    from minihpc.validate.minicluster import main

    return main([str(a) for a in argv])


def test_run_refuses_an_unwritable_output_before_training(monkeypatch, capsys):
    monkeypatch.setattr(runner, "execute", lambda *a, **k: pytest.fail("trained before checking --output"))
    assert _main(["run", "--workers", "2", "--steps", "100", "--output", "/proc/no-such-dir/x.json"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["minicluster run: error: --output /proc/no-such-dir/x.json: cannot make its folder "
                   "/proc/no-such-dir (No such file or directory)"]


# --- the parameter-server config: the spec's keys, and nothing else -------------------------

NN_CONFIG = """\
batch_size: 32
learning_rate: 0.001
num_epochs: 2
eval_steps: 200        # Evaluate every N steps
track_gradients: true  # Log gradient norms to W&B
model:
  type: SimpleNN
  input_dim: 784
  hidden: 128
  out: 10
dataset:
  name: MNIST
"""
"""specs/parameter-server.md, "nn_config.yaml", verbatim."""

CLUSTER_CONFIG = """\
host_ip: "0.0.0.0"          # Server bind address (0.0.0.0 = all interfaces)
worker_connect_ip: "172.18.3.80"  # IP address workers use to connect to server
port: 65432                  # TCP port for communication
num_workers: 2               # Number of worker nodes to expect
timeout: 0.1                 # Timeout for gradient collection (seconds)
"""
"""specs/parameter-server.md, "cluster_config.yaml", verbatim."""


def test_the_specs_keys_translate_to_flags():
    import yaml

    values, names, unknown = psconfig.translate(yaml.safe_load(NN_CONFIG))
    assert unknown == [] and values == {
        "batch_size": 32, "lr": 0.001, "epochs": 2, "eval_steps": 200, "track_gradients": True, "model": "mlp",
        "in_features": 784, "hidden": "128", "out_features": 10, "workload": "mnist"}
    assert names["lr"] == "learning_rate" and names["in_features"] == "model.input_dim"
    values, _, unknown = psconfig.translate(yaml.safe_load(CLUSTER_CONFIG))
    assert unknown == [] and values == {"ps_host": "0.0.0.0", "ps_connect": "172.18.3.80", "ps_port": 65432,
                                        "workers": 2, "ps_timeout": 0.1}
    with pytest.raises(UsageError, match="model.type: 'ResNet' is not a model"):
        psconfig.translate({"model": {"type": "ResNet"}})


@pytest.mark.parametrize("name", ["nn_config.yaml", "cluster_config.yaml"])
def test_run_reads_both_spec_files_as_written(tmp_path, name):
    path = tmp_path / name
    path.write_text(NN_CONFIG if name == "nn_config.yaml" else CLUSTER_CONFIG)
    cfg = config.resolve({}, config.load(path, "run"), runner.RUN_DEFAULTS)
    if name == "nn_config.yaml":
        assert (cfg["lr"], cfg["epochs"], cfg["eval_steps"], cfg["workload"], cfg["hidden"]) == (0.001, 2, 200, "mnist", "128")
    else:
        assert (cfg["workers"], cfg["ps_timeout"], cfg["ps_port"], cfg["ps_connect"]) == (2, 0.1, 65432, "172.18.3.80")


def test_unknown_keys_are_refused_all_in_one_line(tmp_path):
    path = tmp_path / "nn_config.yaml"
    path.write_text(NN_CONFIG + "learnig_rate: 3\noptimizer:\n  name: sgd\n" + "dataset_extra: 1\n")
    path.write_text(path.read_text().replace("  out: 10\n", "  out: 10\n  dropout: 0.1\n"))
    with pytest.raises(UsageError) as err:
        config.resolve({}, config.load(path, "run"), runner.RUN_DEFAULTS)
    message = str(err.value)
    assert "\n" not in message and message.startswith(
        f"config {path} sets dataset_extra, learnig_rate, model.dropout, optimizer, which are not flags of this command")
    # a table named after another subcommand is fine; one named after none is not
    path = tmp_path / "v.toml"
    path.write_text("steps = 3\n[fault-test]\nworkers = 3\n[fualt-test]\nworkers = 3\n")
    with pytest.raises(UsageError, match="sets fualt-test, which is not a flag"):
        config.resolve({}, config.load(path, "run"), runner.RUN_DEFAULTS)


def test_values_must_have_the_flags_type(tmp_path):
    from minihpc.validate.minicluster import build_parser

    types = build_parser().parse_args(["run"]).flag_types
    assert types["epochs"] is int and types["in_features"] is int
    path = tmp_path / "c.yaml"
    for text, problem in (("learning_rate: abc\n", "learning_rate is 'abc'; expected a number"),
                          ("num_epochs: 1.5\n", "num_epochs is 1.5; expected an integer"),
                          ("track_gradients: maybe\n", "track_gradients is 'maybe'; expected true or false"),
                          ("model:\n  input_dim: x\n", "model.input_dim is 'x'; expected an integer")):
        path.write_text(text)
        with pytest.raises(UsageError, match=problem):
            config.resolve({}, config.load(path, "run"), runner.RUN_DEFAULTS, types)
    path.write_text("model:\n  hidden: [64, 32]\nseed: 7\n")
    assert config.resolve({}, config.load(path, "run"), runner.RUN_DEFAULTS)["hidden"] == "64,32"


def test_epochs_set_the_steps_and_one_source_gives_one_of_the_two(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("num_epochs: 2\nbatch_size: 32\n")
    cfg = runner.settle(config.resolve({}, config.load(path, "run"), runner.RUN_DEFAULTS))
    assert cfg["steps"] == 2 * 4096 // 32
    flag_wins = runner.settle(config.resolve({"steps": 5}, config.load(path, "run"), runner.RUN_DEFAULTS))
    assert (flag_wins["steps"], flag_wins["epochs"]) == (5, None)
    with pytest.raises(UsageError, match="--steps and --epochs both given"):
        config.resolve({"steps": 5, "epochs": 1}, {}, runner.RUN_DEFAULTS)
    path.write_text("steps: 3\nnum_epochs: 1\n")
    with pytest.raises(UsageError, match="sets both steps and num_epochs"):
        config.resolve({}, config.load(path, "run"), runner.RUN_DEFAULTS)


def test_the_model_keys_must_fit_the_workload():
    ok = runner.settle({"model": "mlp", "hidden": "128", "out_features": 1})
    assert ok["hidden"] == "128"
    for bad, match in (({"model": "net"}, "MNIST CNN"), ({"out_features": 10}, "model.out 10"),
                       ({"eval_steps": -1}, "--eval-steps must be at least 0"), ({"ps_port": 70000}, "not a TCP port"),
                       ({"ps_timeout": 0}, "--ps-timeout must be a positive")):
        with pytest.raises(UsageError, match=match):
            runner.settle(bad)


# --- the spec's command lines parse, and both faces share them ------------------------------

SPEC_LINES = [
    "run --workers 1 --steps 100 --batch-size 32 --output single_process.json",
    "validate single_process.json multi_process.json --tolerance 0.01 --output validation_report.json",
    "fault-test --steps 50 --tolerance 0.01 --output fault_report.json",
    "baseline save --metrics multi_process.json --name stable_v1 --baseline-dir .minicluster/baselines",
    "baseline compare --metrics current_run.json --name stable_v1 --latency-threshold 5.0 "
    "--throughput-threshold 5.0 --output comparison_report.json",
    "run --workers 2 --steps 100 --seed 999",
    "validate s.json m.json --tolerance 0.05",
]


@pytest.mark.parametrize("line", SPEC_LINES)
def test_the_specs_command_lines_parse(line):
    from minihpc.validate.minicluster import BASELINE_DIR, build_parser

    args = build_parser().parse_args(shlex.split(line))
    assert callable(args.func) and args.face == "minicluster"
    if line.startswith("baseline"):
        assert args.default_baseline_dir == BASELINE_DIR == Path(".minicluster/baselines")


def test_minihpc_validate_keeps_its_names_and_baseline_folder():
    from minihpc.cli.main import build_parser
    from minihpc.validate import baseline

    parser = build_parser()
    args = parser.parse_args(["validate", "compare", "a.json", "b.json", "--tolerance", "1e-5"])
    assert args.tolerance == 1e-5 and args.face == "minihpc validate"
    assert parser.parse_args(["validate", "validate", "a.json", "b.json", "--abs-tolerance", "0.01"]).abs_tolerance == 0.01
    args = parser.parse_args(["validate", "baseline", "compare", "--metrics", "x", "--name", "n", "--allow-spread"])
    assert args.allow_spread is True and args.default_baseline_dir == baseline.DEFAULT_DIR


def test_pyproject_declares_the_minicluster_script():
    import importlib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["minicluster"].partition(":")
    assert (module, name) == ("minihpc.validate.minicluster", "main")
    assert callable(getattr(importlib.import_module(module), name))


def test_a_usage_mistake_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        _main(["validate", "a.json", "b.json", "--tol", "0.01"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == ["minicluster: error: unrecognized arguments: --tol 0.01"]


def test_a_timing_detection_before_the_fault_step_is_noise_not_the_faults():
    """A run slowed by a busy machine before the fault was injected: that detection is listed
    apart, and the fault's first step is where its own detector saw it."""
    noise = {"detector": "throughput", "rank": None, "ranks": [], "step": 3, "why": "slow before the fault"}
    hang = {"detector": "step-mismatch", "rank": 1, "ranks": [1], "step": 4, "why": "rank 1 stopped"}
    line = faulttest.outcome("hang", 1, 4, [noise, hang])
    assert line["step_first_seen"] == 4 and line["detectors"] == ["step-mismatch"] and line["before_fault"] == [noise]
    alone = faulttest.outcome("slow", 1, 4, [noise])
    assert not alone["detected"] and alone["before_fault"] == [noise]
