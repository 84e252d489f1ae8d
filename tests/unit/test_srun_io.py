"""srun's I/O decisions (man srun, IO Redirection): what a node sends of a task's output and
when (node.stepio), which tasks read srun's stdin (node.steprunner), and where srun writes each
task's output: labels, -o/-e targets and file name patterns (job.srun_output)."""

import os

import pytest

from minihpc.core.errors import UsageError
from minihpc.job import srun
from minihpc.job.srun_output import Labeller, Sink, check_pattern, expand, target
from minihpc.node.stepio import CHUNK, Budget, lines
from minihpc.node.steprunner import gets_input


def test_output_goes_in_whole_lines_unless_unbuffered():
    """Slurm line-buffers each task's output so lines of two tasks never mix; -u sends as it comes."""
    assert lines(b"", b"one\ntw", False) == (b"one\n", b"tw")
    assert lines(b"tw", b"o\n", False) == (b"two\n", b"")
    assert lines(b"", b"no end yet", False) == (b"", b"no end yet")
    assert lines(b"", b"part", True) == (b"part", b"")
    long = b"x" * CHUNK  # a line that never ends is not held for ever
    assert lines(b"", long, False) == (long, b"")


def test_a_tasks_output_past_its_cap_is_counted_and_dropped():
    budget = Budget(10)
    assert budget.take(b"12345678") == b"12345678"
    assert budget.take(b"abcdef") == b"ab"
    assert budget.take(b"zz") == b"" and budget.dropped == 6
    assert Budget(0).take(b"x" * 100) == b"x" * 100  # 0: no cap


@pytest.mark.parametrize("which, procid, reads", [
    ("all", 3, True), ("none", 0, False), (1, 1, True), (1, 0, False), (True, 1, False), ("2", 2, False),
])
def test_which_tasks_read_sruns_stdin(which, procid, reads):
    """--input all (the default), none, or one task's id; anything else reads nothing."""
    assert gets_input({"input": which}, procid) is reads


def test_labels_are_right_aligned_task_ids_at_each_line_start():
    """man srun, -l: "Prepend task number to lines of stdout/err"; ids are aligned (`` 0: ``)."""
    label = Labeller(12)
    assert label(0, 1, b"a\nb\n") == b" 0: a\n 0: b\n"
    assert label(11, 1, b"par") == b"11: par"
    assert label(11, 1, b"t\nnext") == b"t\n11: next"  # the rest of its line, then a new one
    assert label(0, 2, b"\n") == b" 0: \n"
    assert Labeller(3)(2, 1, b"x\n") == b"2: x\n"


def test_output_targets_and_patterns():
    """-o/-e: all (srun's own), none, one task's id, or a pattern; %5t is zero-padded."""
    assert target(None, 3) == "" and target("all", 3) == ""
    assert target("none", 3) is None
    assert target("1", 1) == "" and target("1", 0) is None
    assert target("out-%t.txt", 0) == "out-%t.txt"
    values = {"t": "3", "n": "1", "N": "worker-node-1", "j": "7", "s": "2", "u": "alice", "x": "sweep"}
    assert expand("%x-%j.%s-%N-%n-%3t-%u%%.txt", values) == "sweep-7.2-worker-node-1-1-003-alice%.txt"
    check_pattern("--output", "o-%j-%t")
    with pytest.raises(UsageError, match=r"--output=o-%A: %A is not supported"):
        check_pattern("--output", "o-%A")


def test_sink_writes_each_task_to_its_own_file_and_stderr_with_stdout(tmp_path):
    """man srun: with -o and no -e, stderr goes to the same file; %t is the task's id, %N its node's."""
    os.chdir(tmp_path)
    sink = Sink("out-%t-%N.txt", None, True, {"j": "7", "s": "0", "u": "u", "x": "x"},
                (["n0", "n1"], [[0], [1]]))
    sink.write(0, 1, b"hello\n")
    sink.write(1, 2, b"oops\n")
    sink.write(0, 2, b"warn\n")
    sink.close()
    assert (tmp_path / "out-0-n0.txt").read_text() == "0: hello\n0: warn\n"
    assert (tmp_path / "out-1-n1.txt").read_text() == "1: oops\n"


def test_srun_refuses_io_it_cannot_honour_with_one_line():
    args = srun.parser().parse_args(["--input=in-%t", "true"])
    with pytest.raises(UsageError, match="per-task input file pattern is not supported"):
        srun.check(args)
    args = srun.parser().parse_args(["-i", "none", "-o", "f-%t", "-e", "none", "-u", "true"])
    srun.check(args)
    assert srun.request(args, {}, "/")["input"] == "none" and srun.request(args, {}, "/")["unbuffered"]
    assert srun.input_mode("3") == 3 and srun.input_mode("data.txt") == "all"


def test_srun_refuses_a_distribution_other_than_block():
    """man srun, -m: block is the default; cyclic would put tasks elsewhere than minihpc does."""
    srun.check(srun.parser().parse_args(["-m", "block:cyclic", "true"]))
    with pytest.raises(UsageError, match="-m/--distribution=cyclic: minihpc places a step's tasks in blocks only"):
        srun.check(srun.parser().parse_args(["--distribution=cyclic", "true"]))
