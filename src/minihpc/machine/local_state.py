"""The state directory of a local-mode cluster (``minihpc up --local``), and its one owner.

    STATE_DIR/pids.json        name -> pid of every process of the cluster (redis, master, nodes)
    STATE_DIR/run/nodes.json   each node's command line, so a DOWN node can be respawned
    STATE_DIR/run/*.log        each process's output
    STATE_DIR/redis_url        the Redis URL with its password (mode 0600; the CLI reads it)
    STATE_DIR/api.json         the web page's URL, the admin API token made for it and the alert
                           receiver's token (mode 0600)
    STATE_DIR/redis.conf       the Redis configuration (mode 0600)
    STATE_DIR/redis/           Redis's data
    STATE_DIR/shared/          stands in for the shared volumes (jobs, logs, models, data)

Every write replaces its file atomically (:func:`minihpc.machine.files.replace`), so the
health monitor's respawns and ``minihpc down`` never read half a file.
"""

from __future__ import annotations

import json
from pathlib import Path

from minihpc.machine import files
from minihpc.machine.processes import running


class LocalState:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.run_dir = self.root / "run"
        self.pids_file = self.root / "pids.json"
        self.nodes_file = self.run_dir / "nodes.json"
        self.master_file = self.run_dir / "master.json"
        self.url_file = self.root / "redis_url"
        self.api_file = self.root / "api.json"
        self.redis_conf = self.root / "redis.conf"
        self.redis_acl = self.root / "redis-users.acl"
        self.redis_dir = self.root / "redis"
        self.shared = self.root / "shared"

    def exists(self) -> bool:
        """Whether a cluster was started here and not stopped."""
        return self.pids_file.exists()

    def pids(self) -> dict[str, int]:
        """Every recorded process, alive or not; empty when no cluster was started here."""
        return json.loads(self.pids_file.read_text()) if self.exists() else {}

    def running_pids(self) -> dict[str, int]:
        """The recorded processes that still run (a zombie does not)."""
        return {name: pid for name, pid in self.pids().items() if running(pid)}

    def save_pids(self, pids: dict[str, int]) -> None:
        files.replace(self.pids_file, json.dumps(pids).encode())

    def set_pid(self, name: str, pid: int) -> None:
        self.save_pids(dict(self.pids(), **{name: pid}))

    def node_commands(self) -> dict[str, dict]:
        """name -> {"argv", "log", "env"} of each node's agent."""
        return json.loads(self.nodes_file.read_text())

    def save_node_commands(self, commands: dict[str, dict]) -> None:
        self._private(self.nodes_file, json.dumps(commands))

    def master_command(self) -> dict:
        """{"argv", "log", "env"} of the master: how to start it again, as its own Redis user."""
        return json.loads(self.master_file.read_text())

    def save_master_command(self, command: dict) -> None:
        self._private(self.master_file, json.dumps(command))

    def save_url(self, url: str) -> None:
        self._private(self.url_file, url + "\n")

    def save_api(self, url: str, token: str, alert_token: str = "") -> None:
        self._private(self.api_file, json.dumps({"url": url, "token": token, "alert_token": alert_token}))

    def api(self) -> dict | None:
        """{"url", "token"} of the cluster's API, if it serves one."""
        return json.loads(self.api_file.read_text()) if self.api_file.exists() else None

    def save_redis_conf(self, text: str) -> None:
        self._private(self.redis_conf, text)

    def save_redis_acl(self, text: str) -> None:
        self._private(self.redis_acl, text)

    def log(self, name: str) -> Path:
        return self.run_dir / f"{name}.log"

    def clear(self) -> None:
        """The cluster is stopped: forget its processes and its URL (its data stays)."""
        self.pids_file.unlink(missing_ok=True)
        self.url_file.unlink(missing_ok=True)
        self.api_file.unlink(missing_ok=True)

    @staticmethod
    def _private(path: Path, text: str) -> None:
        """Write a file only its owner may read (it holds the Redis password)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        files.replace(path, text.encode(), mode=0o600)
