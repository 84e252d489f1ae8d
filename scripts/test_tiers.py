#!/usr/bin/env python
"""`make test`: the test tiers, each in a pytest of its own, then a table of where the time went.

    scripts/test_tiers.py [TIER ...] [--workers N] [--report FILE]

Tiers, in this order: unit (pure logic), integration (real local clusters, in N parallel
workers, each with its own cluster on its own ports and state directory), ansible (systemd hosts
over SSH) and e2e (the Compose cluster). The two Docker tiers run after the local ones, side by
side (the Ansible one niced, its hosts at half the default CPU weight, its output in
build/test-logs/ansible.log, printed when it ends; see BESIDE); TEST_DOCKER_TIERS=serial runs
them one after the other. Their images (the Compose cluster's and the Ansible hosts') are
built in the background while the unit tier runs (make test starts the part that needs no venv
before the venv, scripts/images-early.sh), and the integration tier starts once they are ready:
beside it, the build slowed it from 7 to 10-17 minutes and itself took 10-18, where alone it
takes under 4.
Every tier runs even when an earlier one failed, and the exit status is 1 when any failed.

The report (tier wall times, counts, the 15 slowest tests) is printed at the end and written to
FILE (build/test-report.txt); each tier's JUnit XML is kept beside it in build/test-results/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tier_report import TierResult, read_junit, table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TIERS = ("unit", "integration", "ansible", "e2e")
DOCKER_TIERS = ("ansible", "e2e")
BESIDE = "ansible"
"""The Docker tier that runs beside the next one (e2e), unless TEST_DOCKER_TIERS=serial: alone,
its hosts keep the cores 60-75 % busy (they mostly wait on SSH, apt and systemd) and e2e 80-86 %,
and the two tiers share nothing (their own containers, networks, volumes and ports). One after
the other they took 10:29 + 10:06 (20:35); side by side, its hosts at Docker's default CPU
weight, 16:54 (e2e 14:26); at a quarter of it, 18:11 (e2e 11:46); at half, 16:50. There, once, a
starved host missed 2.5 s of heartbeats and the master restarted its agent: the suite's hosts
now take 10 s of silence for DOWN (tests/ansible/hosts.py NODE_TIMEOUT), as no test of it waits
for a lapse."""
BESIDE_CPU_SHARES = 512
"""The CPU weight of its hosts' containers (Docker's default is 1024): the e2e cluster keeps the
larger share, the hosts still move on between its drills."""
DEFAULT_WORKERS = 3
"""Integration workers: most of those tests wait on jobs and drills, and three fill 2 cores and
take the tier from 17 to 7-8 minutes (TEST_WORKERS=1 runs it in one)."""


def docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def pytest_argv(tier: str, workers: int, junit: Path) -> list[str]:
    argv = [sys.executable, "-m", "pytest", f"tests/{tier}", "-p", "no:cacheprovider", f"--junitxml={junit}",
            "--durations=10", "--durations-min=1"]
    if tier == "integration" and workers > 1:
        # One test file per worker at a time: a file's module fixtures (its own cluster, real
        # Slurm, a browser) are made once, and its tests keep their order.
        argv += ["-n", str(workers), "--dist", "loadfile"]
    elif tier == "unit" and workers > 1:
        argv += ["-n", str(min(workers, os.cpu_count() or 1))]  # computing, not waiting: a worker a core
    return argv


class ImageBuild:
    """The Docker tiers' images, built in the background while the unit tier runs: the Compose
    cluster's (`make build`) and the Ansible hosts' (tests/ansible/hosts.py), under the lock that
    scripts/images-early.sh holds while it builds their venv-free part. Both fixtures build
    again, cached, so a failure here shows up there as well, as the test it breaks."""

    LOCK = "build/images.lock"

    def __init__(self, log: Path):
        self.log = log
        self.started = time.monotonic()
        lock = f"flock {self.LOCK} " if shutil.which("flock") else ""
        script = f"{lock}make --no-print-directory build && {lock}$PY -m tests.ansible.hosts build"
        with open(log, "w") as out:
            self.proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=dict(os.environ, PY=sys.executable))
        self.seconds: float | None = None
        self.reported = False
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        """The build's own time, however late a tier asks for it."""
        self.proc.wait()
        self.seconds = time.monotonic() - self.started

    def wait(self) -> None:
        """Wait until the build has ended, and say how it went (once)."""
        if self.reported:
            return
        if self.proc.poll() is None:
            print("==> waiting for the images the Docker tiers need (build/test-logs/images.log)", flush=True)
        status = self.proc.wait()
        self._reaper.join()
        self.reported = True
        if status == 0:
            print(f"==> images ready in {self.seconds:.0f}s (built beside the unit tier)", flush=True)
        else:
            tail = self.log.read_text(errors="replace").splitlines()[-15:]
            print(f"==> the image build exited {status}; its last lines:", *tail, sep="\n    ", flush=True)


class Tier:
    """One tier's pytest, started. With ``log``, its output goes to that file (printed when it
    ends) rather than to this terminal, and it runs at a lower CPU priority (``nice``)."""

    def __init__(self, tier: str, workers: int, results: Path, log: Path | None = None, nice: int = 0,
                 env: dict[str, str] | None = None):
        self.name = tier
        self.log = log
        self.junit = results / f"{tier}.xml"
        self.junit.unlink(missing_ok=True)
        beside = f" (beside the next tier; its output: {os.path.relpath(log, ROOT)})" if log else ""
        print(f"\n==> tier {tier}" + (f" ({workers} workers)" if tier == "integration" and workers > 1 else "") + beside,
              flush=True)
        self.start = time.monotonic()
        out = open(log, "w") if log else None
        argv = (["nice", "-n", str(nice)] if nice and shutil.which("nice") else []) + pytest_argv(tier, workers, self.junit)
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT if out else None,
                                     env=dict(os.environ, **(env or {})))
        if out:
            out.close()

    def finish(self) -> TierResult:
        status = self.proc.wait()
        result = TierResult(self.name, time.monotonic() - self.start, status)
        if self.log:
            print(f"\n==> tier {self.name}, run beside the one before it:", flush=True)
            print(self.log.read_text(errors="replace"), end="", flush=True)
        if self.junit.exists():
            result.counts, result.tests = read_junit(self.junit.read_text())
        else:
            result.note = f"pytest exited {status} and wrote no results"
        return result


def run_tier(tier: str, workers: int, results: Path) -> TierResult:
    return Tier(tier, workers, results).finish()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tiers", nargs="*", metavar="TIER", help=f"of {', '.join(TIERS)} (default: all)")
    parser.add_argument("--workers", type=int, default=os.environ.get("TEST_WORKERS") or DEFAULT_WORKERS,
                        help=f"parallel workers for the integration tier, and up to one a core for unit (TEST_WORKERS; default {DEFAULT_WORKERS}; 1: none)")
    parser.add_argument("--report", type=Path, default=ROOT / "build" / "test-report.txt")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be 1 or more, not {args.workers}")
    unknown = [t for t in args.tiers if t not in TIERS]
    if unknown:
        parser.error(f"no tier {unknown[0]!r}; the tiers are {', '.join(TIERS)}")
    plan = [t for t in TIERS if t in (args.tiers or TIERS)]
    mode = os.environ.get("TEST_DOCKER_TIERS") or "side-by-side"
    if mode not in ("side-by-side", "serial"):
        parser.error(f"TEST_DOCKER_TIERS is {mode!r}: side-by-side (the default) or serial")
    side_by_side = mode == "side-by-side"
    results = ROOT / "build" / "test-results"
    logs = ROOT / "build" / "test-logs"
    results.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)

    start = time.monotonic()
    setup: dict[str, float] = {}
    build = ImageBuild(logs / "images.log") if any(t in DOCKER_TIERS for t in plan) and docker_answers() else None
    done = []
    beside: Tier | None = None
    for tier in plan:
        if tier != "unit" and build is not None and not build.reported:
            # Not beside the tiers whose clusters and drills keep time (see the docstring).
            waited = time.monotonic()
            build.wait()
            setup["images"] = build.seconds or 0.0
            setup["images wait"] = time.monotonic() - waited
        if tier == BESIDE and side_by_side and plan[-1] != tier:
            # Its hosts yield the CPU to the next tier's containers (--cpu-shares), and its
            # pytest, Ansible and SSH run niced: the e2e cluster's drills keep time.
            beside = Tier(tier, args.workers, results, log=logs / f"{tier}.log", nice=10,
                          env={"MINIHPC_TEST_HOST_CPU_SHARES": str(BESIDE_CPU_SHARES)})
            continue
        done.append(run_tier(tier, args.workers, results))
    if beside is not None:
        done.insert(len(done) - 1, beside.finish())
    report = table(done, time.monotonic() - start, setup)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(report + "\n")
    print(f"\n{report}\n(written to {os.path.relpath(args.report, ROOT)})", flush=True)
    return 0 if all(t.ok for t in done) else 1


if __name__ == "__main__":
    sys.exit(main())
