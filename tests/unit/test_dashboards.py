"""The committed dashboards are what scripts/dashboards.py generates, and every panel is wired
to the provisioned datasource with a fixed uid."""

import json
import re
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


def test_job_and_node_variables_filter_the_queries_and_legends_name_jobs_through_job_info():
    from tests import panels

    for board in (json.loads(p.read_text()) for p in DASHBOARDS):
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert set(variables) <= {"job_id", "node"}, board["title"]
        for v in variables.values():
            assert v["type"] == "query" and v["datasource"]["uid"] == "minihpc-prometheus"
            assert v["multi"] and v["includeAll"] and v["allValue"] == ".*", v
            assert v["query"] == {"job_id": "label_values(minihpc_job_info, job_id)",
                                  "node": "label_values(minihpc_node_cpus, node)"}[v["name"]]
        targets = [t for p in board["panels"] for t in p["targets"]]
        used = {name for t in targets for name in re.findall(r"\$(\w+)", t["expr"])}
        assert used == set(variables), (board["title"], used)
        for t in targets:
            assert all(op == "=~" for op in re.findall(r'(..)"\$', t["expr"])), t["expr"]  # several values: a regex
            assert "$" not in panels.at_all(t["expr"], board)
            # Prometheus's own `job` label is the scrape job's; a job's id is job_id.
            assert not re.search(r"\bjob=", t["expr"].replace('up{job="minihpc"}', "")), t["expr"]
            assert "{{job}}" not in t["legendFormat"]
            if "{{job_id}}" in t["legendFormat"]:
                assert "{{name}}" in t["legendFormat"] and "group_left(name) minihpc_job_info" in t["expr"], t
    assert panels.at_all('minihpc_job_loss{job_id=~"$job_id", node=~"${node}"}',
                         {"title": "t", "templating": {"list": [{"name": "job_id", "allValue": ".*"},
                                                                {"name": "node"}]}}) == \
        'minihpc_job_loss{job_id=~".*", node=~".*"}'
