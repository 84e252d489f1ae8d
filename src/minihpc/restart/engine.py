"""The few Docker Engine API calls the restart proxy makes, over the Docker socket: find this
Compose project's container of a service, inspect it, start, unpause or restart it.

Nothing else of the API is written here, so nothing else is reachable through the proxy."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from collections.abc import Iterator

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

    def events(self, project: str, kinds: tuple[str, ...] = ("die",)) -> EventStream:
        """Docker's events of ``kinds`` for ``project``'s containers, as they happen; DockerError
        if the stream cannot be opened."""
        filters = {"type": ["container"], "event": list(kinds), "label": [f"com.docker.compose.project={project}"]}
        path = "/events?" + urllib.parse.urlencode({"filters": json.dumps(filters)})
        conn = _UnixConnection(self.socket_path, None)
        try:
            conn.request("GET", path, headers={"Host": "docker"})
            sock = conn.sock  # getresponse() lets go of it when the response ends at close
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise DockerError(f"Docker Engine at {self.socket_path}: GET /events failed ({exc})") from None
        if resp.status != 200:
            conn.close()
            raise DockerError(f"Docker Engine at {self.socket_path}: GET /events: status {resp.status}; expected 200")
        return EventStream(conn, sock, resp, self.socket_path)

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


class EventStream:
    """An open ``GET /events``: iterate for the events (blocking in between), in one thread;
    ``close()`` from any thread ends the iteration. The iterating thread releases the
    connection when it ends (http.client's objects are not to be closed under its feet)."""

    def __init__(self, conn: http.client.HTTPConnection, sock: socket.socket, resp: http.client.HTTPResponse,
                 where: str):
        self.conn, self.sock, self.resp, self.where = conn, sock, resp, where
        self.closed = False

    def __iter__(self) -> Iterator[dict]:
        try:
            for line in self.resp:
                if line.strip():
                    yield json.loads(line)
            ended = None if self.closed else "it ended"
        except (OSError, ValueError, http.client.HTTPException) as exc:
            ended = None if self.closed else f"it failed ({exc})"
        finally:
            self.release()
        if ended:
            raise DockerError(f"Docker Engine at {self.where}: the event stream: {ended}")

    def close(self) -> None:
        """Make the iterating thread stop: shut the socket down (which wakes a blocked read)."""
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def release(self) -> None:
        """Close the connection: from the thread that iterates (or would have), once it is done."""
        self.resp.close()
        self.conn.close()
        self.sock.close()


def _short(body) -> str:
    if isinstance(body, dict) and "message" in body:
        body = body["message"]
    return str(body)[:200]
