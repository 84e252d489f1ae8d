"""Hosts for the Ansible suite: containers that boot systemd and run sshd, reached over real SSH.

Each host is a container of the image scripts/images/host.Dockerfile (built here on the Debian
base the project bootstraps, no registry) started as the issue describes, without --privileged.
Ansible logs in as ``admin`` with a key made for the run, checking host keys it scanned; it
never uses Docker to reach a host. The hosts share one Docker volume at /shared: the site's
shared filesystem of ``minihpc_shared_fs: existing`` (NFS cannot serve from an unprivileged
container).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
IMAGE = "minihpc/host:bookworm"
BASE = "minihpc/debian:bookworm"
PREFIX = "minihpc-ansible"
INSTALL_DISK = "/opt/minihpc"
"""A host's own disk for the install folder (an anonymous volume, gone with the host): a real
host writes its multi-GB venv to a disk, not through the container's fuse-overlayfs, which
took most of a first run."""
NODE_TIMEOUT = 30.0
"""Seconds of heartbeat silence before the master takes a test host for DOWN (the role's default
is 2.5): see write_inventory."""
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def run(argv, check=True, timeout=600, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{shlex.join(argv)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP's figures per host: {"control": {"ok": .., "changed": .., ...}}."""
    return {m[1]: dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m.groups()[1:])))
            for m in RECAP.finditer(output)}


class Hosts:
    def __init__(self, workdir: Path):
        self.dir = workdir
        self.network = f"{PREFIX}-net"
        self.volume = f"{PREFIX}-shared"
        self.key = workdir / "id_ed25519"
        self.keys = workdir / "authorized_keys"
        self.known_hosts = workdir / "known_hosts"
        self.inventory = workdir / "inventory.yml"
        self.names: list[str] = []

    def build(self) -> None:
        run(["bash", str(ROOT / "scripts/bootstrap-base.sh"), BASE], timeout=900)
        env = dict(os.environ)
        if run(["docker", "buildx", "version"], check=False).returncode != 0:
            env["DOCKER_BUILDKIT"] = "0"
        run(["docker", "build", "-q", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE}", "-t", IMAGE,
             "-f", str(ROOT / "scripts/images/host.Dockerfile"), str(ROOT / "scripts/images")], timeout=900, env=env)

    def setup(self) -> None:
        self.teardown()
        self.keys.mkdir(exist_ok=True)
        if not self.key.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "minihpc-ansible-test", "-f", str(self.key)])
        (self.keys / "admin").write_text(self.key.with_suffix(".pub").read_text())
        self.keys.chmod(0o755)
        (self.keys / "admin").chmod(0o644)
        run(["docker", "network", "create", self.network])
        run(["docker", "volume", "create", self.volume])

    def container(self, name: str) -> str:
        return f"{PREFIX}-{name}"

    def start(self, *names: str) -> None:
        """Boot hosts ``names``, side by side; returns once systemd runs and sshd answers on each."""
        for name in names:
            run(["docker", "run", "-d", "--name", self.container(name), "--hostname", name, "--network", self.network,
                 "--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock",
                 # A host's root may change its firewall (the node agent's rule: core.firewall).
                 "--cap-add", "NET_ADMIN",
                 "-v", f"{self.keys}:/etc/ssh/authorized_keys:ro", "-v", f"{self.volume}:/shared",
                 "-v", INSTALL_DISK,
                 "--memory", "6g", *self._cpu_shares(), IMAGE])
            self.names.append(name)
        for name in names:
            self._booted(name)

    @staticmethod
    def _cpu_shares() -> list[str]:
        """The hosts' CPU weight: lower than the default when the suite runs them beside the e2e
        cluster (scripts/test_tiers.py sets MINIHPC_TEST_HOST_CPU_SHARES)."""
        shares = os.environ.get("MINIHPC_TEST_HOST_CPU_SHARES")
        return ["--cpu-shares", shares] if shares else []

    def _booted(self, name: str) -> str:
        """Host ``name``'s address, once systemd runs and sshd answers there (its key is then known)."""
        addr = self.address(name)
        deadline = time.time() + 90
        while True:
            state = self.exec(name, "systemctl", "is-system-running", check=False).stdout.strip()
            scan = run(["ssh-keyscan", "-T", "2", "-t", "ed25519", addr], check=False)
            if state in ("running", "degraded") and scan.stdout.strip():
                break
            if time.time() > deadline:
                raise AssertionError(f"host {name} did not boot: systemd {state!r}, ssh-keyscan {scan.stderr.strip()!r}")
            time.sleep(0.5)
        with open(self.known_hosts, "a") as fh:
            fh.write(scan.stdout)
        return addr

    def address(self, name: str) -> str:
        return run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                    self.container(name)]).stdout.strip()

    def exec(self, name: str, *argv, check=True) -> subprocess.CompletedProcess:
        """A command on the host through Docker: only to inject faults and look, never to provision."""
        return run(["docker", "exec", self.container(name), *argv], check=check)

    def ssh(self, name: str, command: str, check=True, timeout=600, input=None) -> subprocess.CompletedProcess:
        """``command`` on host ``name`` as admin, over SSH."""
        return run(["ssh", "-i", str(self.key), "-o", f"UserKnownHostsFile={self.known_hosts}",
                    "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"admin@{self.address(name)}", command],
                   check=check, timeout=timeout, input=input)

    def remove(self, name: str) -> None:
        """Host ``name`` is decommissioned: its container and its disk are gone."""
        run(["docker", "rm", "-f", "-v", self.container(name)], check=False, timeout=120)
        self.names.remove(name)

    def write_inventory(self, control: str, nodes: dict[str, dict]) -> Path:
        """``control`` (also a node) and ``nodes``: name -> extra host variables."""
        hosts = {name: {"ansible_host": self.address(name)} for name in [control, *nodes]}
        inventory = {"all": {
            "vars": {
                "ansible_user": "admin",
                "ansible_ssh_private_key_file": str(self.key),
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes",
                "minihpc_shared_fs": "existing",
                # Unprivileged containers cannot give services a user namespace (Debian's
                # Redis and Prometheus units ask for one); real hosts keep the default.
                "minihpc_systemd_private_users": False,
                "minihpc_node_speed_probe": False,
                # Hosts that share two cores with the e2e suite's cluster (scripts/test_tiers.py
                # runs the two side by side) can miss 2.5 s of heartbeats while uv compiles on the
                # others, and the master then restarts a healthy agent over SSH (one was found
                # 'deactivating' after the first run; again at 10 s in a cold CI whose unit tier ran
                # 2.7x slower than a day before, with an extra requeue). No test here waits for a lapse: a killed
                # or stopped agent is reported at once (its unit's ExecStopPost, its goodbye).
                "minihpc_node_timeout": NODE_TIMEOUT,
            },
            "children": {
                "control": {"hosts": {control: hosts[control]}},
                "nodes": {"hosts": {control: {}, **{n: {**hosts[n], **extra} for n, extra in nodes.items()}}},
            },
        }}
        import yaml  # here, so that `python3 -m tests.ansible.hosts build` runs before the venv exists

        self.inventory.write_text(yaml.safe_dump(inventory, sort_keys=False))
        return self.inventory

    def provision(self, *args: str, timeout=1200) -> subprocess.CompletedProcess:
        """make ansible-setup, as users run it; the output is kept beside the inventory."""
        proc = run(["make", "--no-print-directory", "ansible-setup", f"INVENTORY={self.inventory}",
                    *([f"ARGS={' '.join(args)}"] if args else [])],
                   check=False, timeout=timeout, cwd=ROOT, env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
        runs = sorted(self.dir.glob("run-*.log"))
        (self.dir / f"run-{len(runs) + 1}.log").write_text(proc.stdout + proc.stderr)
        return proc

    def teardown(self) -> None:
        names = run(["docker", "ps", "-aq", "--filter", f"name=^{PREFIX}-"], check=False).stdout.split()
        if names:
            run(["docker", "rm", "-f", "-v", *names], check=False, timeout=120)
        run(["docker", "network", "rm", self.network], check=False)
        run(["docker", "volume", "rm", "-f", self.volume], check=False)
        self.names = []


if __name__ == "__main__":
    # `python -m tests.ansible.hosts build`: the hosts' image, ahead of the suite (scripts/test_tiers.py).
    import sys

    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python -m tests.ansible.hosts build")
    Hosts(Path.cwd()).build()
