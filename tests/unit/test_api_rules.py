"""The REST API's pure parts: SSE framing and cursors, response headers, summaries,
ownership, and how a submission's fields become sbatch flags."""

import pytest

from minihpc.api import sse
from minihpc.api.app import status_of
from minihpc.api.guard import declared_length, with_headers
from minihpc.api.jobs import options_argv
from minihpc.client.access import Principal, may_change, must_be_admin
from minihpc.client.summary import loss_history, summarize
from minihpc.core.errors import ClusterUnavailable, Conflict, Forbidden, NotFound, Unauthorized, UsageError
from minihpc.core.models import Job, JobState


def test_an_event_is_framed_as_text_event_stream():
    assert sse.frame("line", {"node": "n1", "line": "a\nb"}, "n1=3") == (
        b'event: line\nid: n1=3\ndata: {"line":"a\\nb","node":"n1"}\n\n')
    assert sse.frame("end", {"state": "COMPLETED"}) == b'event: end\ndata: {"state":"COMPLETED"}\n\n'


def test_a_cursor_round_trips_and_garbage_means_the_start():
    offsets = {"worker-node-1": 120, "master-node": 7}
    assert sse.decode_cursor(sse.encode_cursor(offsets)) == offsets
    for bad in (None, "", "nonsense", "a=b", "a=-1&b"):
        assert sse.decode_cursor(bad) == {}, bad


def test_every_response_gets_the_security_headers_and_a_routes_own_value_wins():
    headers = dict(with_headers([(b"content-type", b"text/html"), (b"referrer-policy", b"same-origin")]))
    assert headers[b"content-security-policy"].startswith(b"default-src 'self'")
    assert headers[b"x-content-type-options"] == b"nosniff" and headers[b"referrer-policy"] == b"same-origin"
    assert declared_length({"headers": [(b"content-length", b"12")]}) == 12
    assert declared_length({"headers": [(b"content-length", b"x")]}) is None
    assert declared_length({"headers": []}) is None


def job(**kw) -> Job:
    base = dict(id=4, name="train", user="alice", script="s", script_source="s", script_sha256="x",
                state=JobState.RUNNING, attempts=2)
    return Job(**(base | kw))


def test_loss_history_is_the_newest_attempt_one_point_per_step():
    series = [{"attempt": 1, "step": 5, "loss": 9.0}, {"attempt": 2, "step": 1, "loss": 2.0},
              {"attempt": 2, "step": 1, "loss": 2.0, "node": "other"}, {"attempt": 2, "step": 2, "loss": 1.5},
              {"attempt": 2, "step": 3}]
    assert loss_history(series) == [[1, 2.0], [2, 1.5]]
    assert loss_history([{"attempt": 1, "step": s, "loss": 1.0} for s in range(100)], points=3) == [
        [97, 1.0], [98, 1.0], [99, 1.0]]


def test_a_summary_says_progress_and_eta_of_the_current_attempt():
    marks = {2: {"first": {"step": 10, "at": 100.0}, "last": {"step": 30, "at": 120.0}}}
    out = summarize(job(), {"step": 30, "total": 50, "loss": 0.5, "samples_per_second": 64.0}, marks, [], [])
    assert (out["percent"], out["eta_seconds"], out["loss"]) == (60.0, 20.0, 0.5)
    assert out["attempt_marks"] == {"2": marks[2]}
    ended = summarize(job(state=JobState.COMPLETED), {"step": 30, "total": 50}, marks, [], [])
    assert ended["eta_seconds"] is None
    assert summarize(job(), None, {}, [], [])["step"] is None
    resized = [{"kind": "resized", "at": 110.0, "job": 1, "nodes": 2, "was": 3, "launch": 3},
               {"kind": "down", "at": 109.0, "job": None}]
    assert summarize(job(), None, marks, [], resized)["launch_nodes"] == {"3": 2}  # an elastic job's size by launch


def test_owners_and_admins_may_change_a_job_others_may_not():
    may_change(Principal("alice"), job())
    may_change(Principal("root", admin=True), job())
    with pytest.raises(Forbidden, match="job 4 belongs to alice; bob may not change it"):
        may_change(Principal("bob"), job())
    with pytest.raises(Forbidden, match="needs an admin token"):
        must_be_admin(Principal("bob"), "draining a node")


def test_each_error_has_its_status():
    assert [status_of(e("x")) for e in (Unauthorized, Forbidden, NotFound, Conflict, ClusterUnavailable, UsageError)] == [
        401, 403, 404, 409, 503, 400]


def test_fields_become_the_flags_submit_parses():
    assert options_argv({"script": "x", "nodes": 2, "time": "10:00", "name": "a", "priority": None}) == [
        "--nodes=2", "--time=10:00", "--job-name=a"]
    assert options_argv({"name": "-x"}) == ["--job-name=-x"], "a value that looks like a flag stays a value"
    with pytest.raises(UsageError, match="unknown field 'account'"):
        options_argv({"account": "a1"})
    assert options_argv({"mem": "4G", "requeue": False, "array": "0-3%2"}) == [
        "--mem=4G", "--no-requeue", "--array=0-3%2"]
    with pytest.raises(UsageError, match="field 'requeue' must be true or false"):
        options_argv({"requeue": "no"})
    assert options_argv({"nodes": "2-3", "elastic": True}) == ["--nodes=2-3", "--elastic"]
    assert options_argv({"nodes": "2-3", "elastic": False}) == ["--nodes=2-3"]
    with pytest.raises(UsageError, match="field 'elastic' must be true or false"):
        options_argv({"elastic": 1})
    with pytest.raises(UsageError, match="must be a number or a string"):
        options_argv({"nodes": [1]})
