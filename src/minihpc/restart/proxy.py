"""The restart proxy: the one process in a Compose cluster that holds the Docker socket.

It offers the health monitor exactly one action, ``POST /restart/<node>``, for containers of
its own Compose project whose service is a minihpc node (``master-node``, ``worker-node-N``):
it unpauses the container if paused, then restarts it (which also starts a stopped one).
Nothing else of the Docker API is reachable through it: no exec, no create, no other project.
It runs no jobs, and the node containers never see the socket.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)

NODE_NAME = re.compile(r"^(master-node|worker-node-[0-9]{1,4})$")
DOCKER_SOCKET = "/var/run/docker.sock"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


def docker(method: str, path: str, socket_path: str = DOCKER_SOCKET, timeout: float = 60.0):
    """One Docker Engine API call over the socket -> (status, decoded JSON or text)."""
    conn = _UnixConnection(socket_path, timeout)
    try:
        conn.request(method, path, headers={"Host": "docker"})
        resp = conn.getresponse()
        body = resp.read().decode()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(body) if body else None
    except ValueError:
        return resp.status, body


def own_project(socket_path: str = DOCKER_SOCKET) -> str:
    """The Compose project this proxy belongs to, from its own container's labels."""
    status, info = docker("GET", f"/containers/{socket.gethostname()}/json", socket_path)
    if status != 200:
        raise RuntimeError(f"cannot inspect this container ({status}): {info}")
    project = info["Config"]["Labels"].get("com.docker.compose.project")
    if not project:
        raise RuntimeError("this container has no com.docker.compose.project label")
    return project


def find_node(project: str, node: str, socket_path: str = DOCKER_SOCKET) -> dict | None:
    labels = [f"com.docker.compose.project={project}", f"com.docker.compose.service={node}"]
    query = urllib.parse.urlencode({"all": "1", "filters": json.dumps({"label": labels})})
    status, found = docker("GET", f"/containers/json?{query}", socket_path)
    if status != 200:
        raise RuntimeError(f"listing containers failed ({status}): {found}")
    return found[0] if found else None


def restart_node(project: str, node: str, socket_path: str = DOCKER_SOCKET) -> tuple[int, str]:
    """(HTTP status, message) for a restart request; pure policy first, then the API."""
    if not NODE_NAME.match(node):
        return 403, f"{node!r} is not a minihpc node"
    container = find_node(project, node, socket_path)
    if container is None:
        return 404, f"no container for node {node} in project {project}"
    cid = container["Id"]
    if container.get("State") == "paused":
        docker("POST", f"/containers/{cid}/unpause", socket_path)
    status, body = docker("POST", f"/containers/{cid}/restart?t=5", socket_path)
    if status != 204:
        return 502, f"docker restart {node}: {status} {body}"
    return 200, f"restarted {node} ({cid[:12]})"


def serve(port: int, socket_path: str = DOCKER_SOCKET) -> None:
    project = own_project(socket_path)
    log.info("restart proxy for project %s on port %s", project, port)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, message: str) -> None:
            data = json.dumps({"message": message}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path == "/health":
                self._answer(200, f"ok ({project})")
            else:
                self._answer(404, "only POST /restart/<node> and GET /health")

        def do_POST(self):  # noqa: N802
            match = re.fullmatch(r"/restart/([^/]+)", self.path)
            if not match:
                self._answer(404, "only POST /restart/<node> and GET /health")
                return
            try:
                status, message = restart_node(project, match.group(1), socket_path)
            except Exception as exc:  # noqa: BLE001 - report, keep serving
                status, message = 502, str(exc)
            log.warning("restart %s: %s %s", match.group(1), status, message)
            self._answer(status, message)

        def log_message(self, *args):  # quiet: the warning above is the log
            pass

    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()
