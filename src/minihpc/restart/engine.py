"""The few Docker Engine API calls the restart proxy makes, over the Docker socket: find this
Compose project's container of a service, inspect it, start, unpause or restart it.

Nothing else of the API is written here, so nothing else is reachable through the proxy."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse

from minihpc.core.errors import MinihpcError

DOCKER_SOCKET = "/var/run/docker.sock"
"""Where the Docker Engine listens unless --docker-socket says."""

TIMEOUT = 60.0
"""Seconds one API call may take (a restart waits for the container's stop timeout)."""


class DockerError(MinihpcError):
    """The Docker Engine could not be reached or answered with an error."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


class Engine:
    def __init__(self, socket_path: str = DOCKER_SOCKET, timeout: float = TIMEOUT):
        self.socket_path = socket_path
        self.timeout = timeout

    def call(self, method: str, path: str) -> tuple[int, object]:
        """One API call -> (status, decoded JSON or text); DockerError if the socket fails."""
        conn = _UnixConnection(self.socket_path, self.timeout)
        try:
            conn.request(method, path, headers={"Host": "docker"})
            resp = conn.getresponse()
            body = resp.read().decode(errors="replace")
        except OSError as exc:
            raise DockerError(f"Docker Engine at {self.socket_path}: {method} {path.split('?')[0]} failed ({exc})") from None
        finally:
            conn.close()
        try:
            return resp.status, json.loads(body) if body else None
        except ValueError:
            return resp.status, body

    def own_project(self) -> str:
        """The Compose project this process's container belongs to, from its labels."""
        status, info = self.call("GET", f"/containers/{socket.gethostname()}/json")
        if status != 200:
            raise DockerError(f"cannot inspect this container {socket.gethostname()!r} (status {status}: {_short(info)}); "
                              "expected to run in a Compose service with the Docker socket mounted")
        project = ((info.get("Config") or {}).get("Labels") or {}).get("com.docker.compose.project")
        if not project:
            raise DockerError(f"container {socket.gethostname()!r} has no com.docker.compose.project label; "
                              "expected to run as a Compose service")
        return project

    def find(self, project: str, service: str) -> dict | None:
        """The container of ``service`` in ``project`` (running or not), as the list API shows it."""
        labels = [f"com.docker.compose.project={project}", f"com.docker.compose.service={service}"]
        query = urllib.parse.urlencode({"all": "1", "filters": json.dumps({"label": labels})})
        status, found = self.call("GET", f"/containers/json?{query}")
        if status != 200 or not isinstance(found, list):
            raise DockerError(f"listing the containers of service {service}: status {status} ({_short(found)}); expected 200")
        return found[0] if found else None

    def inspect(self, cid: str) -> dict:
        status, info = self.call("GET", f"/containers/{cid}/json")
        if status != 200 or not isinstance(info, dict):
            raise DockerError(f"inspecting container {cid[:12]}: status {status} ({_short(info)}); expected 200")
        return info

    def act(self, cid: str, action: str) -> None:
        """POST /containers/<cid>/<action> (start, unpause, restart?t=5); 204 or 304 is done."""
        status, body = self.call("POST", f"/containers/{cid}/{action}")
        if status not in (204, 304):
            raise DockerError(f"docker {action.split('?')[0]} {cid[:12]}: status {status} ({_short(body)}); expected 204")


def _short(body) -> str:
    if isinstance(body, dict) and "message" in body:
        body = body["message"]
    return str(body)[:200]
