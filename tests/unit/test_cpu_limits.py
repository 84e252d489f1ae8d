"""`make up` turns MINIHPC_CPUS_<NODE> into each node container's CPU period and quota
(scripts/workers.sh: cpu_quotas): a short period, so a limited node is a slower CPU rather than
one that stalls for most of each 100 ms; bad values stop `make up` with one line."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def quotas(tmp_path, workers=2, **cpus):
    script = ("source scripts/dotenv.sh && source scripts/workers.sh && cpu_quotas {n} && "
              "env | grep ^MINIHPC_CPU_ | sort").format(n=workers)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIHPC_CPU")}
    env.update({f"MINIHPC_CPUS_{k.upper()}": v for k, v in cpus.items()}, ENV_FILE=str(tmp_path / "none.env"))
    return subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)


def test_limits_become_a_quota_per_4_ms_and_no_limit_stays_none(tmp_path):
    out = quotas(tmp_path, master_node="0.8", worker_node_1="0.4", worker_node_2="0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "MINIHPC_CPU_PERIOD_MASTER_NODE=4000", "MINIHPC_CPU_PERIOD_WORKER_NODE_1=4000",
        "MINIHPC_CPU_PERIOD_WORKER_NODE_2=100000", "MINIHPC_CPU_QUOTA_MASTER_NODE=3200",
        "MINIHPC_CPU_QUOTA_WORKER_NODE_1=1600", "MINIHPC_CPU_QUOTA_WORKER_NODE_2=0"]


def test_small_limits_get_a_longer_period_for_the_kernels_1_ms_minimum_and_extra_workers_count(tmp_path):
    out = quotas(tmp_path, workers=3, worker_node_3="0.05", master_node="2")
    assert out.returncode == 0, out.stderr
    assert "MINIHPC_CPU_PERIOD_WORKER_NODE_3=20000" in out.stdout.split()
    assert "MINIHPC_CPU_QUOTA_WORKER_NODE_3=1000" in out.stdout.split()
    assert "MINIHPC_CPU_QUOTA_MASTER_NODE=8000" in out.stdout.split()
    assert "MINIHPC_CPU_QUOTA_WORKER_NODE_1=0" in out.stdout.split()  # unset: no limit


@pytest.mark.parametrize("value", ["abc", "0.001", "-1"])
def test_a_bad_limit_is_one_line_and_exit_2(tmp_path, value):
    out = quotas(tmp_path, worker_node_1=value)
    assert out.returncode == 2
    assert out.stderr.strip() == (f"up: MINIHPC_CPUS_WORKER_NODE_1 must be a number of CPUs (0.01 or more; "
                                  f"0: no limit), not '{value}'")
