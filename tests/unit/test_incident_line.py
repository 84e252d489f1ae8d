from minihpc.cli.display import incident_line


def test_an_incident_line_quotes_a_phrase_and_rounds_seconds():
    line = incident_line({"at": 0.0, "kind": "requeued", "node": "worker-node-2", "job": 7, "attempt": 1,
                          "reason": "node worker-node-2 failed", "silent_for": 2.345, "cause": None})
    assert line.endswith('attempt=1 reason="node worker-node-2 failed" silent_for=2.3'), line
    assert "requeued" in line and "worker-node-2" in line and "job 7" in line and "cause" not in line
