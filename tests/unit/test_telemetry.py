"""What a progress record may hold (core.telemetry), and the outage and stale-allocation
decisions of issue 11 (core.outage, core.scheduler.stale_allocations)."""

import json

import pytest

from minihpc.core.models import JobState, NodeStatus
from minihpc.core.outage import answered_late, in_outage_grace, lapsing_silence
from minihpc.core.scheduler import stale_allocations
from minihpc.core.telemetry import MAX_BYTES, METRICS, PHASES, check_record
from minihpc.job import progress

NOW = 1_700_000_000.0


def check(record, now=NOW):
    return check_record(record if isinstance(record, (str, bytes)) else json.dumps(record), now)


def test_a_good_record_passes_whole():
    record = {"step": 12, "at": NOW - 1, "total": 100, "loss": 0.25, "samples_per_second": 900.5,
              "grad_norm": 1.5, "rank": 0, "data_seconds": 0.01, "allreduce_seconds": 0.002}
    checked = check(record)
    assert checked.problems == []
    assert checked.record == record


def test_what_the_sdk_writes_passes(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    monkeypatch.setenv(progress.ENV, str(path))
    timer = progress.StepTimer()
    progress.report(3, total=10, loss=0.5, rank=0, **timer.lap(samples=8))
    checked = check_record(path.read_bytes(), json.loads(path.read_text())["at"])
    assert checked.problems == [] and checked.record["step"] == 3


def test_core_knows_the_phases_the_sdk_times():
    assert PHASES == progress.PHASES
    assert {f"{p}_seconds" for p in progress.PHASES} <= METRICS


@pytest.mark.parametrize("record,why", [
    ({"step": "abc", "at": NOW}, "step 'abc'"),
    ({"step": -1, "at": NOW}, "step -1"),
    ({"step": 1.5, "at": NOW}, "step 1.5"),
    ({"step": True, "at": NOW}, "step True"),
    ({"step": 10 ** 400, "at": NOW}, "step 1000"),
    ({"at": NOW}, "step None"),
    ({"step": 1}, "at None"),
    ({"step": 1, "at": "now"}, "at 'now'"),
    ('{"step": 1, "at": NaN}', "at nan"),
    ('{"step": 1, "at": Infinity}', "at inf"),
    ({"step": 1, "at": 1}, "from the node's clock"),  # would look stalled at once
    ({"step": 1, "at": NOW + 3600}, "from the node's clock"),  # would never look stalled
    ("not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    ("[1, 2]", "not a JSON object but list"),
    ("3", "not a JSON object but int"),
    ({"step": 1, "at": NOW, "loss": "x" * MAX_BYTES}, "bytes; at most"),
    ({"step": 1, "at": NOW, **{f"k{i}": i for i in range(40)}}, "42 keys"),
])
def test_a_bad_record_is_rejected_with_the_reason(record, why):
    checked = check(record)
    assert checked.record is None
    assert len(checked.problems) == 1 and why in checked.problems[0], checked.problems


def test_bad_metrics_and_reserved_keys_are_dropped_and_said():
    checked = check('{"step": 1.0, "at": %r, "note": "x", "node": "evil", "attempt": 9, "loss": NaN, '
                    '"total": "10", "grad_norm": Infinity, "rank": 1, "bad key": 2}' % NOW)
    assert checked.record == {"step": 1, "at": NOW, "rank": 1}
    assert isinstance(checked.record["step"], int)
    assert sorted(checked.problems) == sorted([
        "note 'x' is not a number; dropped", "key 'node' dropped (reserved, or not a metric name)",
        "key 'attempt' dropped (reserved, or not a metric name)", "total '10' is not a number; dropped",
        "key 'bad key' dropped (reserved, or not a metric name)",
    ])  # a NaN loss or an infinite gradient norm is the job's news, not a malformed record


def test_a_job_may_report_its_own_metrics():
    checked = check_record(json.dumps({"step": 1, "at": NOW, "accuracy": 0.9, "lr": 1e-3}), NOW)
    assert checked.record == {"step": 1, "at": NOW, "accuracy": 0.9, "lr": 1e-3} and checked.problems == []


def test_deeply_nested_json_is_rejected_not_raised():
    checked = check_record(b'{"a":' + b"[" * 4000, NOW)
    assert checked.record is None and "not JSON" in checked.problems[0]


def test_outage_grace_lasts_one_node_timeout_and_a_heartbeat_after_redis_answers():
    assert not in_outage_grace(None, NOW, 2.5, 0.5)
    assert in_outage_grace(NOW, NOW, 2.5, 0.5)
    assert in_outage_grace(NOW, NOW + 2.99, 2.5, 0.5)
    assert not in_outage_grace(NOW, NOW + 3.0, 2.5, 0.5)
    # A node's client may still be in a connection attempt (3 s) begun while Redis was away.
    assert in_outage_grace(NOW, NOW + 5.99, 2.5, 0.5, reconnect=3.0)
    assert not in_outage_grace(NOW, NOW + 6.0, 2.5, 0.5, reconnect=3.0)


def test_an_answer_counts_as_an_outage_only_when_an_alive_key_could_have_lapsed():
    # heartbeats every 0.5 s with a 2.5 s TTL: a 2 s silence can lapse one; 1.5 s is the line.
    # a key written a heartbeat before the silence lapses after node_timeout - heartbeat = 2.0 s
    assert lapsing_silence(2.5, 0.5) == 2.0
    assert not answered_late(took=1.9, expected=0.0, node_timeout=2.5, heartbeat_interval=0.5)
    assert answered_late(took=2.1, expected=0.0, node_timeout=2.5, heartbeat_interval=0.5)
    assert not answered_late(took=1.9, expected=0.5, node_timeout=2.5, heartbeat_interval=0.5)  # a BLPOP's wait
    assert answered_late(took=6.0, expected=0.5, node_timeout=2.5, heartbeat_interval=0.5)


def nodes(**held):
    return [NodeStatus(name, name, alive=True, job=job) for name, job in held.items()]


def test_an_allocation_of_a_job_that_stopped_running_is_freed_after_the_grace():
    states = {1: JobState.RUNNING, 2: JobState.COMPLETED, 3: JobState.PENDING}
    snapshot = nodes(a=1, b=2, c=3, d=None, e=4)  # job 4 has no record
    seen, free = stale_allocations(snapshot, {**states, 4: None}, {}, NOW, grace=8.0)
    assert seen == {"b": (2, NOW), "c": (3, NOW), "e": (4, NOW)} and free == []
    seen, free = stale_allocations(snapshot, {**states, 4: None}, seen, NOW + 7.9, grace=8.0)
    assert free == []
    seen, free = stale_allocations(snapshot, {**states, 4: None}, seen, NOW + 8.0, grace=8.0)
    assert sorted(free) == [("b", 2), ("c", 3), ("e", 4)]


def test_a_freed_or_reheld_allocation_starts_over():
    seen = {"b": (2, NOW), "c": (3, NOW)}
    # b was freed by its report; c now holds job 5, which ended too: its clock restarts.
    later, free = stale_allocations(nodes(b=None, c=5), {5: JobState.FAILED}, seen, NOW + 20, grace=8.0)
    assert later == {"c": (5, NOW + 20)} and free == []
    # A job running again (requeued and restarted) is never swept.
    later, free = stale_allocations(nodes(c=3), {3: JobState.RUNNING}, seen, NOW + 20, grace=8.0)
    assert later == {} and free == []
