"""Alertmanager's webhook notifications as incidents (minihpc.core.alerts)."""

import pytest

from minihpc.core import alerts
from minihpc.core.errors import UsageError


def notification(*items, status="firing"):
    return {"version": "4", "status": status, "receiver": "minihpc", "groupLabels": {}, "alerts": list(items)}


def alert(name="MinihpcNodeDrained", status="firing", fingerprint="f1", **labels):
    return {"status": status, "labels": {"alertname": name, "severity": "warning", **labels},
            "annotations": {"summary": f"{name} on {labels.get('node')}", "runbook_url": "docs/runbooks.md#x"},
            "startsAt": "2026-11-27T08:00:00Z", "endsAt": "0001-01-01T00:00:00Z", "fingerprint": fingerprint}


def test_each_alert_becomes_an_incident_naming_its_node_job_and_runbook():
    (one, two) = alerts.incidents(notification(alert(node="worker-node-2"), alert("MinihpcJobNoProgress", job_id="17",
                                                                                  fingerprint="f2")))
    assert one == {"kind": "alert", "node": "worker-node-2", "job": None, "alertname": "MinihpcNodeDrained",
                   "status": "firing", "severity": "warning", "summary": "MinihpcNodeDrained on worker-node-2",
                   "runbook_url": "docs/runbooks.md#x", "starts_at": "2026-11-27T08:00:00Z", "fingerprint": "f1"}
    assert two["job"] == 17 and two["node"] is None


@pytest.mark.parametrize("payload, message", [
    ([], "list of alerts"),
    ({"alerts": "x"}, "list of alerts"),
    ({"alerts": [{"labels": {}}]}, "no alertname"),
    ({"alerts": [{"labels": {"alertname": "A"}, "status": "odd"}]}, "firing or resolved"),
    ({"alerts": [{"labels": "A"}]}, "labels and annotations"),
    ({"alerts": [alert()] * (alerts.MAX_ALERTS + 1)}, "at most"),
])
def test_what_is_not_an_alertmanager_notification_is_refused_with_one_line(payload, message):
    with pytest.raises(UsageError, match=message):
        alerts.incidents(payload)


def test_labels_and_annotations_are_cut_to_a_bounded_size():
    (one,) = alerts.incidents(notification(alert(node="n" * 10_000)))
    assert len(one["node"]) == alerts.TEXT_MAX


def test_an_alert_is_firing_until_its_newest_notification_resolves_it():
    newest_first = alerts.incidents(notification(alert(status="resolved", node="a")))
    newest_first += alerts.incidents(notification(alert(node="b", fingerprint="f2")))
    newest_first += alerts.incidents(notification(alert(node="a")))
    assert [a["node"] for a in alerts.firing(newest_first)] == ["b"]
