"""minihpc validate with real torchrun ranks over gloo: correctness of 1 vs 2 vs 4 workers, the
parameter server, fault injection and detection, baselines through the CLI, and --cluster on
the local-mode cluster."""

import json

import pytest

from minihpc.cli.main import main
from tests.unit.test_validator_contract import NN_CONFIG  # specs/parameter-server.md's, verbatim

pytestmark = pytest.mark.integration

STEPS = 12


def cli(*argv) -> int:
    """``minihpc validate ...``, in this process: its exit status."""
    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run reports of the same seed on 1, 2 and 4 workers."""
    d = tmp_path_factory.mktemp("runs")
    for n in (1, 2, 4):
        assert cli("validate", "run", "--workers", n, "--steps", STEPS, "--batch-size", 64, "--seed", 42,
                   "--output", d / f"w{n}.json") == 0
    return d


def test_one_two_and_four_workers_agree_at_1e_5(runs, capsys):
    capsys.readouterr()
    for n in (2, 4):
        assert cli("validate", "compare", runs / "w1.json", runs / f"w{n}.json", "--tolerance", "1e-5",
                   "--output", runs / f"cmp{n}.json", "--plot", runs / f"loss{n}.png") == 0
        rep = json.loads((runs / f"cmp{n}.json").read_text())
        assert rep["verdict"] == "PASS" and rep["steps_compared"] == STEPS and rep["max_abs_delta"] < 1e-12
    out = capsys.readouterr().out
    assert "1 vs 4 workers" in out and "PASS" in out and (runs / "loss4.png").stat().st_size > 0
    run = json.loads((runs / "w4.json").read_text())
    assert run["num_workers"] == 4 and run["num_steps"] == STEPS and run["detections"] == []
    assert set(run["per_rank"]) == {"0", "1", "2", "3"} and run["step_time_p95_ms"] >= run["step_time_p50_ms"]
    assert {"torch", "minihpc", "python"} <= set(run["versions"]) and run["start_time_unix"] < run["end_time_unix"]
    assert run["start_timestamp"] <= run["end_timestamp"] and run["start_timestamp"].endswith("Z")


def test_batch_not_divisible_by_workers_is_one_line(capsys):
    assert cli("validate", "run", "--workers", 3, "--batch-size", 64) == 1
    assert "not divisible by 3 workers" in capsys.readouterr().err


def test_output_folder_is_made_first_and_an_unwritable_one_stops_the_run_before_training(tmp_path, capsys,
                                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("validate", "run", "--workers", 2, "--steps", 3, "--output", "results/x.json") == 0
    assert json.loads((tmp_path / "results" / "x.json").read_text())["num_steps"] == 3
    capsys.readouterr()
    (tmp_path / "afile").write_text("")
    assert cli("validate", "run", "--workers", 2, "--steps", 3, "--output", "afile/x.json") == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == ["minihpc validate: error: --output afile/x.json: cannot make its folder "
                                         "afile (afile is a file, not a folder)"]
    assert "Run complete" not in captured.out




def test_parameter_server_reads_the_specs_config_keys(runs, tmp_path, capsys, monkeypatch):
    """The spec's nn_config.yaml on the synthetic data (input_dim 16, out 1: its regression
    target) with cluster_config.yaml's keys: 2 epochs of 128 steps, a held-out loss at step 200."""
    synthetic = (NN_CONFIG.replace("input_dim: 784", "input_dim: 16").replace("out: 10", "out: 1")
                 .replace("name: MNIST", "name: synthetic"))
    config = tmp_path / "nn_config.yaml"
    config.write_text(synthetic + 'host_ip: "127.0.0.1"\nworker_connect_ip: "127.0.0.1"\nport: 0\n'
                                  "num_workers: 2\ntimeout: 5\n")
    out = tmp_path / "ps.json"
    assert cli("validate", "run", "--strategy", "parameter-server", "--config", config, "--output", out) == 0
    run = json.loads(out.read_text())
    assert (run["num_steps"], run["num_workers"], run["config"]["lr"], run["config"]["hidden"]) == (256, 2, 0.001, "128")
    assert [e["step"] for e in run["eval"]] == [199] and run["parameter_server"]["skipped_total"] == 0
    # the spec's file as written trains MNIST: where there is none, one line says so
    config.write_text(NN_CONFIG)
    monkeypatch.setenv("MINIHPC_DATA_DIR", str(tmp_path / "no-data"))
    capsys.readouterr()
    assert cli("validate", "run", "--strategy", "parameter-server", "--config", config) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"minihpc validate: error: no MNIST data in {tmp_path / 'no-data'}; run `make prepare-data` "
        "(jobs/prepare_mnist.py) or pass --data-dir"]
    config.write_text(NN_CONFIG + "optimizer: sgd\n")
    assert cli("validate", "run", "--config", config) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "sets optimizer, which is not a flag of this command" in err[0]


def test_parameter_server_matches_single_and_counts_skips(runs, tmp_path):
    assert cli("validate", "run", "--workers", 2, "--strategy", "parameter-server", "--steps", STEPS,
               "--batch-size", 64, "--output", tmp_path / "ps.json", "--tensorboard", tmp_path / "tb") == 0
    assert cli("validate", "compare", runs / "w1.json", tmp_path / "ps.json", "--tolerance", "1e-5") == 0
    assert json.loads((tmp_path / "ps.json").read_text())["parameter_server"]["skipped_total"] == 0
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    # rank 1 sleeps 0.5 s per step from step 2; a 0.15 s collection timeout leaves it out
    assert cli("validate", "run", "--workers", 2, "--strategy", "parameter-server", "--steps", 5, "--batch-size", 64,
               "--inject", "slow", "--fault-step", 2, "--ps-timeout", 0.15, "--output", tmp_path / "skip.json") == 0
    skipped = json.loads((tmp_path / "skip.json").read_text())["parameter_server"]
    assert skipped["skipped_total"] >= 1 and all(ranks == [1] for ranks in skipped["skipped"].values())


def test_fault_test_detects_every_fault_without_false_positives(tmp_path, capsys):
    out = tmp_path / "faults.json"
    code = cli("validate", "fault-test", "--steps", STEPS, "--tolerance", 0.01, "--seeds", "42,43,44",
               "--fault-step", 4, "--step-timeout", 3, "--output", out)
    table = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert code == 0, table
    assert report["detection_rate"] == 1.0 and report["located"] == report["injected"] == 6
    # three seeds, and seed 42 again judged by every detector the faulty runs face: all clean
    assert report["false_positives"] == 0 and [c["seed"] for c in report["clean_runs"]] == [42, 43, 44, 42]
    for fault in report["faults"]:
        assert fault["detected"] and fault["rank"] == 1 and fault["step_first_seen"] >= 4, fault
        assert set(fault["detectors"]) & set(fault["expected_detectors"]), fault
    assert "detection rate 100%" in table


def test_baseline_compare_exits_0_1_2(runs, tmp_path, capsys):
    d = ["--baseline-dir", tmp_path / "baselines"]
    assert cli("validate", "baseline", "save", "--metrics", runs / "w2.json", "--name", "stable_v1", *d) == 0
    assert cli("validate", "baseline", "compare", "--metrics", runs / "w2.json", "--name", "stable_v1", *d,
               "--output", tmp_path / "cmp.json") == 0
    slow = json.loads((runs / "w2.json").read_text())
    slow.update(step_time_p50_ms=slow["step_time_p50_ms"] * 3, step_time_p95_ms=slow["step_time_p95_ms"] * 3)
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    assert cli("validate", "baseline", "compare", "--metrics", tmp_path / "slow.json", "--name", "stable_v1", *d) == 1
    assert "✗ REGRESS" in capsys.readouterr().out
    assert cli("validate", "baseline", "compare", "--metrics", runs / "w2.json", "--name", "missing", *d) == 2
    (tmp_path / "torn.json").write_text('{"average_loss": ')
    assert cli("validate", "baseline", "compare", "--metrics", tmp_path / "torn.json", "--name", "stable_v1", *d) == 2


def test_cluster_run_matches_single_process(idle_cluster, runs, tmp_path, monkeypatch):
    monkeypatch.setenv("MINIHPC_STATE_DIR", str(idle_cluster.state_dir))
    monkeypatch.delenv("MINIHPC_REDIS_URL", raising=False)
    out = tmp_path / "cluster.json"
    assert cli("validate", "run", "--cluster", "--workers", 2, "--steps", STEPS, "--batch-size", 64,
               "--output", out) == 0
    run = json.loads(out.read_text())
    assert run["launch"]["job_state"] == "COMPLETED" and run["num_workers"] == 2
    assert sorted(run["machine"]["rank_hosts"]) == ["0", "1"]
    assert cli("validate", "compare", runs / "w1.json", out, "--tolerance", "1e-5") == 0
