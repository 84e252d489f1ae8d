"""Every panel query of every committed Grafana dashboard, run through a real Prometheus's
HTTP API: shared by the local-mode integration test and the Compose end-to-end test. A query's
dashboard variables (``$job_id``, ``$node``) are given what Grafana sends for "All": the
variable's ``allValue`` (``.*``, matched with ``=~``)."""

import json
import math
import re
import time
import urllib.parse
import urllib.request
from pathlib import Path

DASHBOARDS = sorted((Path(__file__).resolve().parents[1] / "grafana" / "dashboards").glob("*.json"))


def query(base_url: str, expr: str) -> list[dict]:
    url = f"{base_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", (expr, body)
    return body["data"]["result"]


def at_all(expr: str, board: dict) -> str:
    """``expr`` with each of the board's variables (``$name`` or ``${name}``) set to "All"."""
    for var in board.get("templating", {}).get("list", []):
        value = var.get("allValue") or ".*"
        expr = re.sub(r"\$(?:\{%s\}|%s\b)" % (var["name"], var["name"]), lambda _: value, expr)
    assert "$" not in expr, f"{board['title']}: a variable the board does not declare in {expr}"
    return expr


def run_all(base_url: str) -> list[tuple[str, str, int, int]]:
    """(dashboard, panel, series returned, of which finite) for every panel, over all its targets."""
    rows = []
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            series = finite = 0
            for target in panel["targets"]:
                for item in query(base_url, at_all(target["expr"], board)):
                    series += 1
                    finite += math.isfinite(float(item["value"][1]))
            rows.append((board["title"], panel["title"], series, finite))
    return rows


def empty(rows) -> list[str]:
    """The panels that returned no finite value: "dashboard: panel"."""
    return [f"{board}: {panel}" for board, panel, _, finite in rows if finite == 0]


def run_until_filled(base_url: str, timeout: float = 60.0, interval: float = 1.0) -> list[tuple[str, str, int, int]]:
    """run_all() again until every panel returns a finite value, or ``timeout`` has passed (the
    last rows either way): a rate() needs two scrapes of every counter inside its window."""
    deadline = time.monotonic() + timeout
    while True:
        rows = run_all(base_url)
        if not empty(rows) or time.monotonic() > deadline:
            return rows
        time.sleep(interval)


def table(rows) -> str:
    return "\n".join(f"{board} | {panel} | {series} series ({finite} finite)" for board, panel, series, finite in rows)
