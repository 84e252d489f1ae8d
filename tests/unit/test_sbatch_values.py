"""The values of sbatch's options, as ``man sbatch`` documents them: --export, --mem, --gres,
--array (the indexes), --signal (its form)."""

from __future__ import annotations

import signal

import pytest

from minihpc.core.arrays import array_env, parse_array
from minihpc.core.environment import EXPORT_MAX, parse_export
from minihpc.core.errors import UsageError
from minihpc.core.requirements import parse_gres, parse_mem
from minihpc.core.signals import parse_signal, parse_warn_signal

SUBMITTER = {"PATH": "/home/u/venv/bin:/usr/bin", "HOME": "/home/u", "LR": "0.1", "SEED": "7",
             "MINIHPC_REDIS_URL": "redis://cli:secret@h/0", "SLURM_JOB_ID": "12", "VIRTUAL_ENV": "/home/u/venv",
             "REDISCLI_AUTH": "secret", "PYTHONPATH": "/home/u/src"}


def test_export_all_carries_the_submitters_variables_but_not_its_machine_or_credentials():
    """sbatch(1) --export: "ALL ... the default": every variable of the submitting environment.
    The machine's own (PATH, HOME, a virtualenv) and minihpc's credentials stay behind."""
    assert parse_export(None, SUBMITTER) == {"LR": "0.1", "SEED": "7"}
    assert parse_export("ALL", SUBMITTER) == {"LR": "0.1", "SEED": "7"}


def test_export_none_and_named_variables():
    """sbatch(1) --export=NONE: none of them; --export=VAR,VAR=value: only those (a named
    variable is carried even where ALL would leave it out); ALL,VAR=value adds to ALL."""
    assert parse_export("NONE", SUBMITTER) == {}
    assert parse_export("LR,EPOCHS=3,PATH", SUBMITTER) == {"LR": "0.1", "EPOCHS": "3", "PATH": SUBMITTER["PATH"]}
    assert parse_export("ALL,LR=0.5", SUBMITTER) == {"LR": "0.5", "SEED": "7"}
    assert parse_export("MISSING", SUBMITTER) == {}


@pytest.mark.parametrize("text, problem", [
    ("NONE,LR", "NONE takes no variables"), ("1X=2", "is not a variable name"), ("", "needs a value")])
def test_export_mistakes_are_one_line(text, problem):
    with pytest.raises(UsageError, match=problem):
        parse_export(text, SUBMITTER)


def test_export_is_size_capped():
    with pytest.raises(UsageError, match=f"over {EXPORT_MAX}"):
        parse_export(None, {"BIG": "x" * EXPORT_MAX})


@pytest.mark.parametrize("text, size", [("4G", 4 << 30), ("512M", 512 << 20), ("2048", 2048 << 20),
                                        ("100k", 100 << 10), ("1T", 1 << 40), ("0", 0), ("8GB", 8 << 30)])
def test_mem_units(text, size):
    """sbatch(1) --mem: "Default units are megabytes. Different units can be specified using the
    suffix [K|M|G|T]"."""
    assert parse_mem(text) == size


def test_mem_and_gres_mistakes():
    with pytest.raises(UsageError, match="invalid --mem 'lots'"):
        parse_mem("lots")
    with pytest.raises(UsageError, match="only gpu"):
        parse_gres("mps:100")
    with pytest.raises(UsageError, match="gpu:N"):
        parse_gres("gpu:two")


def test_gres_gpus():
    """sbatch(1) --gres: name[[:type]:count], count defaulting to 1."""
    assert [parse_gres(t) for t in ("gpu", "gpu:2", "gpu:a100:4")] == [1, 2, 4]


def test_array_forms():
    """sbatch(1) --array: "--array=0-15", "--array=0,6,16-32", "--array=0-15:4", and "%" for the
    most tasks running at once ("--array=0-15%4")."""
    assert parse_array("0-15%4").indexes == tuple(range(16)) and parse_array("0-15%4").limit == 4
    assert parse_array("0,6,16-18").indexes == (0, 6, 16, 17, 18)
    assert parse_array("0-15:4").indexes == (0, 4, 8, 12) and parse_array("0-15:4").step == 4
    env = array_env(40, 8, "0-15:4")
    assert env == {"SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "8", "SLURM_ARRAY_TASK_COUNT": "4",
                   "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "12", "SLURM_ARRAY_TASK_STEP": "4"}


@pytest.mark.parametrize("text, problem", [("5-3", "ends before it starts"), ("0-2000", "over the largest"),
                                           ("a-b", "is not one of"), ("0-3%0", "at least 1"), ("0-4:0", "step")])
def test_array_mistakes(text, problem):
    with pytest.raises(UsageError, match=problem):
        parse_array(text)


def test_warn_signal_forms():
    """sbatch(1) --signal=[{R|B}:]<sig_num>[@sig_time]: "sig_time ... defaults to 60 seconds"; B:
    signals only the batch shell."""
    assert parse_warn_signal("USR1@5").text() == "USR1@5"
    assert parse_warn_signal("B:SIGUSR2").text() == "B:USR2@60"
    assert parse_warn_signal("10@30").signal is signal.SIGUSR1
    assert parse_signal("term") is signal.SIGTERM
    for bad in ("USR9@5", "USR1@soon", "B:"):
        with pytest.raises(UsageError, match="--signal"):
            parse_warn_signal(bad)
