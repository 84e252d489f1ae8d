"""Tearing a job's launcher down reports what really ended it, not the 0 a reaped child reads."""

import signal
import subprocess
import sys

from minihpc.machine.processes import teardown


def _launcher(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout.readline() == b"ready\n"  # its handlers are in place
    return proc


def test_a_launcher_ended_by_sigterm_reports_the_signal():
    proc = _launcher("import time; print('ready', flush=True); time.sleep(60)")
    teardown([proc], kill_wait=5)
    assert proc.wait() == -signal.SIGTERM


def test_a_launcher_that_ignores_sigterm_reports_sigkill():
    proc = _launcher("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                     "print('ready', flush=True); time.sleep(60)")
    teardown([proc], kill_wait=0.5)
    assert proc.wait() == -signal.SIGKILL


def test_a_launcher_that_exits_on_sigterm_reports_its_own_code():
    proc = _launcher("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(143)); "
                     "print('ready', flush=True); time.sleep(60)")
    teardown([proc], kill_wait=5)
    assert proc.wait() == 143
