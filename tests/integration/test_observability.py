"""Observability against a real local cluster and a real Prometheus (Debian's binary): the
shipped config and alert rules pass promtool, Prometheus follows the nodes through the
master's file-SD targets, and every dashboard panel returns data while a DDP training job
runs after a node failure and recovery."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from tests import panels
from tests.conftest import free_port, wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
TRAIN = ROOT / "jobs" / "train_mnist_distributed.py"


def promtool(*args) -> subprocess.CompletedProcess:
    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed; make test installs Debian's prometheus package (scripts/host-deps.sh test)")
    return subprocess.run(["promtool", *args], cwd=CONFIG, capture_output=True, text=True)


def test_promtool_accepts_the_config_and_rules_and_the_rule_unit_tests_pass():
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", "alerts.yml"],
                 ["test", "rules", "alerts.test.yml"]):
        out = promtool(*args)
        assert out.returncode == 0, (args, out.stdout, out.stderr)
    assert "SUCCESS: 6 rules found" in promtool("check", "rules", "alerts.yml").stdout


@pytest.fixture
def prometheus(cluster, tmp_path):
    """Debian's Prometheus, scraping every second the targets the master writes (the shipped
    scrape settings, with local paths) and loading the shipped alert rules."""
    if shutil.which("prometheus") is None:
        pytest.fail("prometheus is not installed; make test installs Debian's prometheus package (scripts/host-deps.sh test)")
    targets = cluster.state_dir / "prometheus" / "targets.json"
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(CONFIG / "alerts.yml")],
        "scrape_configs": [{"job_name": "minihpc", "honor_labels": True,
                            "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}]}],
    }))
    port = free_port()
    proc = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(url), timeout=60, interval=0.2, message="Prometheus ready")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _ready(url) -> bool:
    try:
        return bool(panels.query(url, "vector(1)"))
    except OSError:
        return False


def test_every_dashboard_panel_returns_data_while_training_runs(idle_cluster, prometheus, tmp_path):
    c = idle_cluster
    up = lambda: {r["metric"].get("node") or r["metric"]["component"]  # noqa: E731
                  for r in panels.query(prometheus, 'up{job="minihpc"} == 1')}
    wait_until(lambda: up() == {"master-node", "worker-node-1", "worker-node-2", "cluster"}, timeout=60,
               interval=0.5, message="Prometheus scraping three nodes and the cluster exporter")
    rules = json.load(__import__("urllib.request").request.urlopen(f"{prometheus}/api/v1/rules"))
    assert len([r for g in rules["data"]["groups"] for r in g["rules"]]) == 6

    short = c.submit("-N", 1, ROOT / "jobs" / "hello.py")  # a finished job for the wait/run histograms
    assert c.wait(short)["state"] == "COMPLETED"
    subprocess.run([sys.executable, str(ROOT / "jobs" / "prepare_mnist.py"), "--root",
                    str(c.state_dir / "shared" / "data"), "--source", "digits"], check=True, capture_output=True)
    job_id = c.submit("-N", 3, TRAIN, "--epochs", "200", "--checkpoint-every", "5")
    latest = c.state_dir / "shared" / "models" / f"job-{job_id}" / "LATEST"
    wait_until(latest.exists, timeout=120, interval=0.1, message="a first checkpoint")
    # A node failure and its recovery, for the recovery dashboard.
    drill = json.loads(c.cli("drill", "kill", "--node", "worker-node-1", "--state-dir", c.state_dir, "--json",
                             timeout=300).stdout)
    assert drill["resumed"] is not None, drill
    try:
        wait_until(lambda: panels.query(prometheus, f'minihpc_job_loss{{job="{job_id}"}}'), timeout=60,
                   interval=0.5, message="training metrics in Prometheus")
        time.sleep(5)  # rate() needs two samples of every counter inside its window
        rows = panels.run_all(prometheus)
        print("\n" + panels.table(rows))
        empty = [f"{board}: {panel}" for board, panel, _, finite in rows if finite == 0]
        assert not empty, panels.table(rows)
        running = panels.query(prometheus, "minihpc_job_step")
        assert {r["metric"]["job"] for r in running} == {str(job_id)}
        phases = {r["metric"]["phase"] for r in panels.query(prometheus, "minihpc_job_step_phase_seconds")}
        assert phases == {"data", "forward", "backward", "allreduce", "optimizer"}
    finally:
        c.cli("cancel", job_id)
    # A job's training series end with it: only running jobs carry a job label.
    c.wait(job_id)
    wait_until(lambda: not panels.query(prometheus, "minihpc_job_step"), timeout=30, interval=0.5,
               message="the job's series to go once it ended")

    # Its report: four plots and a summary of both attempts and the failure between them.
    out = tmp_path / "report"
    printed = [Path(p) for p in c.cli("report", job_id, "--out", out).stdout.split()]
    assert [p.name for p in printed] == ["loss.png", "throughput.png", "step_time.png", "timeline.png", "summary.md"]
    for png in printed[:4]:
        with Image.open(png) as image:
            assert image.format == "PNG" and image.size == (900, 420)
            assert len(image.getcolors(1 << 16)) > 8, png  # axes, labels and data, not a blank canvas
    summary = printed[4].read_text()
    print(f"\n{out}\n{summary}")
    assert "**CANCELLED** after 2 attempt(s), 1 requeue(s)" in summary
    assert "- attempt 1: " in summary and "- attempt 2: " in summary
    assert all(f"| rank {r} |" in summary for r in range(3))
    assert "down worker-node-1" in summary and "back worker-node-1" in summary
