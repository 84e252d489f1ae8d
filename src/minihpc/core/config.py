"""Settings: flag > environment (MINIHPC_*) > config file > the defaults documented here.

A frozen :class:`Settings` is built once per process and passed explicitly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

from minihpc.core import gpus, partitions
from minihpc.core.errors import UsageError

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
"""Where every command looks for the cluster when nothing else says."""

HEARTBEAT_INTERVAL = 0.5
"""Seconds between two heartbeats of a node agent."""

NODE_TIMEOUT = 2.5
"""Seconds of heartbeat silence after which a node is DOWN (its alive key expires)."""

KILL_WAIT = 3.0
"""Seconds between SIGTERM and SIGKILL when a job's ranks are torn down (Slurm's KillWait)."""

SCHEDULER_INTERVAL = 0.5
"""Longest time the master sleeps when nothing wakes it."""

POLL_INTERVAL = 0.1
"""How often a node agent checks a running job for cancel, timeout or a failed peer."""


MAX_REQUEUES = 3
"""Times a job interrupted by node failures is requeued before it stays NODE_FAIL."""


PROGRESS_TIMEOUT = 300.0
"""Watchdog: seconds a job that reports progress may go without a report before its gang is
torn down and requeued (a rank hung in a collective). Per job: submit --progress-timeout."""

RESTART_BUDGET = 5
"""Restarts of one node the health monitor makes within RESTART_WINDOW before draining it."""

RESTART_WINDOW = 600.0

RESTART_BACKOFF_MAX = 30.0
"""Longest wait between restarts of a failing node (the wait doubles from 1 s)."""

MAX_TASKS_PER_NODE = 0
"""Most ranks a job may ask for on one node (Slurm's MaxTasksPerNode); 0: the CPUs of the
largest registered node. The master publishes it in the cluster record, so every face (CLI,
API) refuses the same submissions."""

JOB_USER = ""
"""The user a node's ranks run as (MINIHPC_JOB_USER): ``%u``, each job as its own user
(core.tenants; the default in the Compose cluster and on Ansible hosts, whose agents run as
root for that alone), or one fixed account for every job. Empty: the agent's own user (local
mode on a user's own account)."""

SERVICE_USER = "minihpc"
"""The daemons' account (MINIHPC_SERVICE_USER): never a job's user (core.tenants)."""

JOB_LOG_MAX = 100 * 1024 * 1024
"""Bytes of a job's output kept in its log on each node (MINIHPC_JOB_LOG_MAX), so a job that
prints without end cannot fill the shared disk: the first bytes as they come, then only the
last ones (minihpc.node.joblog.TAIL), with a line saying how much was dropped. 0: no cap."""

KEEP_ENDED_JOBS = 10_000
"""How many ended jobs the cluster remembers (MINIHPC_KEEP_ENDED_JOBS): the master forgets the
oldest beyond these -- record, results, spooled script and logs, as ``minihpc delete`` does;
checkpoints are the user's and stay. 0: no count limit."""

KEEP_ENDED_DAYS = 30.0
"""Days an ended job is remembered (MINIHPC_KEEP_ENDED_DAYS); older ones are forgotten as with
KEEP_ENDED_JOBS. 0: no age limit. A job a pending job depends on is kept either way."""

PARTITIONS = ""
"""Partitions (MINIHPC_PARTITIONS): ``NAME=HOSTLIST`` items separated by ``;``, as
``debug=worker-node-[1-2];gpu=worker-node-3`` (see minihpc.core.partitions). Empty: only the
default partition. The master publishes them in the cluster record."""

NODE_FEATURES = ""
"""Node features (MINIHPC_NODE_FEATURES): ``HOSTLIST=FEATURE,...`` items separated by ``;``, as
``worker-node-[1-2]=ib,big;master-node=small`` (see minihpc.core.features): what ``sbatch
--constraint`` selects on. The master publishes them in the cluster record."""

DEFAULT_PARTITION = partitions.DEFAULT_PARTITION
"""Where a job without ``-p`` runs (MINIHPC_DEFAULT_PARTITION; slurm.conf's Default=YES). Not
named in PARTITIONS, it holds every node."""

NODE_GPUS = -1
"""GPUs a node agent registers (MINIHPC_NODE_GPUS, for tests and operators); -1: the agent
counts its ``/dev/nvidiaN`` device files."""

NODE_GPU_DEVICES = ""
"""The GPU ordinals a node agent offers (MINIHPC_NODE_GPU_DEVICES: ``0,1``, ``2-3``; see
minihpc.core.gpus): local mode gives each of its nodes its own share of the machine's GPUs this
way. Empty: the first ``node_gpus`` (all it counts, by default)."""

SPEED_PROBE = True
"""Whether a node agent measures its compute speed once when it starts (MINIHPC_SPEED_PROBE:
python -m minihpc.machine.speed_probe, a few seconds of one process, in the background; the
figure is ``nodes --long``'s GFLOPS). Off (0) for tests that start many agents."""

LAUNCH_TIMEOUT = 60.0
"""Seconds a running job's launch task may wait in its node's queue before the node is judged
stuck (MINIHPC_LAUNCH_TIMEOUT: it heartbeats but takes no work; core.stuck): the job is
requeued, the node drained and restarted. A healthy agent takes a launch within moments, or
once it has torn down the job before (kill_wait and a sweep)."""

MAX_JOBS_PER_USER = 10_000
"""How many jobs (array tasks each count) one user who is not an admin may have pending or
running at once (MINIHPC_MAX_JOBS_PER_USER; 0: no cap): Slurm's MaxSubmitJobs per user. A
submit past it is refused with one line, so one user's flood cannot fill Redis or the queue."""

MAX_CHECKPOINT_BYTES_PER_USER = 20 << 30
"""Bytes of checkpoints one user keeps when jobs run as their owners
(MINIHPC_MAX_CHECKPOINT_BYTES_PER_USER; 0: no cap): when one of the user's jobs starts, the
checkpoints of its oldest jobs that ended for good go until the rest fits (node.quota)."""

NODE_OWNS_HOST = True
"""Whether a node agent has its machine's process space to itself (MINIHPC_NODE_OWNS_HOST): a
container or a host, as in Compose and on Ansible hosts. Then a job's end kills every process of
its user there (node.sweep); local mode's agents share one machine with each other and with you,
so there only what a job started below its agent is ended (0)."""

JOB_FIREWALL = True
"""Whether a node agent that owns its host and runs jobs as other users keeps them off Redis's
port with a firewall rule by uid (MINIHPC_JOB_FIREWALL; core.firewall): it needs ``iptables``
and ``NET_ADMIN``, which the image and Ansible hosts give it; where it cannot, it says so once."""

CRASH_EVENTS = True
"""Whether the master hears of a node agent's end as it happens (MINIHPC_CRASH_EVENTS: local
mode's process watcher, the restart proxy's Docker events, a systemd unit's ExecStopPost)
rather than after node_timeout of silence. Off (0) only to measure the difference (make
bench-recovery); heartbeats judge silences either way."""

WARM_LAUNCHER = True
"""Whether a node agent keeps a warm launcher (MINIHPC_WARM_LAUNCHER: a process that has
imported torch and what DDP pulls in, and forks each job's torchrun from there instead of
starting a new interpreter; minihpc.node.warm). Off (0) starts every job cold, as ``--cold``
does for one job."""

ELASTIC_GROW_EVERY = 10.0
"""Seconds a running elastic job (``--elastic -N MIN-MAX``) waits after it started or last
changed size before it takes nodes that came free (MINIHPC_ELASTIC_GROW_EVERY; core.elastic):
each growth restarts its ranks from their checkpoint, so a node that flaps costs it a restart
every so often at most. Only nodes no pending job needs are taken."""


@dataclass(frozen=True)
class Settings:
    redis_url: str = DEFAULT_REDIS_URL
    heartbeat_interval: float = HEARTBEAT_INTERVAL
    node_timeout: float = NODE_TIMEOUT
    kill_wait: float = KILL_WAIT
    scheduler_interval: float = SCHEDULER_INTERVAL
    poll_interval: float = POLL_INTERVAL
    max_requeues: int = MAX_REQUEUES
    progress_timeout: float = PROGRESS_TIMEOUT
    launch_timeout: float = LAUNCH_TIMEOUT
    restart_budget: int = RESTART_BUDGET
    restart_window: float = RESTART_WINDOW
    restart_backoff_max: float = RESTART_BACKOFF_MAX
    max_tasks_per_node: int = MAX_TASKS_PER_NODE
    max_jobs_per_user: int = MAX_JOBS_PER_USER
    max_checkpoint_bytes_per_user: int = MAX_CHECKPOINT_BYTES_PER_USER
    job_user: str = JOB_USER
    service_user: str = SERVICE_USER
    job_log_max: int = JOB_LOG_MAX
    keep_ended_jobs: int = KEEP_ENDED_JOBS
    keep_ended_days: float = KEEP_ENDED_DAYS
    partitions: str = PARTITIONS
    default_partition: str = DEFAULT_PARTITION
    node_features: str = NODE_FEATURES
    node_gpus: int = NODE_GPUS
    node_gpu_devices: str = NODE_GPU_DEVICES
    speed_probe: bool = SPEED_PROBE
    crash_events: bool = CRASH_EVENTS
    node_owns_host: bool = NODE_OWNS_HOST
    job_firewall: bool = JOB_FIREWALL
    warm_launcher: bool = WARM_LAUNCHER
    elastic_grow_every: float = ELASTIC_GROW_EVERY

    def with_overrides(self, **overrides) -> Settings:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def local_state_dir() -> Path:
    """Where ``minihpc up --local`` keeps its Redis data, logs and the URL it printed."""
    if os.environ.get("MINIHPC_STATE_DIR"):
        return Path(os.environ["MINIHPC_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "minihpc"


def shared_layout(shared_dir: str | Path, mode: str) -> dict[str, str]:
    """The cluster record for a shared tree; local mode and the containers use the same one:
    ``jobs`` (the spool), ``logs``, ``models`` (checkpoints) and ``data``."""
    root = Path(shared_dir)
    return {
        "mode": mode,
        "spool_dir": str(root / "jobs" / "spool"),
        "log_dir": str(root / "logs"),
        "checkpoint_dir": str(root / "models"),
        "data_dir": str(root / "data"),
    }


def published_settings(settings: Settings) -> dict[str, str]:
    """The settings that go in the cluster record beside the layout: the limits every face
    checks a submission against, one value for the whole cluster whoever submits."""
    parts = partitions.parse(settings.partitions, settings.default_partition, settings.node_features)
    return {"max_tasks_per_node": str(settings.max_tasks_per_node),
            "max_jobs_per_user": str(settings.max_jobs_per_user),
            "max_checkpoint_bytes_per_user": str(settings.max_checkpoint_bytes_per_user), **parts.to_record()}


def local_redis_url_file(state_dir: Path | None = None) -> Path:
    """Where a local cluster writes its URL (minihpc.machine.local_state.LocalState owns it)."""
    return (state_dir or local_state_dir()) / "redis_url"


def load_settings(config_file: str | None = None, env: dict | None = None) -> Settings:
    """Build the settings from a config file, then the environment on top of it."""
    env = os.environ if env is None else env
    values: dict = {}
    path = config_file or env.get("MINIHPC_CONFIG")
    if path:
        values.update(_read_toml(Path(path)))
    for f in fields(Settings):
        raw = env.get("MINIHPC_" + f.name.upper())
        if raw is not None and raw != "":
            values[f.name] = raw
    if "redis_url" not in values:
        try:  # a job's user may not read the agent's home (scontrol show hostnames needs no URL)
            values["redis_url"] = local_redis_url_file().read_text().strip()
        except OSError:
            pass
    settings = Settings(**{k: _coerce(k, v) for k, v in values.items()})
    partitions.parse(settings.partitions, settings.default_partition, settings.node_features)  # a bad one fails here
    gpus.parse_devices(settings.node_gpu_devices)
    return settings


def _read_toml(path: Path) -> dict:
    import tomllib  # only with a config file: a command without one need not import it

    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise UsageError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None
    section = data.get("minihpc", data)
    known = {f.name for f in fields(Settings)}
    unknown = sorted(set(section) - known)
    if unknown:
        raise UsageError(f"config file {path} has unknown settings: {', '.join(unknown)}")
    return dict(section)


_COUNTS = {"max_requeues": 0, "restart_budget": 1, "max_tasks_per_node": 0, "max_jobs_per_user": 0,
           "max_checkpoint_bytes_per_user": 0, "job_log_max": 0, "keep_ended_jobs": 0, "node_gpus": -1}
"""Whole-number settings, with their least value."""


_TEXTS = {"redis_url", "job_user", "service_user", "partitions", "default_partition", "node_features", "node_gpu_devices"}
"""Settings kept as text."""


_FLAGS = {"speed_probe", "crash_events", "warm_launcher", "node_owns_host", "job_firewall"}
"""Settings that are on or off: true/false, 1/0, yes/no, on/off."""


_ZERO_TURNS_OFF = {"keep_ended_days"}
"""Number settings that may be 0, which turns their limit off; every other number is positive."""


def _coerce(name: str, value):
    if name in _TEXTS:
        return str(value)
    if name in _FLAGS:
        return _flag(name, value)
    if name in _COUNTS:
        try:
            count = int(str(value))
        except ValueError:
            raise UsageError(f"setting {name}={value!r} is not a whole number") from None
        if count < _COUNTS[name]:
            raise UsageError(f"setting {name}={value!r} must be at least {_COUNTS[name]}")
        return count
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"setting {name}={value!r} is not a number") from None
    if name in _ZERO_TURNS_OFF and number == 0:
        return number
    if number <= 0:
        raise UsageError(f"setting {name}={value!r} must be positive" + (" or 0" if name in _ZERO_TURNS_OFF else ""))
    return number


def _flag(name: str, value) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"setting {name}={value!r} is not on or off (1/0, true/false, yes/no, on/off)")
