"""A job that prints without end cannot fill the shared disk: its log on each node is capped
(MINIHPC_JOB_LOG_MAX, 4 MiB for this suite's cluster), its last lines survive, and the other
jobs' logs are untouched."""

import uuid

import pytest

from tests.integration.conftest import JOBS

pytestmark = pytest.mark.integration

CAP = 4 * 1024 * 1024
"""MINIHPC_JOB_LOG_MAX of the suite's cluster (conftest.Cluster.env)."""


def log_file(cluster, job: dict, node: str):
    return cluster.state_dir / "shared" / "logs" / f"job-{job['id']}" / f"{node}.log"


def test_a_flooding_job_gets_a_capped_log_that_keeps_its_end(idle_cluster):
    token = uuid.uuid4().hex
    flood_id = idle_cluster.submit("-N", 1, JOBS / "flood.py", 50, token)
    honest_id = idle_cluster.submit("-N", 1, JOBS / "chatty.py", 20)
    flood, honest = idle_cluster.wait(flood_id, timeout=120), idle_cluster.wait(honest_id)
    assert flood["state"] == "COMPLETED", flood
    assert honest["state"] == "COMPLETED", honest

    data = log_file(idle_cluster, flood, flood["nodes"][0]).read_bytes()
    assert len(data) <= CAP + 64 * 1024, f"the log of a job that printed 50 MiB holds {len(data)} bytes"
    assert b"bytes of output were dropped here: the log of each job is capped at 4194304 bytes per node" in data
    text = data.decode()
    last = text.index(f"LAST LINE {token}")
    assert text.index("bytes of output were dropped here") < last < text.index(": exit code 0")

    node = honest["nodes"][0]
    lines = log_file(idle_cluster, honest, node).read_text().splitlines()
    printed = [line for line in lines if line.startswith("rank 0 line")]
    assert printed == [f"rank 0 line {i} of 20" for i in range(1, 21)]
    assert "dropped" not in "\n".join(lines)
    assert lines[0].startswith("===") and f"job {honest_id} on {node}: exit code 0" in lines[-1]
