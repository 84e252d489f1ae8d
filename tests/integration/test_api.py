"""The REST API against a real local-mode cluster (``minihpc up --local`` serves it): every
route, every error as one JSON line, ownership shared with the CLI, and the log and event
streams (Server-Sent Events) as a client reads them."""

import json
import threading
import time

import pytest

from tests.conftest import wait_until
from tests.integration.api_client import Api
from tests.integration.conftest import JOBS

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def api(cluster):
    # Every node up: a file before this one on the same cluster may have restarted one.
    wait_until(cluster.idle, timeout=60, message="an idle cluster")
    return Api(cluster)


def test_health_needs_no_token_and_everything_else_does(api):
    r = api.call("GET", "/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "redis": True, "master": True, "nodes_up": 3, "nodes": 3}
    for path in ("/jobs", "/nodes", "/incidents", "/whoami", "/jobs/1"):
        r = api.call("GET", path)
        assert r.status_code == 401, path
        assert "API token is needed" in r.json()["error"]
        assert r.headers["www-authenticate"] == "Bearer"
    r = api.call("GET", "/jobs", "mhpc_not-a-token")
    assert r.status_code == 401 and "not known" in r.json()["error"]
    assert api.call("GET", "/whoami", api.admin).json()["admin"] is True
    assert api.call("GET", "/openapi.json").json()["paths"]["/jobs/{job_id}/logs/stream"]
    assert "HTTPBearer" in api.call("GET", "/openapi.json").json()["components"]["securitySchemes"]
    docs = api.call("GET", "/docs")
    assert docs.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in docs.text
    assert api.call("GET", "/docs-assets/swagger-ui-bundle.js").status_code == 200, "Swagger UI from a package"
    page = api.call("GET", "/")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert api.call("GET", "/no/such/route", api.admin).json() == {"error": "no such route: /no/such/route"}


def test_tokens_are_stored_hashed_and_can_be_revoked(api, cluster):
    token = api.token("carol")
    assert api.call("GET", "/whoami", token).json() == {"user": "carol", "admin": False}
    listed = json.loads(cluster.cli("token", "list", "--json").stdout)
    assert any(t["user"] == "carol" for t in listed) and token not in json.dumps(listed)
    cluster.cli("token", "revoke", "carol")
    assert api.call("GET", "/whoami", token).status_code == 401
    bad = cluster.cli("token", "create", "no spaces", check=False)
    assert bad.returncode == 1 and "invalid user name" in bad.stderr


@pytest.mark.parametrize("fields, message", [
    ({"nodes": "x"}, "argument -N/--nodes: invalid --nodes 'x': expected a number of nodes or a range MIN-MAX"),
    ({"nodes": 9}, "job needs 9 nodes; the cluster has 3"),
    ({"time": "soon"}, "soon"),
    ({"ntasks": 3, "nodes": 2}, "--ntasks 3 does not divide evenly over 2 nodes"),
    ({"dependency": "afterok:99999"}, "names job 99999, which does not exist"),
])
def test_a_bad_submission_is_a_400_with_the_cli_line(api, cluster, fields, message):
    r = api.call("POST", "/jobs", api.admin, json=dict(script="print('x')\n", **fields))
    assert r.status_code == 400 and message in r.json()["error"], r.text
    flags = {"nodes": "--nodes", "time": "--time", "ntasks": "--ntasks", "dependency": "--dependency"}
    argv = [x for k, v in fields.items() for x in (flags[k], str(v))]
    cli = cluster.cli("submit", *argv, str(JOBS / "sleeper.py"), check=False)
    assert cli.returncode != 0 and message in cli.stderr, "the API and the CLI give the same line"


@pytest.mark.parametrize("request_kwargs, message", [
    ({"content": b"not json", "headers": {"content-type": "application/json"}}, "the body is not JSON"),
    ({"json": {"nodes": 1}}, "needs a 'script' field"),
    ({"json": {"script": "  \n"}}, "script 'script.py' is empty"),
    ({"json": {"script": "print(1)", "script_name": ".."}}, "invalid script name '..'"),
    ({"json": {"script": "print(1)", "account": "a1"}}, "unknown field 'account'"),
    ({"json": {"script": "print(1)", "args": [1, 2]}}, "'args' must be a list of strings"),
    ({"files": {"nodes": (None, "1")}}, "needs a 'file' field"),
])
def test_malformed_requests_are_one_line_400s(api, request_kwargs, message):
    r = api.call("POST", "/jobs", api.admin, **request_kwargs)
    assert r.status_code == 400 and message in r.json()["error"], r.text


def test_a_body_over_the_cap_is_a_413_before_it_is_read(api):
    """A script may have 1 MiB; a larger body is refused whether it says its length or not."""
    big = b"#" * (2 << 20)
    r = api.call("POST", "/jobs", api.admin, content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "request body is over" in r.json()["error"]
    chunked = api.call("POST", "/jobs", api.admin, content=iter([big[:1 << 20], big[1 << 20:]]),
                       headers={"content-type": "application/json"})
    assert chunked.status_code == 413 and chunked.headers["x-content-type-options"] == "nosniff"
    r = api.call("POST", "/jobs", api.admin, json={"script": "x" * ((1 << 20) + 1)})
    assert r.status_code == 400 and "is over 1048576 bytes" in r.json()["error"]


def test_upload_submit_owner_and_cancel_rules_match_the_cli(api, cluster, idle_cluster, tmp_path):
    alice, bob = api.token("alice"), api.token("bob")
    gate = tmp_path / "gate"
    script = (JOBS / "gate.py").read_bytes()
    r = api.call("POST", "/jobs", alice, files={"file": ("gate.py", script)},
                 data={"nodes": "2", "args": str(gate), "job_name": "held"})
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    job = api.call("GET", f"/jobs/{job_id}", alice).json()
    assert (job["user"], job["name"], job["nodes_requested"], job["args"]) == ("alice", "held", 2, [str(gate)])
    assert cluster.show(job_id)["user"] == "alice", "the job records its owner for the CLI too"
    wait_until(lambda: api.call("GET", f"/jobs/{job_id}", alice).json()["state"] == "RUNNING", 60, message="R")
    listed = api.call("GET", "/jobs?user=alice&state=R", bob).json()
    assert [j["id"] for j in listed["jobs"]] == [job_id] and listed["total"] == 1
    assert api.call("GET", "/jobs?state=BOGUS", bob).status_code == 400

    r = api.call("POST", f"/jobs/{job_id}/cancel", bob)
    assert r.status_code == 403 and r.json()["error"] == f"job {job_id} belongs to alice; bob may not change it"
    as_bob = cluster.cli("cancel", job_id, check=False, env=dict(cluster.env, MINIHPC_TOKEN=bob))
    assert as_bob.returncode == 1 and f"job {job_id} belongs to alice; bob may not change it" in as_bob.stderr
    assert api.call("DELETE", f"/jobs/{job_id}", alice).status_code == 409, "a running job is not deleted"
    r = api.call("POST", f"/jobs/{job_id}/stop", alice)
    assert r.status_code == 200 and r.json() == {"id": job_id, "state": "CANCELLED"}
    r = api.call("POST", f"/jobs/{job_id}/cancel", alice)
    assert r.status_code == 409 and r.json()["error"] == f"job {job_id} already ended (CANCELLED)"
    assert api.call("POST", "/jobs/99999/cancel", alice).status_code == 404
    assert api.call("GET", "/jobs/abc", alice).json() == {"error": "invalid job id 'abc': expected a number"}

    assert api.call("DELETE", f"/jobs/{job_id}", bob).status_code == 403
    assert api.call("DELETE", f"/jobs/{job_id}", alice).json() == {"deleted": job_id}
    assert api.call("GET", f"/jobs/{job_id}", alice).status_code == 404


def test_nodes_drain_and_resume_need_an_admin(api, idle_cluster):
    user = api.token("dave")
    nodes = api.call("GET", "/nodes", user).json()["nodes"]
    assert {n["name"] for n in nodes} == {"master-node", "worker-node-1", "worker-node-2"}
    assert all(n["state"] == "idle" and n["heartbeat_age"] < 5 for n in nodes)
    r = api.call("POST", "/nodes/worker-node-2/drain", user, json={"reason": "disk"})
    assert r.status_code == 403 and "needs an admin token" in r.json()["error"]
    r = api.call("POST", "/nodes/nope/drain", api.admin)
    assert (r.status_code, r.json()) == (404, {"error": "node 'nope' is not registered"})
    r = api.call("POST", "/nodes/worker-node-2/drain", api.admin, content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "the body must be JSON" in r.json()["error"]
    try:
        r = api.call("POST", "/nodes/worker-node-2/drain", api.admin, json={"reason": "disk check"})
        assert (r.json()["state"], r.json()["drain_reason"]) == ("drain", "disk check")
        kinds = [(i["kind"], i["node"]) for i in api.call("GET", "/incidents?limit=5", user).json()["incidents"]]
        assert ("drained", "worker-node-2") in kinds
    finally:
        r = api.call("POST", "/nodes/worker-node-2/resume", api.admin)
    assert r.json()["state"] == "idle"


def test_log_stream_delivers_every_line_in_order_and_resumes(api, cluster, idle_cluster, tmp_path):
    """A 3-node job's stream carries exactly what `minihpc logs` shows, per node and in order,
    ends with the final state, and a client that reconnects with Last-Event-ID gets the rest."""
    gate = tmp_path / "gate"
    job_id = api.submit(api.admin, (JOBS / "chatty.py").read_text(), script_name="chatty.py",
                        nodes=3, args=["40", str(gate)])
    opened = threading.Timer(1.0, gate.touch)
    opened.start()
    events = api.stream(f"/jobs/{job_id}/logs/stream", api.admin)
    assert events[0]["event"] == "state"
    assert events[-1]["event"] == "end" and events[-1]["data"]["state"] == "COMPLETED"
    assert events[-1]["data"]["exit"] == "0:0"
    lines = [e for e in events if e["event"] == "line"]
    for node in ("master-node", "worker-node-1", "worker-node-2"):
        shown = cluster.cli("logs", job_id, "--node", node).stdout.splitlines()
        streamed = [e["data"]["line"] for e in lines if e["data"]["node"] == node]
        assert streamed == shown, node
        assert sum("line" in s and "of 40" in s for s in streamed) == 40

    half = len(lines) // 2
    rest = api.stream(f"/jobs/{job_id}/logs/stream", api.admin, last_event_id=lines[half]["id"])
    for node in ("master-node", "worker-node-1", "worker-node-2"):
        expected = [e["data"]["line"] for e in lines[half + 1:] if e["data"]["node"] == node]
        assert [e["data"]["line"] for e in rest if e["event"] == "line" and e["data"]["node"] == node] == expected

    one = api.call("GET", f"/jobs/{job_id}/logs?node=worker-node-1&tail=2", api.admin).json()
    assert one["logs"][0]["node"] == "worker-node-1"
    assert one["logs"][0]["text"].splitlines() == cluster.cli("logs", job_id, "--node", "worker-node-1").stdout.splitlines()[-2:]
    assert api.call("GET", f"/jobs/{job_id}/logs/stream?node=nope", api.admin).status_code == 404

    summary = api.call("GET", f"/jobs/{job_id}/summary", api.admin).json()
    assert (summary["step"], summary["total"], summary["percent"]) == (40, 40, 100.0)
    assert summary["loss_history"][-1] == [40, 1 / 40] and summary["attempt_marks"]["1"]["last"]["step"] == 40
    report = api.call("GET", f"/jobs/{job_id}/report", api.admin).json()
    assert [40, 1 / 40] in report["loss"]["attempt 1"] and report["throughput"]["samples/s"][-1][1] == 100.0
    assert [a[0] for a in report["attempts"]] == ["attempt 1"]


def test_events_stream_job_changes_and_summaries_while_running(api, idle_cluster, tmp_path):
    gate = tmp_path / "gate"
    seen = []

    def listen():
        seen.extend(api.stream("/events", api.admin, timeout=90,
                               stop=lambda e: e["event"] == "job" and e["data"]["state"] == "COMPLETED"))

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    time.sleep(1.0)
    job_id = api.submit(api.admin, (JOBS / "chatty.py").read_text(), script_name="chatty.py",
                        args=["30", str(gate)], job_name="watched")
    wait_until(lambda: any(s["id"] == job_id for s in api.call("GET", "/jobs/summaries", api.admin).json()["summaries"]),
               60, message="the running job's summary")
    gate.touch()
    summary = wait_until(lambda: next((s for s in api.call("GET", "/jobs/summaries", api.admin).json()["summaries"]
                                       if s["id"] == job_id and s["step"]), None), 60, message="progress")
    assert summary["name"] == "watched" and summary["total"] == 30 and summary["samples_per_second"] == 100.0
    listener.join(90)
    states = [e["data"]["state"] for e in seen if e["event"] == "job" and e["data"]["id"] == job_id]
    assert states == ["PENDING", "RUNNING", "COMPLETED"]


def test_purge_deletes_only_the_callers_old_ended_jobs(api, idle_cluster):
    erin, frank = api.token("erin"), api.token("frank")
    mine = api.submit(erin, "print('erin')\n", script_name="e.py")
    theirs = api.submit(frank, "print('frank')\n", script_name="f.py")
    for job_id in (mine, theirs):
        wait_until(lambda j=job_id: api.call("GET", f"/jobs/{j}", erin).json()["state"] == "COMPLETED", 90,
                   message=f"job {job_id}")
    assert api.call("POST", "/jobs/purge", erin, json={"older_than": "x"}).status_code == 400
    assert mine in api.call("POST", "/jobs/purge", erin, json={"older_than": 0}).json()["deleted"]
    assert api.call("GET", f"/jobs/{mine}", erin).status_code == 404
    assert api.call("GET", f"/jobs/{theirs}", erin).json()["state"] == "COMPLETED", "frank's job stays"


def test_alertmanagers_notifications_arrive_only_with_the_alert_token_and_show_as_alerts(api, cluster):
    alert = {"status": "firing", "labels": {"alertname": "MinihpcNodeDrained", "severity": "warning",
                                            "node": "worker-node-2"},
             "annotations": {"summary": "worker-node-2 is drained", "runbook_url": "docs/runbooks.md#node-drained"},
             "startsAt": "2026-11-27T08:00:00Z", "fingerprint": "abc123"}
    body = {"version": "4", "status": "firing", "receiver": "minihpc", "alerts": [alert]}
    assert api.call("POST", "/alerts", json=body).status_code == 401
    assert api.call("POST", "/alerts", api.admin, json=body).status_code == 401, "a user's token is not the alert token"
    token = cluster.api["alert_token"]
    r = api.call("POST", "/alerts", token, json={"alerts": [{"labels": {}}]})
    assert r.status_code == 400 and r.json() == {"error": "not an Alertmanager notification: an alert has no alertname label"}
    r = api.call("POST", "/alerts", token, json=body)
    assert r.status_code == 202 and r.json() == {"recorded": 1}
    user = api.token("alerts-reader")
    firing = api.call("GET", "/alerts", user).json()["firing"]
    assert [(a["alertname"], a["node"], a["runbook_url"]) for a in firing] == \
        [("MinihpcNodeDrained", "worker-node-2", "docs/runbooks.md#node-drained")]
    out = cluster.cli("alerts").stdout
    assert out.startswith("firing: 1\n  MinihpcNodeDrained  warning  worker-node-2  worker-node-2 is drained"), out
    assert "alert" in cluster.cli("incidents", "-n", 5).stdout
    resolved = dict(body, status="resolved", alerts=[dict(alert, status="resolved")])
    assert api.call("POST", "/alerts", token, json=resolved).status_code == 202
    assert api.call("GET", "/alerts", user).json()["firing"] == []
    assert cluster.cli("alerts").stdout.startswith("firing: 0\n")


def test_priority_high_is_an_admins_to_give(api, idle_cluster):
    user = api.token("plain-user")
    r = api.call("POST", "/jobs", user, json={"script": "print('hi')\n", "priority": "high", "begin": "now+1hour"})
    assert r.status_code == 403 and r.json() == {"error": "priority high is for admins (the front of the queue is "
                                                          "theirs to give); use normal or low"}
    job_id = api.submit(api.admin, "print('hi')\n", priority="high", begin="now+1hour")
    assert api.call("GET", f"/jobs/{job_id}", api.admin).json()["priority"] == "high"
    api.call("POST", f"/jobs/{job_id}/cancel", api.admin)


def test_a_node_range_is_taken_as_sbatch_takes_it(api, idle_cluster):
    job_id = api.submit(api.admin, "print('hi')\n", nodes="2-5", begin="now+1hour")
    record = api.call("GET", f"/jobs/{job_id}", api.admin).json()
    assert (record["nodes_requested"], record["max_nodes"], record["state"]) == (2, 5, "PENDING")
    api.call("POST", f"/jobs/{job_id}/cancel", api.admin)
    r = api.call("POST", "/jobs", api.admin, json={"script": "print('hi')\n", "nodes": "2-5", "ntasks": 4})
    assert r.status_code == 400 and "--ntasks with a node range (-N 2-5)" in r.json()["error"], r.text


def test_reading_is_owned_another_users_job_shows_as_squeue_shows_it(api, cluster, idle_cluster):
    """Issue 33 (Slurm's PrivateData=jobs): bob sees alice's job in the list, the queue and by
    id -- its id, user, state and nodes -- but not its args, environment or results, and not
    its logs, log stream, summary or report; alice and admins read all of it. The CLI asks the
    same rule."""
    alice, bob = api.token("alice"), api.token("bob")
    job_id = api.submit(alice, "import sys; print('alice', sys.argv[1:])\n", args="--hf-token hf_alice_secret",
                        export="ALL,WANDB_API_KEY=alice-private-key")
    wait_until(lambda: api.call("GET", f"/jobs/{job_id}", alice).json()["state"] == "COMPLETED", 60,
               message="alice's job done")
    mine = api.call("GET", f"/jobs/{job_id}", alice).json()
    assert mine["args"] == ["--hf-token", "hf_alice_secret"] and mine["results"], mine
    assert mine["environment"] == ["WANDB_API_KEY"], mine  # its names: the values are never shown

    theirs = api.call("GET", f"/jobs/{job_id}", bob)
    assert theirs.status_code == 200
    seen = theirs.json()
    assert (seen["id"], seen["user"], seen["state"], seen["nodes"]) == (job_id, "alice", "COMPLETED", mine["nodes"])
    assert "hf_alice_secret" not in theirs.text and "alice-private-key" not in theirs.text, theirs.text
    assert seen["args"] == [] and not seen["environment"] and "results" not in seen
    listed = api.call("GET", "/jobs?user=alice", bob)
    assert job_id in [j["id"] for j in listed.json()["jobs"]] and "hf_alice_secret" not in listed.text
    history = api.call("GET", "/history", bob)
    assert history.status_code == 200 and "hf_alice_secret" not in history.text
    refused = f"job {job_id} belongs to alice; its logs, args and reports are its owner's and admins' (bob is neither)"
    for path in (f"/jobs/{job_id}/logs", f"/jobs/{job_id}/logs/stream", f"/jobs/{job_id}/summary",
                 f"/jobs/{job_id}/report"):
        r = api.call("GET", path, bob)
        assert (r.status_code, r.json()) == (403, {"error": refused}), (path, r.text)
    for token in (alice, api.admin):
        r = api.call("GET", f"/jobs/{job_id}/logs", token)
        assert r.status_code == 200 and "hf_alice_secret" in r.text, r.text

    as_bob = dict(cluster.env, MINIHPC_TOKEN=bob)
    shown = cluster.cli("show", job_id, "--json", env=as_bob)
    assert "hf_alice_secret" not in shown.stdout and json.loads(shown.stdout)["user"] == "alice"
    logs = cluster.cli("logs", job_id, check=False, env=as_bob)
    assert logs.returncode == 1 and refused in logs.stderr, logs.stderr
    assert "hf_alice_secret" in cluster.cli("logs", job_id, env=dict(cluster.env, MINIHPC_TOKEN=alice)).stdout
