import pytest

from minihpc.core.errors import UsageError
from minihpc.validate import config

DEFAULTS = {"workers": 2, "steps": 20, "seed": 42, "output": None}


def test_flag_beats_file_beats_default(tmp_path):
    path = tmp_path / "v.toml"
    path.write_text('steps = 7\nseed = 1\n[run]\nworkers = 4\n[fault-test]\nworkers = 3\n')
    values = config.resolve({"seed": 9, "workers": None}, config.load(path, "run"), DEFAULTS)
    assert values == {"workers": 4, "steps": 7, "seed": 9, "output": None}
    assert config.resolve({}, config.load(path, "fault-test"), DEFAULTS)["workers"] == 3


def test_dashes_and_underscores_both_name_a_flag(tmp_path):
    path = tmp_path / "v.toml"
    path.write_text('batch-size = 32\nstep_timeout = 3.0\n')
    values = config.resolve({}, config.load(path, "run"), {"batch_size": 64, "step_timeout": 10.0})
    assert values == {"batch_size": 32, "step_timeout": 3.0}


def test_unknown_key_missing_file_and_bad_toml_are_usage_errors(tmp_path):
    path = tmp_path / "v.toml"
    path.write_text("stpes = 3\n")
    with pytest.raises(UsageError, match="stpes"):
        config.resolve({}, config.load(path, "run"), DEFAULTS)
    with pytest.raises(UsageError, match="does not exist"):
        config.load(tmp_path / "none.toml", "run")
    path.write_text("steps = \n")
    with pytest.raises(UsageError, match="not valid TOML"):
        config.load(path, "run")


def test_a_yaml_file_works_like_toml(tmp_path):
    path = tmp_path / "v.yaml"
    path.write_text("steps: 3\nseed: 1\nrun:\n  workers: 4\n")
    assert config.resolve({"seed": 9}, config.load(path, "run"), DEFAULTS) == {
        "workers": 4, "steps": 3, "seed": 9, "output": None}
    path.write_text("steps: [3\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        config.load(path, "run")


def test_the_cli_applies_a_config_file_under_its_flags(tmp_path):
    import argparse

    from minihpc.cli.validate import add_parsers
    from minihpc.validate.commands import BASELINE_COMPARE_DEFAULTS
    from minihpc.validate.commands import resolve as _resolve

    path = tmp_path / "v.toml"
    path.write_text('[baseline-compare]\nlatency-threshold = 9.0\nthroughput-threshold = 7.0\nname = "x"\n')
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["validate", "baseline", "compare", "--config", str(path), "--throughput-threshold", "1"])
    values = _resolve(args, BASELINE_COMPARE_DEFAULTS, "baseline-compare")
    assert (values["latency_threshold"], values["throughput_threshold"], values["name"]) == (9.0, 1.0, "x")
    assert not hasattr(args, "config")  # the top-level --config (cluster settings) stays separate
