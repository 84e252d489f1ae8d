"""A client of the REST API for the tests: calls with a bearer token, tokens made with the
CLI, submissions, and Server-Sent Event streams read as a client reads them."""

import json

import httpx


class Api:
    def __init__(self, cluster):
        self.cluster = cluster
        self.url = cluster.api["url"]
        self.admin = cluster.api["token"]

    def call(self, method, path, token=None, **kwargs) -> httpx.Response:
        headers = kwargs.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.request(method, self.url.rstrip("/") + path, headers=headers, timeout=30, **kwargs)

    def token(self, user: str, admin: bool = False) -> str:
        return self.cluster.cli("token", "create", user, *(["--admin"] if admin else [])).stdout.strip()

    def submit(self, token, script: str, **fields) -> int:
        r = self.call("POST", "/jobs", token, json=dict(script=script, **fields))
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def stream(self, path, token, last_event_id=None, stop=lambda event: event["event"] == "end", timeout=120):
        """The events of an SSE stream until ``stop(event)``: [{"event", "id", "data"}]."""
        headers = {"Authorization": f"Bearer {token}"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        events, current = [], {}
        with httpx.stream("GET", self.url.rstrip("/") + path, headers=headers, timeout=timeout) as r:
            assert r.status_code == 200, r.read()
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if not line:
                    if "data" in current:
                        current["data"] = json.loads(current["data"])
                        events.append(current)
                        if stop(current):
                            return events
                    current = {}
                elif not line.startswith(":"):
                    field, _, value = line.partition(": ")
                    current[field] = value
        return events
