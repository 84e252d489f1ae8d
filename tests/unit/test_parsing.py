import pytest

from minihpc.core.errors import UsageError
from minihpc.core.parsing import (
    compress_hostlist,
    format_duration,
    header_options,
    parse_time_limit,
)


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("90", 5400),
        ("1:30", 90),
        ("01:00:05", 3605),
        ("2-0", 2 * 86400),
        ("1-02:03", 86400 + 2 * 3600 + 3 * 60),
        ("1-02:03:04", 86400 + 7384),
        ("45s", 45),
        ("2.5m", 150),
        ("1h", 3600),
    ],
)
def test_time_limits_in_slurm_formats(text, seconds):
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["UNLIMITED", "infinite", "0", "0:00"])
def test_unlimited_time_limit_is_none(text):
    """man sbatch: "A time limit of zero requests that no time limit be imposed"."""
    assert parse_time_limit(text) is None


@pytest.mark.parametrize("text", ["", "abc", "1:xx", "1:2:3:4", "-5", "1-", "5q"])
def test_malformed_time_limit_names_the_value_and_the_forms(text):
    with pytest.raises(UsageError) as exc:
        parse_time_limit(text)
    assert repr(text) in str(exc.value)
    assert "HH:MM:SS" in str(exc.value)


def test_duration_formatting_matches_squeue():
    assert format_duration(5) == "0:05"
    assert format_duration(3605) == "1:00:05"
    assert format_duration(86400 + 61) == "1-00:01:01"
    assert format_duration(None) == "UNLIMITED"


# Dependencies: tests/unit/test_dependency_kinds.py (minihpc.core.dependency).


def test_header_lines_are_read_until_the_first_code_line():
    script = "\n".join(
        [
            "#!/usr/bin/env python",
            "#MINIHPC --nodes 2",
            "#SBATCH -t 5  # five minutes",
            "# a comment",
            "",
            "#MINIHPC --priority high",
            "import os",
            "#MINIHPC --job-name ignored",
        ]
    )
    assert header_options(script) == ["--nodes", "2", "-t", "5", "--priority", "high"]


def test_hostlist_compression():
    assert compress_hostlist(["master-node", "worker-node-1", "worker-node-2"]) == (
        "master-node,worker-node-[1-2]"
    )
    assert compress_hostlist(["n1", "n3", "n4", "n5"]) == "n[1,3-5]"
    assert compress_hostlist(["n7"]) == "n7"
    assert compress_hostlist([]) == ""


def test_header_lines_after_a_python_module_docstring_count():
    """sbatch reads #SBATCH lines up to the first command; a Python script's docstring comes
    first by convention, and the job scripts in jobs/ put their headers after it."""
    from minihpc.core.parsing import header_lines

    script = '#!/usr/bin/env python\n"""Train.\n\n    minihpc submit x.py\n"""\n#MINIHPC --nodes 3\n#SBATCH -t 5\nimport os\n#SBATCH -N 9\n'
    assert header_lines(script) == [("#MINIHPC", ["--nodes", "3"]), ("#SBATCH", ["-t", "5"])]
    assert header_lines('"""One line."""\n#SBATCH -N 2\n') == [("#SBATCH", ["-N", "2"])]
    assert header_lines('"""doc"""\n"""not a docstring any more"""\n#SBATCH -N 2\n') == []
    root = __import__("pathlib").Path(__file__).resolve().parents[2] / "jobs"
    for name in ("hello.py", "benchmark.py", "train_mnist_distributed.py"):
        assert ["--nodes", "3"] == header_lines((root / name).read_text())[0][1], name


def test_sacct_elapsed_is_hours_minutes_seconds():
    from minihpc.core.parsing import format_elapsed

    assert format_elapsed(6) == "00:00:06"
    assert format_elapsed(3 * 3600 + 62) == "03:01:02"
    assert format_elapsed(86400 + 5) == "1-00:00:05"
