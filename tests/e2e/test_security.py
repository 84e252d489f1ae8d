"""Attacks from inside a job on the Compose cluster (issue 11): a job runs as its own user with
no keys to the cluster. Each attempt of tests/e2e/jobs/attack.py must be refused or contained,
while an honest job beside it completes untouched."""

import json
import re
import secrets
import time
from pathlib import Path

from tests.attacks import TENANT_ATTACKS
from tests.conftest import wait_until
from tests.e2e.conftest import LOG_MAX

ROOT = Path(__file__).resolve().parents[2]
FLOOD_MIB = 32
"""MiB of output the hostile job writes to its log, well past the suite's cap (conftest's LOG_MAX)."""


def _env_value(key: str) -> str:
    text = (ROOT / ".env").read_text()
    return re.findall(rf"^{key}=(.*)$", text, re.M)[-1]


def _alive_in(cluster, node: str, pid: int) -> bool:
    probe = f"import psutil; print(psutil.pid_exists({pid}) and psutil.Process({pid}).status() != 'zombie')"
    return cluster.docker_compose("exec", "-T", node, "python3", "-c", probe).stdout.strip() == "True"


def test_a_hostile_job_is_refused_everything_and_an_honest_job_beside_it_completes(idle):
    honest = idle.submit("tests/e2e/jobs/sleepy.py", nodes=2, args="25")
    wait_until(lambda: idle.show(honest)["state"] == "RUNNING", timeout=60, interval=0.5,
               message=f"job {honest} running")
    honest_job = idle.show(honest)
    marker = secrets.token_hex(8)
    attack = idle.submit("tests/e2e/jobs/attack.py", nodes=1, args=f"{honest_job['script']} {FLOOD_MIB} {marker}")
    job = idle.wait(attack, timeout=120)
    logs = idle.make("logs", f"ID={attack}").stdout
    print(logs)  # the attempts, one line each, for the record
    assert job["state"] == "COMPLETED", logs

    # Its user (the CLI's, `minihpc` in the control container: the daemons' account) is never a
    # job's: the job runs under the uid the cluster gave that user (core.tenants).
    assert int(re.search(r"attacker uid (\d+) gid \1 groups \[\]", logs)[1]) >= 200_000, logs
    attempts = dict(re.findall(r"^(?:\S+: )?ATTACK (.+?): (\w+)", logs, re.M))
    expected = {
        "read the Redis password", "write a key in Redis", "open 10000 connections to Redis", "call the restart proxy",
        "write /shared/jobs/redis.py", "write /opt/minihpc/redis.py", "write /opt/minihpc/src/minihpc/__init__.py",
        "write /opt/venv/lib/python3.11/site-packages/redis.py", "rewrite another job's spooled script",
        "signal a daemon", "leave a daemon behind", "fill the disk with logs",
    }
    assert set(attempts) == expected, logs
    assert "SUCCEEDED" not in attempts.values(), logs
    assert _env_value("REDIS_NODE_PASSWORD") not in logs and _env_value("RESTART_TOKEN") not in logs
    # The node's firewall rule by uid (core.firewall): a job cannot even connect to Redis.
    assert re.search(r"ATTACK write a key in Redis: refused \(ConnectionRefusedError", logs), logs
    assert re.search(r"ATTACK open 10000 connections to Redis: refused \(0 opened, then ConnectionRefusedError",
                     logs), logs

    # Its flood of output was capped (MINIHPC_JOB_LOG_MAX, set for this suite) and its last line kept.
    node = job["nodes"][0]
    size = int(idle.docker_compose("exec", "-T", "control", "stat", "-c", "%s",
                                   f"/shared/logs/job-{attack}/{node}.log").stdout)
    print(f"the log of a job that printed {FLOOD_MIB} MiB holds {size} bytes")
    assert size <= LOG_MAX + 64 * 1024, size
    assert re.search(r"=== minihpc: \d+ bytes of output were dropped here", logs), logs[-2000:]
    assert f"ATTACK-END {marker}" in logs

    # The daemon it left behind ended with its rank (and the job could end), and the log says so.
    assert "1 process(es) the script left running were ended with its rank" in logs, logs
    pid = int(re.search(r"left behind: pid (\d+)", logs)[1])
    assert not _alive_in(idle, node, pid)

    done = idle.wait(honest, timeout=120)
    assert done["state"] == "COMPLETED", done
    assert done["script_sha256"] == honest_job["script_sha256"]
    wait_until(lambda: {n["state"] for n in json.loads(idle.minihpc("nodes", "--json").stdout)} == {"idle"},
               timeout=30, interval=0.5, message="every node idle again")


def _uid_processes(cluster, node: str, uid: int) -> int:
    probe = (f"import psutil; print(sum(1 for p in psutil.process_iter(['uids', 'status']) "
             f"if p.info['uids'] and p.info['uids'].real == {uid} and p.info['status'] != 'zombie'))")
    return int(cluster.docker_compose("exec", "-T", node, "python3", "-c", probe).stdout)


def test_each_users_job_runs_as_that_user_and_cannot_touch_anothers(idle):
    """Issue 33: alice's and bob's jobs run under uids of their own (the same on every node);
    bob's job can neither list, read nor write alice's checkpoint folder, and the re-forking
    daemon it leaves behind is gone within 1 s of its end, on its node, while alice's job
    completes with its checkpoint intact."""
    import httpx

    url = f"http://127.0.0.1:{idle.env['MINIHPC_API_PORT']}"
    script = (ROOT / "tests/e2e/jobs/tenant.py").read_text()

    def submit(user, args, nodes):
        token = idle.make("token", f"USER={user}").stdout.strip().splitlines()[-1]
        r = httpx.post(f"{url}/jobs", json={"script": script, "script_name": "tenant.py", "args": args,
                                            "nodes": nodes}, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert r.status_code == 201, r.text
        return r.json()["id"]

    alice = submit("alice", ["keep", "20"], 2)
    wait_until(lambda: idle.show(alice)["state"] == "RUNNING", timeout=60, interval=0.5, message="alice's job running")
    bob = submit("bob", ["attack", str(alice)], 1)
    bobs = idle.wait(bob, timeout=120)
    ended = time.monotonic()
    node = bobs["nodes"][0]
    bob_logs = idle.make("logs", f"ID={bob}").stdout
    bob_uid = int(re.search(r"tenant uid (\d+) gid (\d+) groups \[\]", bob_logs)[1])
    alive = _uid_processes(idle, node, bob_uid)
    print(f"{alive} process(es) of bob's uid on {node} {time.monotonic() - ended:.2f} s after his job ended")
    assert bobs["state"] == "COMPLETED", bob_logs
    assert "left a re-forking daemon behind" in bob_logs, bob_logs
    assert alive == 0, bob_logs
    attempts = dict(re.findall(r"ATTACK (.+?): (\w+)", bob_logs))
    assert attempts == {a: "refused" for a in TENANT_ATTACKS}, bob_logs

    done = idle.wait(alice, timeout=120)
    alice_logs = idle.make("logs", f"ID={alice}").stdout
    assert done["state"] == "COMPLETED", alice_logs
    assert alice_logs.count("KEPT") == 2, alice_logs
    alice_uids = set(re.findall(r"tenant uid (\d+) gid \1 groups \[\] home (\S+)", alice_logs))
    assert len(alice_uids) == 1, alice_logs  # the same uid on both of its nodes
    (alice_uid, home), = alice_uids
    assert int(alice_uid) >= 200_000 and bob_uid >= 200_000 and int(alice_uid) != bob_uid, (alice_uid, bob_uid)
    assert home == f"/var/lib/minihpc-homes/{alice_uid}"
    # Hers, and the daemons' group's to read (make validate-model); no one else's.
    assert re.search(rf"checkpoint dir mode 0o750 uid {alice_uid}", alice_logs), alice_logs
    assert re.search(r"^tenant name alice$", alice_logs, re.M), alice_logs
