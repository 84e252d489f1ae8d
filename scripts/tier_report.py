"""The table `make test` ends with: each tier's wall time and counts, and the slowest tests.

Pure functions over pytest's JUnit XML (one file per tier); scripts/test_tiers.py runs the tiers
and prints what these return. tests/unit/test_tier_report.py checks them on small XML files.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed")
"""As JUnit XML tells them apart: a test that passed against its xfail mark is recorded as passed."""


@dataclass
class TierResult:
    """One tier's run: its name, wall seconds, pytest's exit status and its tests' outcomes."""

    name: str
    wall: float
    status: int
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    tests: list[tuple[str, float]] = field(default_factory=list)
    """(test id, seconds: setup, call and teardown together), as JUnit XML records them."""
    note: str = ""

    @property
    def ok(self) -> bool:
        """A tier passes when pytest exits 0 and no test failed; an interrupted or crashed run,
        or one that collected nothing, fails it."""
        return self.status == 0 and self.counts["failed"] == 0 and self.counts["error"] == 0


def outcome(case: ET.Element) -> str:
    """passed, failed, error, skipped or xfailed, from a <testcase>'s children."""
    for child in case:
        if child.tag == "failure":
            return "failed"
        if child.tag == "error":
            return "error"
        if child.tag == "skipped":
            return "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
    return "passed"


def read_junit(xml_text: str) -> tuple[dict[str, int], list[tuple[str, float]]]:
    """Counts of each outcome and (test id, seconds) for every test case in a JUnit XML text."""
    counts = dict.fromkeys(OUTCOMES, 0)
    tests = []
    for case in ET.fromstring(xml_text).iter("testcase"):
        kind = outcome(case)
        counts[kind] += 1
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        tests.append((name, float(case.get("time") or 0.0)))
    return counts, tests


def minutes(seconds: float) -> str:
    """m:ss, or h:mm:ss from an hour on (rounded to the second first: 599.7 s is 10:00)."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def table(tiers: list[TierResult], total_wall: float, setup: dict[str, float], slowest: int = 15) -> str:
    """The report: set-up steps, one line per tier, the total, then the ``slowest`` tests of all
    tiers; the last line is the plain 'N passed, N failed' summary CI reads."""
    lines = ["== test tiers (wall time, m:ss) =="]
    for step, seconds in setup.items():
        lines.append(f"  {step:<14} {minutes(seconds):>8}")
    lines.append(f"  {'tier':<14} {'wall':>8}  {'status':<6} passed failed error skipped xfailed")
    for t in tiers:
        c = t.counts
        lines.append(f"  {t.name:<14} {minutes(t.wall):>8}  {'ok' if t.ok else 'FAILED':<6} "
                     f"{c['passed']:>6} {c['failed']:>6} {c['error']:>5} {c['skipped']:>7} "
                     f"{c['xfailed']:>7}{'  ' + t.note if t.note else ''}")
    lines.append(f"  {'total':<14} {minutes(total_wall):>8}")
    everything = sorted(((s, n, t.name) for t in tiers for n, s in t.tests), reverse=True)[:slowest]
    if everything:
        lines.append(f"== the {len(everything)} slowest tests (seconds, setup and teardown included) ==")
        lines.extend(f"  {s:7.1f}  {tier:<11} {name}" for s, name, tier in everything)
    passed = sum(t.counts["passed"] for t in tiers)
    failed = sum(t.counts["failed"] + t.counts["error"] for t in tiers)
    skipped = sum(t.counts["skipped"] for t in tiers)
    lines.append(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
    return "\n".join(lines)
