"""Observability against a real local cluster and a real Prometheus (Debian's binary): the
shipped config and alert rules pass promtool, Prometheus follows the nodes through the
master's file-SD targets, and every dashboard panel returns data while a DDP training job
runs after a node failure and recovery."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

from tests import panels
from tests.conftest import free_port, wait_until
from tests.integration.conftest import JOBS

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
    assert "SUCCESS: 11 rules found" in promtool("check", "rules", "alerts.yml").stdout


@pytest.fixture
def prometheus(cluster, tmp_path):
    """Debian's Prometheus, scraping every second the targets the master writes (the shipped
    scrape settings of config/prometheus.yml, with local paths) and loading the shipped alert rules."""
    yield from _prometheus(cluster, tmp_path, CONFIG / "alerts.yml")


def _prometheus(cluster, tmp_path, rules: Path):
    if shutil.which("prometheus") is None:
        pytest.fail("prometheus is not installed; make test installs Debian's prometheus package (scripts/host-deps.sh test)")
    targets = cluster.state_dir / "prometheus" / "targets.json"
    shipped = yaml.safe_load((CONFIG / "prometheus.yml").read_text())
    [scrape] = [c for c in shipped["scrape_configs"] if c["job_name"] == "minihpc"]
    scrape = {**scrape, "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}]}
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [scrape],
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
    assert len([r for g in rules["data"]["groups"] for r in g["rules"]]) == 11

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
        wait_until(lambda: panels.query(prometheus, f'minihpc_job_loss{{job_id="{job_id}"}}'), timeout=60,
                   interval=0.5, message="training metrics in Prometheus")
        rows = panels.run_until_filled(prometheus)
        print("\n" + panels.table(rows))
        assert not panels.empty(rows), panels.table(rows)
        running = panels.query(prometheus, "minihpc_job_step")
        assert {(r["metric"]["job_id"], r["metric"]["job"]) for r in running} == {(str(job_id), "minihpc")}
        info = panels.query(prometheus, "minihpc_job_info")
        assert [(r["metric"]["job_id"], r["metric"]["state"]) for r in info] == [(str(job_id), "RUNNING")], info
        # No honor_labels: nothing the exporters send is renamed (their node label, equal to
        # the target's, is dropped as exported_node).
        assert not panels.query(prometheus, '{exported_node!=""}')
        assert not panels.query(prometheus, '{exported_job!=""}')
        phases = {r["metric"]["phase"] for r in panels.query(prometheus, "minihpc_job_step_phase_seconds")}
        assert phases == {"data", "forward", "backward", "allreduce", "optimizer"}
    finally:
        c.cli("cancel", job_id)
    # A job's training series end with it: only running jobs carry a job_id label.
    c.wait(job_id)
    wait_until(lambda: not panels.query(prometheus, "minihpc_job_step"), timeout=30, interval=0.5,
               message="the job's series to go once it ended")

    # Its report: four plots and a summary of both attempts and the failure between them.
    out = tmp_path / "report"
    printed = [Path(p) for p in c.cli("report", job_id, "--out", out).stdout.split()]
    assert [p.name for p in printed] == ["loss.png", "throughput.png", "step_time.png", "rank_step_time.png",
                                         "timeline.png", "summary.md"]
    for png in printed[:5]:
        with Image.open(png) as image:
            assert image.format == "PNG" and image.size == (900, 420)
            assert len(image.getcolors(1 << 16)) > 8, png  # axes, labels and data, not a blank canvas
    summary = printed[5].read_text()
    print(f"\n{out}\n{summary}")
    assert "**CANCELLED** after 2 attempt(s), 1 requeue(s)" in summary
    assert "- attempt 1: " in summary and "- attempt 2: " in summary
    assert all(f"| rank {r} |" in summary for r in range(3))
    assert "down worker-node-1" in summary and "back worker-node-1" in summary


def test_a_slowed_rank_is_named_a_straggler_and_its_alert_fires(idle_cluster, tmp_path):
    """Rank 1 of a 3-node DDP job computes 3x as long as the others: the master records a
    straggler incident naming the rank and its node, the exporter gives its slowdown ratio, and
    a real Prometheus with the shipped rule (its 2-minute ``for`` shortened to 5 s) fires
    MinihpcStraggler for that rank alone."""
    c = idle_cluster
    shipped = (CONFIG / "alerts.yml").read_text()
    rule = shipped.index("alert: MinihpcStraggler")
    wait = shipped.index("for: 2m", rule)
    rules = tmp_path / "alerts.yml"
    rules.write_text(shipped[:wait] + "for: 5s" + shipped[wait + len("for: 2m"):])
    server = _prometheus(c, tmp_path, rules)
    prometheus = next(server)
    job_id = None
    try:
        job_id = c.submit("-N", 3, JOBS / "straggler.py", 2000, 1)
        where = lambda: dict(line.split(" on ")  # noqa: E731
                             for line in c.cli("logs", job_id).stdout.splitlines() if line.startswith("rank "))
        slow_node = wait_until(lambda: where().get("rank 1"), timeout=120, interval=0.5, message="rank 1's node")
        incident = wait_until(lambda: [i for i in json.loads(c.cli("incidents", "--json").stdout)
                                       if i["kind"] == "straggler" and i["job"] == job_id], timeout=60, interval=0.5,
                              message="a straggler incident")
        assert len(incident) == 1 and incident[0]["rank"] == 1 and incident[0]["node"] == slow_node, incident
        assert 2.0 < incident[0]["ratio"] < 4.5, incident  # 3x as long, give or take the machine's noise
        assert f"straggler       {slow_node}" in c.cli("incidents").stdout
        ratios = {r["metric"]["rank"]: float(r["value"][1])
                  for r in wait_until(lambda: panels.query(prometheus, f'minihpc_job_rank_slowdown_ratio{{job_id="{job_id}"}}'),
                                      timeout=30, interval=0.5, message="slowdown ratios in Prometheus")}
        assert set(ratios) == {"0", "1", "2"} and ratios["1"] > 2.0 and ratios["0"] < 1.5 and ratios["2"] < 1.5, ratios
        firing = wait_until(lambda: panels.query(prometheus, 'ALERTS{alertname="MinihpcStraggler",alertstate="firing"}'),
                            timeout=60, interval=0.5, message="MinihpcStraggler firing")
        assert [(a["metric"]["job_id"], a["metric"]["name"], a["metric"]["rank"], a["metric"]["node"])
                for a in firing] == [(str(job_id), "straggler.py", "1", slow_node)], firing
    finally:
        if job_id is not None:
            c.cli("cancel", job_id, check=False)
        server.close()
