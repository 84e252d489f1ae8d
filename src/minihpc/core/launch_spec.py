"""What a node runs for its share of a job: the torchrun command line and the job's
environment. Pure functions of a :class:`LaunchSpec`, the payload the master queues."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from minihpc.core import gpus
from minihpc.core.arrays import array_env
from minihpc.core.parsing import compress_hostlist

LAUNCH_TASK = "minihpc.node.agent.launch_task"
"""The rq task the master queues on a node's queue (resolved by name in the node agent)."""
TORCHRUN_MODULE = "minihpc.node.torchrun"
"""What a node runs for its share of a job: torchrun, reporting real exit codes and signals."""
RANK_MODULE = "minihpc.node.rank"
"""What torchrun runs per rank: the job's script, with Slurm's per-rank variables."""


@dataclass(frozen=True)
class LaunchSpec:
    """One node's launch task; travels through rq as JSON."""

    job_id: int
    attempt: int
    name: str
    node: str
    node_rank: int
    nodes: list[str]
    master_addr: str
    tasks_per_node: int
    script: str
    args: list[str] = field(default_factory=list)
    workdir: str = ""
    source_dir: str = ""  # where the submitted script lives, so its sibling modules import
    log_path: str = ""
    checkpoint_dir: str = ""
    data_dir: str = ""
    script_sha256: str = ""  # what was submitted: checked before the ranks start (script_changed)
    launch: str = "torchrun"  # or "batch": how the script runs (core.batch)
    submit_dir: str = ""  # SLURM_SUBMIT_DIR: where sbatch ran, not -D's directory ("" : workdir)
    user: str = ""  # who submitted it (%u in output names)
    cpus_per_task: int = 1  # -c
    output: str = ""  # -o's pattern (core.output_names); "" : the node logs only
    error: str = ""  # -e's pattern; "" : with the output
    environment: dict[str, str] = field(default_factory=dict)  # --export's variables
    warn_signal: str = ""  # --signal's "[B:]SIG@SECS" (core.signals)
    cold: bool = False  # --cold: torchrun in a new interpreter, not forked from the warm launcher
    partition: str = ""
    stdin: bool = False  # the batch script reads the job's input stream (minihpc run's stdin)
    array_job_id: int | None = None
    array_task_id: int | None = None
    array_spec: str = ""
    gpus: list[int] = field(default_factory=list)  # the node's GPU ordinals the job holds (core.gpus)
    gpus_per_task: int = 0  # --gpus-per-task: each task sees only its own slice of them
    uid: int | None = None  # the uid the cluster gave ``user`` (core.tenants), for MINIHPC_JOB_USER=%u
    resizes: int = 0  # launches of an elastic job within this attempt before this one (core.elastic)
    elastic: str = ""  # an elastic job's node range, "MIN-MAX"; "" : a fixed-size job

    @property
    def nnodes(self) -> int:
        return len(self.nodes)

    @property
    def world_size(self) -> int:
        return self.nnodes * self.tasks_per_node

    def to_payload(self) -> dict:
        return asdict(self)

    @classmethod
    def from_payload(cls, payload: dict) -> LaunchSpec:
        return cls(**payload)


def script_changed(spec: LaunchSpec, actual: str | None) -> str | None:
    """Why the spooled script must not run -- it is gone, or its sha256 (``actual``) is not the
    one recorded at submit -- or None when it is what was submitted (or a task from before
    sha256s were dispatched recorded none)."""
    if not spec.script_sha256:
        return None
    if actual is None:
        return f"script {spec.script} is gone since submit (recorded sha256 {spec.script_sha256[:12]})"
    if actual != spec.script_sha256:
        return (f"script {spec.script} changed after submit: sha256 {actual[:12]} "
                f"!= recorded {spec.script_sha256[:12]}")
    return None


def spool_folder(spec: LaunchSpec) -> str | None:
    """The job's own folder in the spool (``job-<id>``, its script's), or None for a script
    that is not in one."""
    folder = os.path.dirname(spec.script)
    return folder if os.path.basename(folder) == f"job-{spec.job_id}" else None


def path_problem(spec: LaunchSpec, cluster: dict[str, str]) -> str | None:
    """Why ``spec`` must not run on a node: a path it names is not where the cluster keeps this
    job's files (``cluster``: the record with the layout the master dispatched from), so an
    agent, which runs as root, never creates, opens or hands over a file elsewhere on the word
    of a launch task (issue 33: one node's Redis password could queue one). None when every
    path is the job's."""
    def inside(path: str, root: str) -> bool:
        return os.path.normpath(path).startswith(os.path.normpath(root) + os.sep)

    expected = {}
    if cluster.get("log_dir"):
        expected["log_path"] = os.path.join(cluster["log_dir"], f"job-{spec.job_id}", f"{spec.node}.log")
    if cluster.get("checkpoint_dir") and spec.checkpoint_dir:
        expected["checkpoint_dir"] = os.path.join(cluster["checkpoint_dir"], f"job-{spec.job_id}")
    for name, path in expected.items():
        if getattr(spec, name) != path:
            return f"launch task's {name} {getattr(spec, name)!r} is not the job's ({path!r})"
    if cluster.get("spool_dir") and not inside(spec.script, cluster["spool_dir"]):
        return f"launch task's script {spec.script!r} is not in the spool ({cluster['spool_dir']})"
    if ".." in spec.node or "/" in spec.node:
        return f"launch task's node name {spec.node!r} is not a node's"
    return None


def torchrun_args(spec: LaunchSpec, master_port: int) -> list[str]:
    """torchrun's arguments for a static rendezvous; the script runs through RANK_MODULE,
    which adds Slurm's per-rank variables and exits cleanly (see minihpc.node.rank)."""
    return [
        f"--nnodes={spec.nnodes}",
        f"--node-rank={spec.node_rank}",
        f"--nproc-per-node={spec.tasks_per_node}",
        f"--master-addr={spec.master_addr}",
        f"--master-port={master_port}",
        "--rdzv-backend=static",
        "--max-restarts=0",
        "--monitor-interval=0.02",  # how soon a dead rank is seen: it dates the failure
        "--module",
        RANK_MODULE,
        spec.script,
        *spec.args,
    ]


def direct_rank_env(spec: LaunchSpec, master_port: int, env: dict[str, str]) -> dict[str, str]:
    """``env`` with what torchrun's agent gives the one rank of a one-task-per-node share (static
    rendezvous), for a share whose rank the warm launcher runs without torchrun: its rank is
    the node's rank, and the job's store at MASTER_ADDR:MASTER_PORT is the one its process
    formed the gang on (minihpc.node.warm_child), hosted by node rank 0 as torchrun's agent
    hosts it (``TORCHELASTIC_USE_AGENT_STORE=True``); a one-node job's rank hosts its own."""
    rank, world = str(spec.node_rank), str(spec.nnodes)
    return {
        **env,
        "RANK": rank, "GROUP_RANK": rank, "ROLE_RANK": rank, "ROLE_NAME": "default",
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "WORLD_SIZE": world, "GROUP_WORLD_SIZE": world, "ROLE_WORLD_SIZE": world,
        "MASTER_ADDR": spec.master_addr, "MASTER_PORT": str(master_port),
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "none",
        "TORCHELASTIC_USE_AGENT_STORE": str(spec.nnodes > 1),  # one node: the rank hosts its own
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }


SECRET_ENV = ("MINIHPC_REDIS_URL", "MINIHPC_TOKEN", "REDIS_PASSWORD", "REDIS_MASTER_PASSWORD", "REDIS_NODE_PASSWORD",
              "REDIS_CLI_PASSWORD", "REDIS_EXPORTER_PASSWORD", "REDISCLI_AUTH", "GRAFANA_ADMIN_PASSWORD",
              "MINIHPC_RESTART_TOKEN")
"""The daemons' credentials: never in a job's environment (jobs are untrusted code)."""
DAEMON_ONLY_ENV = (*SECRET_ENV, "PYTHONSAFEPATH")
"""What the agent's environment has that a job's must not: its credentials, and the safe-path
setting that keeps the daemons from importing job-written files (a job's script imports the
modules beside it, as plain ``python script.py`` does)."""


def job_env(spec: LaunchSpec, master_port: int, base: dict[str, str]) -> dict[str, str]:
    """The environment of the job's ranks (torchrun adds RANK, LOCAL_RANK, WORLD_SIZE,
    MASTER_ADDR and MASTER_PORT per rank): the agent's, less its credentials."""
    env = {k: v for k, v in base.items() if k not in DAEMON_ONLY_ENV}
    env.update({k: v for k, v in spec.environment.items() if k not in DAEMON_ONLY_ENV})  # --export
    hostlist = compress_hostlist(spec.nodes)
    env.update(
        {
            "MINIHPC_JOB_ID": str(spec.job_id),
            "MINIHPC_JOB_NAME": spec.name,
            "MINIHPC_ATTEMPT": str(spec.attempt),
            "MINIHPC_NODE": spec.node,
            "MINIHPC_NODELIST": ",".join(spec.nodes),
            "MINIHPC_CHECKPOINT_DIR": spec.checkpoint_dir,
            "MINIHPC_DATA_DIR": spec.data_dir,
            "SLURM_JOB_ID": str(spec.job_id),
            "SLURM_JOBID": str(spec.job_id),
            "SLURM_JOB_NAME": spec.name,
            "SLURM_NTASKS": str(spec.world_size),
            "SLURM_NPROCS": str(spec.world_size),
            "SLURM_NTASKS_PER_NODE": str(spec.tasks_per_node),
            "SLURM_JOB_NODELIST": hostlist,
            "SLURM_NODELIST": hostlist,
            "SLURM_JOB_NUM_NODES": str(spec.nnodes),
            "SLURM_NNODES": str(spec.nnodes),
            "SLURM_NODEID": str(spec.node_rank),
            "SLURMD_NODENAME": spec.node,
            "SLURM_RESTART_COUNT": str(spec.attempt - 1 - spec.resizes),  # requeues, not resizes
            "PYTHONUNBUFFERED": "1",
        }
    )
    if spec.submit_dir or spec.workdir:
        env["SLURM_SUBMIT_DIR"] = spec.submit_dir or spec.workdir
    # The job runs a spooled copy; its original folder stays importable for helper modules.
    pythonpath = spec.environment.get("PYTHONPATH", base.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (spec.source_dir, pythonpath) if p)
    if spec.cpus_per_task > 1:
        env["SLURM_CPUS_PER_TASK"] = str(spec.cpus_per_task)
    if spec.partition:
        env["SLURM_JOB_PARTITION"] = spec.partition
    env.update(gpus.job_env(spec.gpus, spec.gpus_per_task))  # none: CUDA_VISIBLE_DEVICES empty
    if spec.array_job_id is not None:
        env.update(array_env(spec.array_job_id, spec.array_task_id, spec.array_spec))
    if spec.elastic:  # what minihpc.elastic reads: the job may change size while it runs
        env.update({"MINIHPC_ELASTIC": spec.elastic, "MINIHPC_RESIZES": str(spec.resizes)})
    return env
