"""Submitting a job: validate, copy the script into the spool, record it as PENDING."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from minihpc.client import arrays, tree
from minihpc.client.access import login_name
from minihpc.core import dependency as dependencies
from minihpc.core.arrays import ArraySpec
from minihpc.core.errors import UsageError
from minihpc.core.job_control import HELD_REASON, check_priority, check_size, check_user_jobs
from minihpc.core.parsing import compress_hostlist
from minihpc.core.scheduler import plan
from minihpc.core.models import Job, NodeStatus, Priority
from minihpc.core.partitions import Partitions
from minihpc.core.requirements import published_cpus, refusal
from minihpc.machine import files
from minihpc.state.store import Store


@dataclass
class Request:
    script: str
    args: list[str] = field(default_factory=list)
    nodes: int = 1  # the least, for a range
    max_nodes: int = 0  # -N MIN-MAX: the most; 0: exactly ``nodes``
    tasks_per_node: int = 1
    priority: Priority = Priority.NORMAL
    time_limit: float | None = None
    progress_timeout: float | None = None
    name: str | None = None
    dependency: list[str] = field(default_factory=list)  # core.dependency's stored form
    workdir: str = ""
    user: str = ""
    admin: bool = False  # whether user is an admin (who may ask for priority high)
    text: str | None = None  # the script as already read; spooled exactly as parsed
    script_name: str | None = None  # for a script read from stdin ("-"): its file name
    launch: str = "torchrun"  # or "batch" (core.batch.launch_mode)
    cpus_per_task: int = 1
    output: str = ""
    error: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    warn_signal: str = ""
    begin_at: float | None = None
    requeue: bool = True
    elastic: bool = False  # --elastic: with a range, it changes size while it runs (core.elastic)
    cold: bool = False
    mem_bytes: int = 0
    gpus: int = 0
    gpus_per_task: int = 0
    partition: str = ""
    array: ArraySpec | None = None
    hold: bool = False  # sbatch -H/--hold: recorded held, started only once released
    nodelist: list[str] = field(default_factory=list)  # -w: nodes it must run on
    exclude: list[str] = field(default_factory=list)  # -x: nodes it must never run on
    constraint: str = ""  # -C: node features it needs
    stdin: bool = False  # minihpc run: the script reads the job's input stream
    tree: bytes | None = None  # the working tree's tar archive (client.tree); script is a path inside it


STDIN = "-"
TREE_DIR = "tree"
"""Where in a job's spool directory its working tree (``submit --tree``) is unpacked."""
SPOOL_WORKDIR = "@spool"
"""A request's workdir meaning the job's own spool directory (a script sent over the API has
no directory of its own on the cluster)."""


def read_stdin(stream) -> str:
    try:
        text = stream.read()
    except UnicodeDecodeError:
        raise UsageError("the script on standard input is not a text file") from None
    if not text.strip():
        raise UsageError("the script on standard input is empty")
    return text


def read_script(path: str) -> str:
    """The script's text, or a UsageError that says what is wrong with the path."""
    if not os.path.exists(path):
        raise UsageError(f"script {path!r} does not exist")
    if not os.path.isfile(path):
        raise UsageError(f"script {path!r} is not a file")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except PermissionError:
        raise UsageError(f"script {path!r} is not readable (permission denied)") from None
    except UnicodeDecodeError:
        raise UsageError(f"script {path!r} is not a text file") from None


SCRIPT_MAX = 1 << 20
"""Bytes a job script may have (a script, not a data set: bring data through the data volume)."""


def check_script(text: str, name: str) -> None:
    """UsageError for a script that cannot be spooled: empty, too large, or a file name that is
    not a plain name."""
    if not text.strip():
        raise UsageError(f"script {name!r} is empty")
    if len(text.encode()) > SCRIPT_MAX:
        raise UsageError(f"script {name!r} is over {SCRIPT_MAX} bytes")
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise UsageError(f"invalid script name {name!r}: expected a file name such as train.py")


def tasks_limit(cluster: dict[str, str], cpus: list[int]) -> tuple[int, str] | None:
    """The most tasks per node a job may ask for, and where that number comes from: the
    cluster's max_tasks_per_node when the master published one (not 0), else the CPUs of the
    largest registered node; None when neither says (no node has registered yet)."""
    try:
        setting = int(cluster.get("max_tasks_per_node") or 0)
    except ValueError:
        setting = 0
    if setting > 0:
        return setting, "MINIHPC_MAX_TASKS_PER_NODE"
    largest = max((c for c in cpus if c > 0), default=0)
    return (largest, "the CPUs of the largest node") if largest else None


def validate(request: Request, capacity: int, limit: tuple[int, str] | None = None) -> None:
    """UsageError for a request no cluster of ``capacity`` nodes, each running at most
    ``limit`` tasks (see :func:`tasks_limit`), could ever run."""
    if request.nodes < 1:
        raise UsageError(f"--nodes must be at least 1, got {request.nodes}")
    if request.tasks_per_node < 1:
        raise UsageError(f"--ntasks-per-node must be at least 1, got {request.tasks_per_node}")
    if request.nodes > capacity:
        raise UsageError(
            f"job needs {request.nodes} node{'s' if request.nodes != 1 else ''}; "
            f"the cluster has {capacity}"
        )
    if limit is not None and request.tasks_per_node > limit[0]:
        raise UsageError(
            f"--ntasks-per-node {request.tasks_per_node} is over the limit of {limit[0]} "
            f"task{'s' if limit[0] != 1 else ''} per node ({limit[1]})"
        )


def check_placement(request: Request, cluster: dict[str, str], nodes: list[NodeStatus]) -> None:
    """UsageError, one line, for a request the registered nodes could never hold as the
    cluster record's partitions group them (core.requirements.refusal): an unknown ``-p``,
    ``--gres=gpu:N``, ``--mem`` or ``-c`` more than any node has, ``-N`` over the partition."""
    why = refusal(request, request.nodes, request.partition, nodes, Partitions.from_record(cluster),
                  published_cpus(cluster))
    if why is not None:
        raise UsageError(why)


SPOOL_FOLDER_MODE = 0o770
"""A job's spool folder before it starts: the daemons' group's (not the umask's to decide)."""

SPOOLED_MODE = 0o444
"""A spooled script is read-only: the job runs what was submitted (its sha256 is checked before
each launch), and deleting the job still removes it (its directory stays writable)."""


def write_spooled(path: str, data: bytes) -> None:
    """Write the job's copy of its script durably before the job is recorded: a submit that was
    acknowledged has its script on disk even if the machine dies the next moment."""
    directory = os.path.dirname(path)
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    # The daemons' alone until the job starts (the API's and the master's on hosts where they
    # are two uids of one group): then its node hands it to the job's group
    # (node.identity.lend), so no other user's job reads it.
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, SPOOL_FOLDER_MODE)
    files.replace(path, data, durable=True, mode=SPOOLED_MODE)
    files.fsync_dir(os.path.dirname(directory))  # the job's own directory in the spool, too


def check_dependency(store: Store, stored: list[str]) -> None:
    """UsageError when a --dependency term names a job (or array task) that does not exist."""
    named = dependencies.refs(stored)
    states = store.dependency_states(named) if named else {}
    missing = [t for t in dependencies.terms(stored) if t.job is not None and states.get(t.key) is None]
    if missing:
        raise UsageError(f"dependency {missing[0].stored()} names job {missing[0].key}, which does not exist")


def requested(request: Request, **where) -> Job:
    """The job record ``request`` asks for; ``where``: what only the submit knows (its id,
    name, spooled script, directories, time)."""
    return Job(
        user=request.user or login_name(),
        args=list(request.args),
        nodes_requested=request.nodes,
        max_nodes=request.max_nodes,
        tasks_per_node=request.tasks_per_node,
        priority=request.priority,
        time_limit=request.time_limit,
        progress_timeout=request.progress_timeout,
        dependency=list(request.dependency),
        launch=request.launch,
        cpus_per_task=request.cpus_per_task,
        output=request.output,
        error=request.error,
        environment=dict(request.environment),
        warn_signal=request.warn_signal,
        begin_at=request.begin_at,
        requeue=request.requeue,
        elastic=request.elastic,
        cold=request.cold,
        mem_bytes=request.mem_bytes,
        gpus=request.gpus,
        gpus_per_task=request.gpus_per_task,
        partition=request.partition,
        nodelist=list(request.nodelist),
        exclude=list(request.exclude),
        constraint=request.constraint,
        stdin=request.stdin,
        held_by=(request.user or login_name()) if request.hold else None,
        reason=HELD_REASON if request.hold else "None",
        **where,
    )


def checked(store: Store, request: Request, text: str, name: str,
            recent: Callable[[], tuple[dict[str, str], list[NodeStatus]]] | None = None,
            ) -> tuple[dict[str, str], list[NodeStatus]]:
    """Every check a submit makes before it records anything (UsageError, one line, for the
    first that fails); the cluster record and the nodes they read. ``recent``: the cluster and
    the nodes as a long-lived caller read them lately (state.nodes.RecentNodes); a request they refuse is
    checked again against the nodes as they are, so a stale read never refuses a job."""
    check_script(text, name)
    check_priority(request.priority, request.admin)
    check_size(request.args, request.name or name, request.environment, (request.output, request.error),
               len(request.array.indexes) if request.array else 1)
    cluster, nodes = recent() if recent else (store.cluster_info(), store.node_statuses())
    try:
        check_fit(request, cluster, nodes)
    except UsageError:
        if recent is None:
            raise
        cluster, nodes = store.cluster_info(), store.node_statuses()
        check_fit(request, cluster, nodes)
    check_cap(store, request, int(cluster.get("max_jobs_per_user") or 0))
    check_dependency(store, request.dependency)
    return cluster, nodes


def check_fit(request: Request, cluster: dict[str, str], nodes: list[NodeStatus]) -> None:
    """UsageError for a request ``nodes`` could never hold: its size, tasks and placement."""
    validate(request, len(nodes), tasks_limit(cluster, [n.cpus for n in nodes]))
    check_placement(request, cluster, nodes)


def check_cap(store: Store, request: Request, cap: int) -> None:
    """UsageError when the submit would take its user past the jobs one user may have pending
    or running (MINIHPC_MAX_JOBS_PER_USER); admins are not capped."""
    if not cap or request.admin:
        return
    adding = len(request.array.indexes) if request.array else 1
    user = request.user or login_name()
    check_user_jobs(user, store.live_jobs(user, cap - adding + 1), adding, cap)


def submit(store: Store, request: Request,
           recent: Callable[[], tuple[dict[str, str], list[NodeStatus]]] | None = None) -> Job:
    """Record the job; the script is copied now, so later edits do not change it. With
    ``request.array``, one job per index (client.arrays): the task whose id is the array's is
    returned. ``recent``: as :func:`checked` has it."""
    in_tree = request.tree is not None
    from_stdin = request.script == STDIN or in_tree
    name = os.path.basename(request.script if in_tree else request.script_name or "stdin") if from_stdin else None
    source = f"(stdin) {name}" if from_stdin else os.path.abspath(request.script)
    text = request.text if request.text is not None else read_script(source)
    cluster, _ = checked(store, request, text, name if from_stdin else os.path.basename(source), recent)
    job_id = store.reserve_job_ids(len(request.array.indexes)) if request.array else store.next_job_id()
    spool = os.path.join(cluster["spool_dir"], f"job-{job_id}")
    copy = os.path.join(spool, name or os.path.basename(source))
    data = text.encode("utf-8")
    write_spooled(copy, data)
    if in_tree:  # the job runs in its own copy of the tree, its script's folder importable
        workdir = os.path.join(spool, TREE_DIR)
        tree.unpack(request.tree, workdir)
        source = os.path.normpath(os.path.join(workdir, request.script))
    submit_dir = spool if request.workdir == SPOOL_WORKDIR else workdir if in_tree else os.getcwd()
    job = requested(request, id=job_id, name=request.name or name or os.path.basename(source), script=copy,
                    script_source=source, script_sha256=hashlib.sha256(data).hexdigest(),
                    workdir=submit_dir if request.workdir in ("", SPOOL_WORKDIR) else request.workdir,
                    submit_dir=submit_dir, submitted_at=time.time())
    if request.array is None:
        store.add_job(job)
        return job
    tasks = arrays.spool_tasks(job, request.array, cluster["spool_dir"])
    store.add_jobs(tasks)  # all or none: the array is recorded in one transaction
    return next(t for t in tasks if t.id == job_id)


def test_only(store: Store, request: Request, now: float | None = None) -> str:
    """``sbatch --test-only``: the request checked as a submit checks it, and when the master's
    backfill plan would start it, in sbatch's words; nothing is recorded or spooled."""
    now = time.time() if now is None else now
    text = request.text if request.text is not None else read_script(os.path.abspath(request.script))
    cluster, nodes = checked(store, request, text, os.path.basename(request.script_name or request.script))
    probe = requested(request, id=0, name=request.name or "test-only", script="", script_source="",
                      script_sha256="", submitted_at=now)
    pending = store.pending_jobs()
    deps = store.dependency_states({d for job in [*pending, probe] for d in dependencies.refs(job.dependency)})
    partitions = Partitions.from_record(cluster)
    decided = plan([*pending, probe], nodes, store.running_jobs(), deps, now, partitions, published_cpus(cluster))
    where = f"in partition {partitions.effective(request.partition)}"
    processors = request.nodes * request.tasks_per_node * request.cpus_per_task
    placed = dict(decided.starts).get(0)
    start = now if placed is not None else decided.promised.get(0)
    if start is None:
        return (f"sbatch: Job would wait with no start it can be promised (a dependency, a hold, --begin, or "
                f"jobs without a time limit ahead of it), using {processors} processors {where}")
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start))
    on = f" on nodes {compress_hostlist(list(placed))}" if placed else ""
    return f"sbatch: Job to start at {at} using {processors} processors{on} {where}"
