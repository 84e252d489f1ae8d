"""Every Redis key minihpc uses, in one place.

Templates are filled with ``str.format``. All keys share the ``minihpc:``
prefix so that ``minihpc down`` or a test can find them, except the rq queue
names, which rq prefixes itself (``rq:queue:<name>``).
"""

CLUSTER = "minihpc:cluster"
"""Hash: cluster-wide settings the CLI needs (spool_dir, log_dir, checkpoint_dir, created_at) and
the limits every face and the scheduler share (max_tasks_per_node, partitions, default_partition)."""

JOB_SEQ = "minihpc:jobs:seq"
"""Counter: the last job id handed out (INCR gives the next, sequential from 1; INCRBY N
reserves N in a row, a job array's)."""

ARRAY_TASKS = "minihpc:array:{0}:tasks"
"""Sorted set: the job ids of job array {0}'s tasks ({0} is the array's id, its last task's),
each scored by its array index; a task leaves it when its record is forgotten, and the key goes
with the last one."""

JOB = "minihpc:job:{0}"
"""Hash: one job record (see models.Job); {0} is the job id."""

JOB_REVISION = "rev"
"""A field of every job record, counting the writes to it (state.jobs.write_job): the master
re-reads a pending job's record only when it has changed since the pass before."""

JOB_RESULTS = "minihpc:job:{0}:results:{1}"
"""Hash: node name -> JSON result of that node's ranks, for job {0}, attempt {1}."""

JOB_RENDEZVOUS = "minihpc:job:{0}:rdzv:{1}"
"""List: the master port chosen by node rank 0 of job {0}, attempt {1}, one copy per peer."""

JOB_PROGRESS = "minihpc:job:{0}:progress"
"""Hash: the newest progress report of job {0} (attempt, step, at, node, and job metrics)."""

JOB_STEPS = "minihpc:job:{0}:steps"
"""Hash: "<attempt>:first" and "<attempt>:last" -> JSON {step, at} of job {0}'s progress reports
in each attempt: when an attempt trained its first step, and how far it got (drills, reports)."""
JOB_STARTS = "minihpc:job:{0}:starts"
"""Hash: "<attempt>" -> when job {0}'s attempt began (its nodes were reserved and its launch
queued). The job record holds only the current attempt's start; drills time the resume of a job
that reports no progress by the next attempt's."""
JOB_SERIES = "minihpc:job:{0}:series"
"""List: JSON progress reports of job {0} as its agents forwarded them (every node, sampled at
the agents' poll rate; capped), for `minihpc report`."""
JOBS_REVISION = "minihpc:jobs:rev"
"""Counter: bumped with every write to any job record (state.jobs.write_job), so the master
knows in one read whether any job changed since its last scheduling pass."""

JOBS_CHANGES = "minihpc:jobs:changes"
"""Stream: an entry {"id": <job id>} for every write to a job record and every record
forgotten (state.jobs.write_job), newest last, trimmed to about state.pending.CHANGES_KEPT
entries: a long-lived reader (state.pending.PendingCache) reads only the records that changed
since it last read, whatever the queue's depth."""

JOBS_PENDING = "minihpc:jobs:pending"
"""Set: ids of PENDING jobs. The scheduler orders them; Redis only holds membership."""

JOBS_ACTIVE = "minihpc:jobs:active"
"""Set: ids of RUNNING jobs."""

JOBS_ENDED = "minihpc:jobs:ended"
"""Sorted set: ids of ended jobs, scored by end time (history reads it newest first)."""

JOBS_NODE_FAILED = "minihpc:jobs:node_failed"
"""Set: ids of jobs that just became NODE_FAIL; the master decides whether each is requeued."""

NODES = "minihpc:nodes"
"""Set: names of every node that ever registered."""

NODES_REVISION = "minihpc:nodes:rev"
"""Counter: bumped with every write to a node's record but its heartbeat (a registration, a
measurement, a node forgotten), so a long-lived reader (state.nodes.NodeCache) reads the records
again only when one changed."""

NODE = "minihpc:node:{0}"
"""Hash: node {0}'s static facts and last heartbeat (addr, cpus, memory_bytes, gpus, cpu_model,
cpu_limit, gpu_model, ...) and what was measured of it (gflops, allreduce_gbps, each with when and
by which job: core.measurements)."""

NODE_ALIVE = "minihpc:node:{0}:alive"
"""String with a TTL: present while node {0}'s agent heartbeats; its absence means DOWN."""

NODE_ALLOC = "minihpc:node:{0}:alloc"
"""String: the id of the job that holds node {0}; absent when the node is idle."""

NODE_DRAIN = "minihpc:node:{0}:drain"
"""String: why node {0} is drained (takes no new jobs); absent when it is not."""

NODE_RESTARTS = "minihpc:node:{0}:restarts"
"""List: times (newest first) the health monitor restarted node {0}; capped."""

INCIDENTS = "minihpc:incidents"
"""List: JSON incidents, newest first (node down / restarted / back / drained, job requeued); capped."""

STATS_COUNTERS = "minihpc:stats:counters"
"""Hash: "<name>|<label value>" -> count, monotonic (jobs ended by state, requeues, restarts)."""
STATS_HISTOGRAM = "minihpc:stats:hist:{0}"
"""Hash: histogram {0}: "<bucket index>" -> observations in that bucket, plus "sum" and "count"."""
CRASHES = "minihpc:crashes"
"""List: JSON crash reports {"node", "at", "cause"} from outside the master (a systemd unit's
ExecStopPost on hosts Ansible provisioned), oldest first; the master takes them each pass."""
EVENTS = "minihpc:events"
"""List: wake-ups for the master (submit, node freed, cancel). Contents are informative only."""

LIVE = "minihpc:live"
"""Pub/sub channel: JSON {"type": "job"|"incident", ...} for every job state change and
incident, as it happens (the REST API's event streams listen; nothing is kept)."""

MASTER_ALIVE = "minihpc:master:alive"
"""String with a TTL: present while the master's loop runs (its time of the last pass)."""

TOKENS = "minihpc:tokens"
"""Hash: sha256 of an API token -> JSON {user, admin, created_at}. Tokens are never stored."""

USER_UIDS = "minihpc:users:uids"
"""Hash: user -> the uid the cluster gave it (core.tenants), for jobs run as their owners."""

USER_UID_SEQ = "minihpc:users:uid_seq"
"""How many users have been given a uid (the next one is core.tenants.allocated(seq + 1))."""

USER_JOBS = "minihpc:user:{0}:jobs"
"""Set: ids of user {0}'s jobs, added at submit; a job that ended or was forgotten is taken out
when the set is next counted against the user's cap (state.users.live_jobs), so it never grows
far past the cap."""

FILES_LEFT = "minihpc:files:left"
"""Set: ids of forgotten jobs whose spool or log folder the one who forgot them could not remove
(the API, a uid of its own on hosts Ansible provisioned, cannot remove a folder a node handed to
the job's group): the master removes them within master.retention.LEFT_INTERVAL (5 s)."""

ENVIRONMENT = "minihpc:env:{0}"
"""Hash: one submitted environment (``--export``), {0} its digest (core.environment.stored):
"data" -> its JSON, "refs" -> how many job records name it (``environment_id``); the last
record forgotten takes it (state.environments)."""

NODE_QUEUE = "minihpc-node-{0}"
"""rq queue name of node {0}: its agent is the only worker listening there."""


def environment(digest: str) -> str:
    return ENVIRONMENT.format(digest)


def user_jobs(user: str) -> str:
    return USER_JOBS.format(user)


def job(job_id: int) -> str:
    return JOB.format(job_id)


def job_results(job_id: int, attempt: int) -> str:
    return JOB_RESULTS.format(job_id, attempt)


def job_rendezvous(job_id: int, attempt: int) -> str:
    return JOB_RENDEZVOUS.format(job_id, attempt)


def job_progress(job_id: int) -> str:
    return JOB_PROGRESS.format(job_id)


def job_steps(job_id: int) -> str:
    return JOB_STEPS.format(job_id)


def job_starts(job_id: int) -> str:
    return JOB_STARTS.format(job_id)


def stats_histogram(name: str) -> str:
    return STATS_HISTOGRAM.format(name)


def job_series(job_id: int) -> str:
    return JOB_SERIES.format(job_id)


def node(name: str) -> str:
    return NODE.format(name)


def node_alive(name: str) -> str:
    return NODE_ALIVE.format(name)


def node_alloc(name: str) -> str:
    return NODE_ALLOC.format(name)


def node_drain(name: str) -> str:
    return NODE_DRAIN.format(name)


def node_restarts(name: str) -> str:
    return NODE_RESTARTS.format(name)


def node_queue(name: str) -> str:
    return NODE_QUEUE.format(name)


JOB_INBOX = "minihpc:job:{0}:inbox:{1}:{2}"
"""Stream: JSON messages to node {2}'s share of batch job {0}, attempt {1}: start a step's tasks,
kill a step, or the end of the batch script (see state.steps)."""

JOB_STEP_ENDS = "minihpc:job:{0}:stepends:{1}:{2}"
"""Stream: JSON ends of the tasks of step {2} of batch job {0}, attempt {1} (core.steps.TaskEnd),
as the nodes report them; srun waits on it."""


JOB_STEP_INPUT = "minihpc:job:{0}:stepin:{1}:{2}"
"""Stream: srun's stdin for the tasks of step {2} of batch job {0}, attempt {1}, in chunks, then
its end (state.steps)."""

JOB_STEP_OUTPUT = "minihpc:job:{0}:stepout:{1}:{2}"
"""Stream: what the tasks of step {2} of batch job {0}, attempt {1} write, in chunks named by
task and stream, as the nodes read it; srun's server relays it to srun."""


JOB_INPUT = "minihpc:job:{0}:input"
"""Stream: what ``minihpc run`` reads on its stdin, in chunks, then its end: the batch script's
stdin, so srun gives it to the tasks (state.steps)."""


def job_inbox(job_id: int, attempt: int, node: str) -> str:
    return JOB_INBOX.format(job_id, attempt, node)


def job_step_ends(job_id: int, attempt: int, step: int) -> str:
    return JOB_STEP_ENDS.format(job_id, attempt, step)


def job_input(job_id: int) -> str:
    return JOB_INPUT.format(job_id)


def job_step_input(job_id: int, attempt: int, step: int) -> str:
    return JOB_STEP_INPUT.format(job_id, attempt, step)


def job_step_output(job_id: int, attempt: int, step: int) -> str:
    return JOB_STEP_OUTPUT.format(job_id, attempt, step)


def array_tasks(array_job_id: int) -> str:
    return ARRAY_TASKS.format(array_job_id)
