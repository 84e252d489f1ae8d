"""The committed dashboards are what scripts/dashboards.py generates, and every panel is wired
to the provisioned datasource with a fixed uid."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))


def test_committed_dashboards_match_their_generator():
    out = subprocess.run([sys.executable, ROOT / "scripts" / "dashboards.py", "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_four_dashboards_with_fixed_uids_on_the_provisioned_datasource():
    boards = [json.loads(p.read_text()) for p in DASHBOARDS]
    assert {b["uid"] for b in boards} == {"minihpc-cluster", "minihpc-nodes", "minihpc-training", "minihpc-recovery"}
    datasource = (ROOT / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    assert "uid: minihpc-prometheus" in datasource
    for board in boards:
        assert board["schemaVersion"] >= 39
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids))
        for p in board["panels"]:
            assert p["datasource"]["uid"] == "minihpc-prometheus" and p["targets"], p["title"]
            assert all(t["expr"] and t["datasource"]["uid"] == "minihpc-prometheus" for t in p["targets"])
