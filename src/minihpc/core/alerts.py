"""Alertmanager's webhook notifications as minihpc incidents (pure).

Prometheus evaluates the rules in config/alerts.yml; Alertmanager groups what fires and posts
it to the webhook receiver minihpc serves (``POST /alerts`` of the REST API, which needs the
cluster's alert token). Each alert of a notification becomes one incident of kind ``alert``:
its name, status (firing or resolved), severity, node and job when its labels name them, what
its annotations say and where its runbook is. ``minihpc alerts`` and the web page's incidents
show them; ``minihpc incidents`` shows them among the rest.

The payload is Alertmanager's webhook format, version 4
(https://prometheus.io/docs/alerting/latest/configuration/#webhook_config).
"""

from __future__ import annotations

from minihpc.core.errors import UsageError

KIND = "alert"
"""The incident kind of an alert notification."""
MAX_ALERTS = 200
"""Alerts one notification may carry (Alertmanager's max_alerts in config/alertmanager.yml is lower)."""
TEXT_MAX = 500
"""Characters kept of any one label or annotation."""


def _text(value) -> str:
    return str(value)[:TEXT_MAX] if value is not None else ""


def _job(labels: dict) -> int | None:
    value = str(labels.get("job_id") or "")
    return int(value) if value.isdigit() else None


def incidents(payload) -> list[dict]:
    """The incidents of one webhook notification, in its order; UsageError naming what is
    wrong with a payload that is not Alertmanager's."""
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        raise UsageError("not an Alertmanager notification: expected an object with a list of alerts")
    alerts = payload["alerts"]
    if len(alerts) > MAX_ALERTS:
        raise UsageError(f"a notification may carry at most {MAX_ALERTS} alerts, not {len(alerts)}")
    out = []
    for alert in alerts:
        if not isinstance(alert, dict) or not isinstance(alert.get("labels", {}), dict) \
                or not isinstance(alert.get("annotations", {}), dict):
            raise UsageError("not an Alertmanager notification: each alert needs labels and annotations objects")
        labels, notes = alert.get("labels", {}), alert.get("annotations", {})
        if not labels.get("alertname"):
            raise UsageError("not an Alertmanager notification: an alert has no alertname label")
        status = alert.get("status") or payload.get("status")
        if status not in ("firing", "resolved"):
            raise UsageError(f"alert status must be firing or resolved, not {str(status)[:40]!r}")
        out.append({
            "kind": KIND, "node": _text(labels["node"]) if labels.get("node") else None, "job": _job(labels),
            "alertname": _text(labels["alertname"]), "status": status, "severity": _text(labels.get("severity")),
            "summary": _text(notes.get("summary") or notes.get("description")),
            "runbook_url": _text(notes.get("runbook_url")), "starts_at": _text(alert.get("startsAt")),
            "fingerprint": _text(alert.get("fingerprint")),
        })
    return out


def firing(records: list[dict]) -> list[dict]:
    """Of alert incidents, newest first, those still firing: one per alert (fingerprint, else
    name and node), the newest notification of each deciding."""
    seen, out = set(), []
    for record in records:
        key = record.get("fingerprint") or (record.get("alertname"), record.get("node"), record.get("job"))
        if key in seen:
            continue
        seen.add(key)
        if record.get("status") == "firing":
            out.append(record)
    return out
