"""Attacks from inside a job on the Compose cluster (issue 11): a job runs as its own user with
no keys to the cluster. Each attempt of tests/e2e/jobs/attack.py must be refused or contained,
while an honest job beside it completes untouched."""

import json
import re
import secrets
from pathlib import Path

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

    assert re.search(r"attacker uid 10002 gid 10002 groups \[\]", logs), logs
    attempts = dict(re.findall(r"^(?:\S+: )?ATTACK (.+?): (\w+)", logs, re.M))
    expected = {
        "read the Redis password", "write a key in Redis", "call the restart proxy",
        "write /shared/jobs/redis.py", "write /opt/minihpc/redis.py", "write /opt/minihpc/src/minihpc/__init__.py",
        "write /opt/venv/lib/python3.11/site-packages/redis.py", "rewrite another job's spooled script",
        "signal a daemon", "leave a daemon behind", "fill the disk with logs",
    }
    assert set(attempts) == expected, logs
    assert "SUCCEEDED" not in attempts.values(), logs
    assert _env_value("REDIS_NODE_PASSWORD") not in logs and _env_value("RESTART_TOKEN") not in logs
    assert re.search(r"ATTACK write a key in Redis: refused \(-NOAUTH", logs), logs

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
    pid = int(idle.docker_compose("exec", "-T", node, "cat", f"/tmp/left-behind-{attack}").stdout)
    assert not _alive_in(idle, node, pid)

    done = idle.wait(honest, timeout=120)
    assert done["state"] == "COMPLETED", done
    assert done["script_sha256"] == honest_job["script_sha256"]
    wait_until(lambda: {n["state"] for n in json.loads(idle.minihpc("nodes", "--json").stdout)} == {"idle"},
               timeout=30, interval=0.5, message="every node idle again")
