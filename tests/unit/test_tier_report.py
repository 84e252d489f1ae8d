"""scripts/tier_report.py: the table `make test` ends with, from pytest's own JUnit XML."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("tier_report", ROOT / "scripts" / "tier_report.py")
tier_report = sys.modules["tier_report"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tier_report)

TESTS = '''
import pytest

def test_quick():
    pass

def test_broken():
    assert 1 == 2

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass

@pytest.mark.xfail(reason="known")
def test_known():
    assert False

@pytest.fixture
def bad():
    raise RuntimeError("set-up fails")

def test_errors(bad):
    pass
'''


def junit_of(tmp_path: Path) -> str:
    """A real pytest run's JUnit XML over one of each outcome."""
    (tmp_path / "test_sample.py").write_text(TESTS)
    xml = tmp_path / "out.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
                    str(tmp_path / "test_sample.py")], capture_output=True, cwd=tmp_path, timeout=120)
    return xml.read_text()


def test_every_outcome_of_a_real_pytest_run_is_counted(tmp_path):
    counts, tests = tier_report.read_junit(junit_of(tmp_path))
    assert counts == {"passed": 1, "failed": 1, "error": 1, "skipped": 1, "xfailed": 1}
    assert sorted(name.split("::")[1] for name, _ in tests) == \
        ["test_broken", "test_errors", "test_known", "test_quick", "test_skipped"]


def test_the_table_sums_the_tiers_and_lists_the_slowest_tests_first():
    unit = tier_report.TierResult("unit", 61.0, 0, tests=[("a.py::fast", 0.1), ("a.py::slow", 9.0)])
    unit.counts.update(passed=2)
    e2e = tier_report.TierResult("e2e", 600.0, 1, tests=[("b.py::drill", 95.5), ("b.py::x", 3.0)])
    e2e.counts.update(passed=1, failed=1, skipped=2)
    text = tier_report.table([unit, e2e], 700.0, {"images (bg)": 250.0}, slowest=3)
    lines = text.splitlines()
    assert any(line.split()[:4] == ["unit", "1:01", "ok", "2"] for line in lines), text
    assert any(line.split()[:5] == ["e2e", "10:00", "FAILED", "1", "1"] for line in lines), text
    assert any(line.split()[:3] == ["images", "(bg)", "4:10"] for line in lines), text
    assert any(line.split()[:2] == ["total", "11:40"] for line in lines), text
    slowest = [line.split()[-1] for line in lines[lines.index(next(x for x in lines if "slowest" in x)) + 1:-1]]
    assert slowest == ["b.py::drill", "a.py::slow", "b.py::x"]
    assert lines[-1] == "tests: 3 passed, 1 failed, 2 skipped"


def test_a_tier_passes_only_when_pytest_exits_0_and_nothing_failed():
    assert tier_report.TierResult("unit", 1.0, 0).ok
    assert not tier_report.TierResult("unit", 1.0, 2).ok  # interrupted, or could not collect
    failed = tier_report.TierResult("unit", 1.0, 0)
    failed.counts["error"] = 1
    assert not failed.ok


def test_wall_times_round_to_the_second_before_splitting_into_minutes():
    """599.7 s printed as 9:60 in a CI's table: it is 10:00."""
    assert [tier_report.minutes(s) for s in (0.4, 59.5, 599.7, 2180, 3599.6, 3725)] == \
        ["0:00", "1:00", "10:00", "36:20", "1:00:00", "1:02:05"]
