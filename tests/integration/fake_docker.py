"""A fake Docker Engine on a unix socket: the few API calls the restart proxy makes (list a
Compose service's container, inspect, start, unpause, restart, follow ``die`` events), over
canned containers. The
Docker Engine is the edge the restart proxy talks to; everything else in its tests is real."""

import json
import os
import queue
import socket
import socketserver
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler


def now_rfc3339(at: float | None = None) -> str:
    at = time.time() if at is None else at
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e9):09d}Z"


class FakeDocker:
    def __init__(self, socket_path: str, project: str = "minihpc"):
        self.socket_path = socket_path
        self.project = project
        self.containers: dict[str, dict] = {}  # service -> {"Id", "state" (inspect State), "ip"}
        self.calls: list[tuple[str, str]] = []
        self.on_start = {}  # service -> callable run when the proxy starts its container
        self.listeners: list[queue.Queue] = []  # one per open GET /events stream
        self.lock = threading.Lock()
        self.server = None

    def add(self, service: str, ip: str, status: str = "running", exit_code: int = 0) -> dict:
        container = {"Id": f"{service}-{os.urandom(8).hex()}", "ip": ip, "state": {}}
        self.containers[service] = container
        self.set_state(service, status, exit_code)
        return container

    def set_state(self, service: str, status: str, exit_code: int = 0) -> None:
        """The State ``docker inspect`` shows, as after a start, kill or stop at this moment."""
        with self.lock:
            self.containers[service]["state"] = {
                "Status": status, "Running": status == "running", "Paused": status == "paused",
                "Restarting": False, "OOMKilled": False, "Dead": False, "Pid": 4242 if status == "running" else 0,
                "ExitCode": exit_code, "Error": "", "StartedAt": now_rfc3339(time.time() - 60),
                "FinishedAt": now_rfc3339() if status == "exited" else "0001-01-01T00:00:00Z",
            }

    def die(self, service: str, exit_code: int) -> float:
        """The container dies (docker kill: 137): its state, and a ``die`` event to every open
        event stream, as the Engine sends it. Returns the event's time."""
        self.set_state(service, "exited", exit_code)
        at = time.time()
        event = {"Type": "container", "Action": "die", "scope": "local", "time": int(at), "timeNano": int(at * 1e9),
                 "Actor": {"ID": self.containers[service]["Id"],
                           "Attributes": {"com.docker.compose.project": self.project,
                                          "com.docker.compose.service": service, "exitCode": str(exit_code)}}}
        for listener in list(self.listeners):
            listener.put(event)
        return at

    def posted(self) -> list[str]:
        """'<service> <action>' for every POST the proxy made."""
        by_id = {c["Id"]: s for s, c in self.containers.items()}
        return [f"{by_id.get(path.split('/')[2], '?')} {path.split('/')[3].split('?')[0]}"
                for method, path in self.calls if method == "POST"]

    def inspections(self, service: str) -> int:
        cid = self.containers[service]["Id"]
        return sum(1 for method, path in self.calls if method == "GET" and path == f"/containers/{cid}/json")

    # -- the Engine API -------------------------------------------------------------------

    def answer(self, method: str, path: str) -> tuple[int, object]:
        with self.lock:
            self.calls.append((method, path))
        url = urllib.parse.urlparse(path)
        parts = url.path.strip("/").split("/")
        if method == "GET" and url.path == "/containers/json":
            labels = json.loads(urllib.parse.parse_qs(url.query)["filters"][0])["label"]
            wanted = dict(label.split("=", 1) for label in labels)
            if wanted.get("com.docker.compose.project") != self.project:
                return 200, []
            service = wanted.get("com.docker.compose.service")
            return 200, [self._listed(service)] if service in self.containers else []
        if method == "GET" and len(parts) == 3 and parts[2] == "json":
            if parts[1] == socket.gethostname():
                return 200, {"Config": {"Labels": {"com.docker.compose.project": self.project}}}
            for container in self.containers.values():
                if container["Id"] == parts[1]:
                    return 200, {"Id": container["Id"], "State": dict(container["state"])}
            return 404, {"message": f"No such container: {parts[1]}"}
        if method == "POST" and len(parts) == 3:
            service = next((s for s, c in self.containers.items() if c["Id"] == parts[1]), None)
            if service is None:
                return 404, {"message": f"No such container: {parts[1]}"}
            if parts[2] in ("start", "restart"):
                if parts[2] == "start" and service in self.on_start:
                    self.on_start[service]()
                self.set_state(service, "running")
            return 204, None
        return 404, {"message": "page not found"}

    def _listed(self, service: str) -> dict:
        c = self.containers[service]
        labels = {"com.docker.compose.project": self.project, "com.docker.compose.service": service}
        return {"Id": c["Id"], "Names": [f"/{self.project}-{service}-1"], "Labels": labels,
                "State": c["state"]["Status"],
                "NetworkSettings": {"Networks": {f"{self.project}_default": {"IPAddress": c["ip"]}}}}

    # -- serving ----------------------------------------------------------------------------

    def start(self) -> "FakeDocker":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _events(self):
                with fake.lock:
                    fake.calls.append((self.command, self.path))
                filters = json.loads(urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)["filters"][0])
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.flush()
                listener = queue.Queue()
                fake.listeners.append(listener)
                try:
                    while True:
                        event = listener.get()
                        labels = event["Actor"]["Attributes"]
                        if event["Action"] in filters["event"] and all(
                                labels.get(k) == v for k, v in (f.split("=", 1) for f in filters["label"])):
                            self.wfile.write(json.dumps(event).encode() + b"\n")
                            self.wfile.flush()
                except OSError:
                    pass
                finally:
                    fake.listeners.remove(listener)

            def _serve(self):
                if self.path.startswith("/events"):
                    return self._events()
                status, body = fake.answer(self.command, self.path)
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *args):
                pass

        self.server = socketserver.ThreadingUnixStreamServer(self.socket_path, Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()
