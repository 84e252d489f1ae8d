"""queue, history and cancel with Slurm's options (squeue, sacct, scancel) on a real local
cluster: filters, formats, the backfill plan's start estimates, and cancelling by filter."""

import json
import time

import pytest

from tests.conftest import wait_until
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration


def lines(proc) -> list[str]:
    return proc.stdout.splitlines()


def stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def test_queue_filters_formats_and_expected_starts(idle_cluster, tmp_path):
    """squeue(1) -t, --states=<state_list>; -j, --jobs=<job_id_list>; -u, --user=<user_list>;
    -o, --format=<output_format>; --start ("the expected start time ... of pending jobs")."""
    c, gate = idle_cluster, tmp_path / "open"
    blocker = c.submit("-N", 3, "-t", "10:00", "-J", "blocker", JOBS / "gate.py", gate)
    wait_until(lambda: c.show(blocker)["state"] == "RUNNING", timeout=30, message="blocker running")
    later = c.submit("-N", 1, "-t", "1:00", "-J", "later", JOBS / "gate.py", gate)
    dep = c.submit("-d", f"afterok:{blocker}", "-J", "dep", JOBS / "gate.py", gate)
    me = c.show(blocker)["user"]

    assert lines(c.cli("queue", "-t", "R", "-o", "%i", "--noheader")) == [str(blocker)]
    assert lines(c.cli("queue", "-t", "pd", "-o", "%i", "--noheader")) == [str(later), str(dep)]
    assert lines(c.cli("queue", "--states", "PENDING,RUNNING", "-j", f"{later},{dep}", "-o", "%i %j %t",
                       "--noheader")) == [f"{later} later PD", f"{dep} dep PD"]
    assert lines(c.cli("queue", "-u", me, "-t", "PD,R", "-o", "%i", "--noheader")) == [str(blocker), str(later), str(dep)]
    assert lines(c.cli("queue", "-t", "all", "-j", f"{dep},{blocker}", "-o", "%i", "--noheader")) == [str(blocker), str(dep)]
    assert lines(c.cli("queue", "-u", "nosuchuser", "--noheader")) == []
    assert {j["id"] for j in json.loads(c.cli("queue", "-t", "PD", "--json").stdout)} == {later, dep}

    header, row = lines(c.cli("queue", "-j", blocker, "-o", "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"))
    assert header == "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    assert row.split()[:5] == [str(blocker), "main", "blocker", me[:8], "R"]
    assert row.split()[6:] == ["3", "master-node,worker-node-[1-2]"]

    # The backfill plan: "later" gets all three nodes when the blocker's 10 minutes are up;
    # "dep" waits on a dependency, so no start can be promised.
    ends = c.show(blocker)["started_at"] + 600
    start = lines(c.cli("queue", "--start"))
    assert start[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME", "NODES", "SCHEDNODES",
                                "NODELIST(REASON)"]
    assert [r.split()[0] for r in start[1:]] == [str(later), str(dep)]
    assert start[1].split()[5] == stamp(ends) and "(Resources)" in start[1]
    assert start[2].split()[5] == "N/A" and "(Dependency)" in start[2]
    estimates = {j["id"]: j["expected_start"] for j in json.loads(c.cli("queue", "--start", "--json").stdout)}
    assert estimates[dep] is None and abs(estimates[later] - ends) < 1

    bad = c.cli("queue", "-t", "DONE", check=False)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "'DONE'" in bad.stderr
    bad = c.cli("queue", "-o", "%.18i %z", check=False)
    assert bad.returncode != 0 and "%z" in bad.stderr
    gate.touch()


def test_cancel_by_name_state_and_user(idle_cluster, tmp_path):
    """scancel(1) -n, --name=job_name; -t, --state=job_state_name; -u, --user=user_name: ANDed
    with each other and with the ids; only jobs the caller may cancel; -s, --signal of a pending job refused (it has no processes)."""
    c, gate = idle_cluster, tmp_path / "open"
    blocker = c.submit("-N", 3, "-J", "blocker", JOBS / "gate.py", gate)
    wait_until(lambda: c.show(blocker)["state"] == "RUNNING", timeout=30, message="blocker running")
    first = c.submit("-J", "first", JOBS / "gate.py", gate)
    second = c.submit("-J", "second", JOBS / "gate.py", gate)
    me = c.show(blocker)["user"]

    assert c.cli("cancel", "-n", "first").stdout == f"Cancelled job {first}\n"
    assert c.show(first)["state"] == "CANCELLED" and c.show(second)["state"] == "PENDING"

    # Another (non-admin) user's filter matches our pending job but may not cancel it.
    carol = dict(c.env, MINIHPC_TOKEN=c.cli("token", "create", "scancel-carol").stdout.strip())
    other = c.cli("cancel", "-t", "PENDING", env=carol)
    c.cli("token", "revoke", "scancel-carol")
    assert other.returncode == 0 and other.stdout == "" and "left alone 1" in other.stderr
    assert c.show(second)["state"] == "PENDING"

    assert c.cli("cancel", "-t", "R", "-n", "nomatch", blocker).stdout == ""  # ids AND filters
    refused = c.cli("cancel", "--signal", "USR1", second, check=False)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert f"job {second} is pending execution" in refused.stderr
    assert c.show(second)["state"] == "PENDING" and c.show(blocker)["state"] == "RUNNING"

    assert c.cli("cancel", "-t", "PD", "-u", me).stdout == f"Cancelled job {second}\n"
    assert c.cli("cancel", "--state", "RUNNING", "--user", me, blocker).stdout == f"Cancelled job {blocker}\n"
    assert c.show(blocker)["state"] == "CANCELLED"
    empty = c.cli("cancel", check=False)
    assert empty.returncode == 1 and "no job identification provided" in empty.stderr


def test_history_filters_windows_and_sacct_formats(idle_cluster, tmp_path):
    """sacct(1) -j, --jobs; -s, --state; -S, --starttime / -E, --endtime; -o, --format;
    -P, --parsable2; -p, --parsable; -n, --noheader; -X, --allocations."""
    c, gate = idle_cluster, tmp_path / "open"
    gate.touch()
    ok = c.submit("-J", "hist-ok", JOBS / "gate.py", gate)
    assert c.wait(ok)["state"] == "COMPLETED"
    bad = c.submit("-J", "hist-bad", JOBS / "fail_rank.py", 0, 4, tmp_path / "f")
    assert c.wait(bad)["state"] == "FAILED"
    both = f"{ok},{bad}"

    def sacct(*args) -> list[str]:
        return lines(c.cli("history", "-j", both, *args))

    assert sacct("-o", "JobID,JobName,State,ExitCode", "-P", "-n") == [f"{ok}|hist-ok|COMPLETED|0:0",
                                                                        f"{bad}|hist-bad|FAILED|4:0"]
    assert sacct("-o", "jobid,STATE", "--parsable2") == ["JobID|State", f"{ok}|COMPLETED", f"{bad}|FAILED"]
    assert sacct("-s", "F", "-o", "JobID", "-P", "-n") == [str(bad)]
    assert [j["id"] for j in json.loads("\n".join(sacct("--state", "completed,ca", "--json")))] == [ok]
    assert sacct("-S", "now-10minutes", "-o", "JobID", "-P", "-n") == [str(ok), str(bad)]
    before = stamp(c.show(ok)["submitted_at"] - 120)
    assert sacct("-E", before, "-o", "JobID", "-P", "-n") == []
    assert sacct("-S", before, "-E", "now", "-s", "CD", "-o", "JobID", "-P", "-n") == [str(ok)]
    assert sacct("-p", "-n", "-o", "JobID,ExitCode") == [f"{ok}|0:0|", f"{bad}|4:0|"]
    assert sacct("-X", "-o", "JobID%-8,JobName%12,State") == [
        "JobID         JobName      State ", "-------- ------------ ---------- ",
        f"{ok:<8}      hist-ok  COMPLETED ", f"{bad:<8}     hist-bad     FAILED "]
    plain = [row.split() for row in sacct("-n")]  # minihpc's own table, without its header
    assert [(r[0], r[1], r[3]) for r in plain] == [(str(ok), "hist-ok", "COMPLETED"), (str(bad), "hist-bad", "FAILED")]
    assert lines(c.cli("history", "-n", "--limit", "1", "-o", "JobID", "-P")) == [str(bad)]

    for args, words in ((("-S", "yesterday"), "invalid time 'yesterday' for --starttime"),
                        (("-o", "JobID,Bogus"), "invalid field 'Bogus'"),
                        (("-s", "XX"), "invalid job state 'XX'")):
        proc = c.cli("history", *args, check=False)
        assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr

