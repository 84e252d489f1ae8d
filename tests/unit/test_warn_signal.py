"""sbatch --signal=[B:]SIG[@SECS] (core.signals; node.job_signals decides when and to whom) and
scancel --signal (client.signals): parsing, timing and scope, without a cluster."""

import signal

import pytest

from minihpc.client.access import Principal
from minihpc.client.signals import scope, signal_job
from minihpc.core.errors import Conflict, Forbidden, UsageError
from minihpc.core.launch_spec import LaunchSpec
from minihpc.core.models import Job, JobState
from minihpc.core.signals import WarnSignal, parse_signal, parse_warn_signal, warn_at
from minihpc.node.job_signals import JobSignals, WarnTimer
from minihpc.state.steps import BATCH_SHELL, FULL, SIGNAL, STEPS, signal_message


@pytest.mark.parametrize("text, expected", [
    ("USR1@5", WarnSignal(signal.SIGUSR1, 5)),
    ("B:USR1@5", WarnSignal(signal.SIGUSR1, 5, batch_only=True)),
    ("b:TERM@30", WarnSignal(signal.SIGTERM, 30, batch_only=True)),
    ("R:SIGUSR2@10", WarnSignal(signal.SIGUSR2, 10)),  # R: (reservation) has no meaning here
    ("USR1", WarnSignal(signal.SIGUSR1, 60)),  # man sbatch: "By default, the signal is sent 60 seconds"
    ("10@1", WarnSignal(signal.SIGUSR1, 1)),  # a number is the signal's number
])
def test_warn_signal_parses_as_man_sbatch_says(text, expected):
    """man sbatch, --signal=[{R|B}:]<sig_num>[@sig_time]: "sig_num may either be a signal
    number or name"; "sig_time must be an integer between 0 and 65535"; B: "signal only the
    batch shell"."""
    assert parse_warn_signal(text) == expected
    assert parse_warn_signal(expected.text()) == expected  # what the job record carries reads back


@pytest.mark.parametrize("bad", ["", "USR1@", "@5", "NOPE@5", "USR1@70000", "X:USR1@5", "USR1@-1"])
def test_a_malformed_warn_signal_is_refused(bad):
    with pytest.raises(UsageError):
        parse_warn_signal(bad)


def test_signal_names_and_numbers():
    """man scancel, -s, --signal: "The name or number of the signal to send"."""
    assert parse_signal("usr1") is parse_signal("SIGUSR1") is parse_signal("10") is signal.SIGUSR1
    with pytest.raises(UsageError, match="invalid signal 'HUPP'"):
        parse_signal("HUPP")


def test_the_signal_is_due_secs_before_the_limit():
    warn = WarnSignal(signal.SIGUSR1, 5)
    assert warn_at(warn, 1000.0, 60.0) == 1055.0
    assert warn_at(warn, 1000.0, None) is None  # no time limit: never
    assert warn_at(warn, None, 60.0) is None


def test_the_timer_fires_once_and_follows_a_changed_time_limit():
    """scontrol update TimeLimit= moves the moment: the limit is re-read every second."""
    limit = {"value": 60.0}
    timer = WarnTimer(WarnSignal(signal.SIGUSR1, 5))

    def read():
        return 1000.0, limit["value"]

    assert not timer.due(read, 1050.0)
    limit["value"] = 120.0
    assert not timer.due(read, 1055.5)  # re-read: now due at 1115
    assert not timer.due(read, 1114.0)
    assert timer.due(read, 1115.0)
    assert not timer.due(read, 1116.0)  # once


class Proc:
    def __init__(self, pid):
        self.pid, self.got = pid, []

    def send_signal(self, sig):
        self.got.append(sig)


class Inbox:
    def __init__(self, *messages):
        self.messages = list(messages)

    def take_message(self, job_id, attempt, node):
        return self.messages.pop(0) if self.messages else None

    def run_limit(self, job_id):
        return 0.0, 100.0


def spec(**kw) -> LaunchSpec:
    base = dict(job_id=7, attempt=1, name="j", node="n0", node_rank=0, nodes=["n0", "n1"], master_addr="n0",
                tasks_per_node=1, script="s", launch="batch")
    return LaunchSpec(**{**base, **kw})


def deliverer(store, **kw):
    shell, tasks, notes = Proc(1), [Proc(2), Proc(3)], []
    signals = JobSignals(spec(**kw), store, notes.append, tasks=lambda: tasks, shell=lambda: [shell])
    return signals, shell, tasks, notes


def test_scancel_signals_reach_the_steps_by_default_and_the_shell_with_b():
    """man scancel: by default signals other than SIGKILL are not sent to the batch step (the
    shell script); -b, --batch: only the batch step."""
    inbox = Inbox(signal_message(signal.SIGUSR1, STEPS, "alice"), signal_message(signal.SIGUSR2, BATCH_SHELL, "alice"))
    signals, shell, tasks, notes = deliverer(inbox)
    signals.poll(now=0.0)
    assert shell.got == [] and [t.got for t in tasks] == [[signal.SIGUSR1]] * 2
    signals.poll(now=0.0)
    assert shell.got == [signal.SIGUSR2] and [t.got for t in tasks] == [[signal.SIGUSR1]] * 2
    assert "SIGUSR1 sent to 2 process(es) of the job on n0 (scancel --signal by alice)" in notes


def test_warn_signal_with_b_goes_to_the_batch_shell_only_and_once():
    """man sbatch --signal: B: "signal only the batch shell, none of the other processes"."""
    signals, shell, tasks, _ = deliverer(Inbox(), warn_signal="B:USR1@5")
    signals.warn_if_due(now=90.0)
    assert shell.got == []
    signals.warn_if_due(now=95.0)
    signals.warn_if_due(now=96.5)
    assert shell.got == [signal.SIGUSR1] and all(t.got == [] for t in tasks)
    assert deliverer(Inbox(), warn_signal="B:USR1@5", node="n1", node_rank=1)[0].timer is None


def test_without_a_shell_the_tasks_get_it_either_way():
    """A torchrun-mode job has no batch shell: -b or B: reaches its ranks."""
    tasks = [Proc(5)]
    signals = JobSignals(spec(launch="torchrun"), Inbox(signal_message(signal.SIGUSR1, FULL, "a")), print,
                         tasks=lambda: tasks)
    signals.poll(now=0.0)
    assert tasks[0].got == [signal.SIGUSR1]
    assert signals.send(signal.SIGUSR2, BATCH_SHELL, "test") == 1


class Records:
    def __init__(self, *jobs):
        self.jobs, self.sent = {j.id: j for j in jobs}, []

    def get_job(self, job_id):
        return self.jobs[job_id]

    def send(self, job_id, attempt, messages):
        self.sent.append((job_id, attempt, messages))


def test_only_a_running_job_of_ones_own_is_signalled():
    """man scancel: "A job or job step can only be signaled by the owner of that job or user
    root"; a pending job has no process to signal (Slurm: "Job is pending execution")."""
    running = Job(1, "a", "alice", "s", "s", "x", state=JobState.RUNNING, nodes=["n0", "n1"], attempts=2)
    pending = Job(2, "b", "alice", "s", "s", "x")
    store = Records(running, pending)
    signal_job(store, 1, Principal("alice"), signal.SIGUSR1, scope(batch=True, full=False))
    assert store.sent == [(1, 2, {n: {"kind": SIGNAL, "signal": 10, "scope": BATCH_SHELL, "by": "alice"}
                                  for n in ("n0", "n1")})]
    with pytest.raises(Conflict, match="job 2 is pending execution"):
        signal_job(store, 2, Principal("alice"), signal.SIGUSR1)
    with pytest.raises(Forbidden):
        signal_job(store, 1, Principal("bob"), signal.SIGUSR1)
    signal_job(store, 1, Principal("root", admin=True), signal.SIGTERM, scope(batch=False, full=True))
    assert store.sent[-1][2]["n0"]["scope"] == FULL
