"""The node agent: registers its node, heartbeats, and runs launch tasks from its own rq queue.

It is an rq SimpleWorker listening on exactly one queue (``minihpc-node-<name>``), so rq's
multi-queue dequeue is never used; the master alone decides what goes on that queue. rq runs
whatever function a queued task names, so the worker runs only the launch task: anything else
that reaches the queue (``os.system``, a callback, a webhook) fails unrun and is an incident.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import warnings

import redis
from rq import Queue, SimpleWorker

from minihpc.core import gpus, measurements, tenants
from minihpc.core.config import Settings
from minihpc.core.launch_spec import LAUNCH_TASK, LaunchSpec
from minihpc.core.models import NodeStatus
from minihpc.machine import hardware
from minihpc.machine.processes import become_subreaper
from minihpc.machine.resources import gpu_count
from minihpc.metrics.http import serve
from minihpc.metrics.node import NodeCollector
from minihpc.node import identity, speed
from minihpc.node.firewall import JobFirewall
from minihpc.node.share import run_share
from minihpc.node.warm import WarmLauncher
from minihpc.state.connect import CONNECT_TIMEOUT, SOCKET_TIMEOUT, connect
from minihpc.state.queues import SERIALIZER, node_queue
from minihpc.state.store import Store

log = logging.getLogger(__name__)

_current = threading.local()
"""The agent whose worker runs in this thread (one per process, or many simulated ones)."""


def launch_task(**payload) -> dict:
    """The rq task the master queues on a node: run that node's share of a job."""
    agent = getattr(_current, "agent", None)
    if agent is None:
        raise RuntimeError("launch_task runs only inside a minihpc node agent")
    spec = LaunchSpec.from_payload(payload)
    if agent.firewall is not None:
        agent.firewall.ensure()  # Redis may have come back at another address
    agent.gpus_held = (spec.job_id, list(spec.gpus)) if spec.gpus else None
    try:
        result = agent.share(spec)
    finally:
        agent.gpus_held = None
    return result.to_dict()


def guards_redis(settings: Settings) -> bool:
    """Whether this agent keeps jobs off Redis's port (core.firewall): it owns its host, runs
    jobs as other users, and may set a firewall rule (root)."""
    return settings.job_firewall and settings.node_owns_host and bool(settings.job_user) and os.geteuid() == 0


def task_refusal(func_name: str | None, callbacks: list[str | None], webhooks: list) -> str | None:
    """Why a task from the node's queue must not run; None for a plain launch task."""
    if func_name != LAUNCH_TASK:
        return f"refused task {str(func_name)[:100]!r}: a node runs only {LAUNCH_TASK}"
    named = [c for c in callbacks if c]
    if named:
        return f"refused a launch task with callbacks {', '.join(named)[:200]}"
    if webhooks:
        return "refused a launch task with webhooks"
    return None


BEAT_CALL_MAX = CONNECT_TIMEOUT + SOCKET_TIMEOUT
"""The longest one heartbeat's Redis call may take (a connect, then an answer)."""


class _Worker(SimpleWorker):
    """rq's in-process worker; a stop signal also tears down the job it is running."""

    agent: NodeAgent

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._delivered_again: set[str] = set()

    def execute_job(self, job, queue):
        why = task_refusal(job.func_name, [job._success_callback_name, job._failure_callback_name,
                                           job._stopped_callback_name], job.webhooks)
        if why is None:
            return super().execute_job(job, queue)
        log.error("node %s: %s (rq job %s)", self.agent.name, why, job.id)
        job.retries_left = None  # a refused task is not retried, whatever it asked for
        self.connection.lrem(queue.intermediate_queue_key, 1, job.id)  # dequeued, and done with
        self.prepare_execution(job)
        self.handle_job_failure(job, queue, exc_string=why)
        try:
            self.agent.store.incident("task_refused", self.agent.name, reason=why)
        except redis.RedisError:
            log.warning("node %s: could not record the refused task", self.agent.name, exc_info=True)

    def handle_warm_shutdown_request(self):
        self.agent.going_down()
        super().handle_warm_shutdown_request()

    # A dequeue moves the task to the queue's intermediate list, and starting it takes it off
    # again; Redis lost between the two (a crash, a restart) strands the task there. rq only
    # fails such a task, after its 10-minute maintenance interval: the node would hold the
    # job's allocation, beating, and never run it. This worker is its queue's only consumer
    # and runs one task at a time, so whenever it is about to dequeue, a task in its
    # intermediate list is one that was never started: it goes back to the queue's head.

    @property
    def should_run_maintenance_tasks(self) -> bool:  # asked before every dequeue, retries included
        return self._stranded() > 0 or super().should_run_maintenance_tasks

    def run_maintenance_tasks(self):
        self._deliver_stranded()
        if super().should_run_maintenance_tasks:
            super().run_maintenance_tasks()

    def _stranded(self) -> int:
        return sum(self.connection.llen(q.intermediate_queue_key) for q in self.queues)

    def _deliver_stranded(self) -> None:
        """Each stranded task back to its queue's head, once: one stranded again is dropped
        (rq's own maintenance would fail it), so nothing can loop."""
        delivered = self._delivered_again
        for queue in self.queues:
            while (task := self.connection.lmove(queue.intermediate_queue_key, queue.key, "RIGHT", "LEFT")) is not None:
                name = task.decode(errors="replace")
                if name in delivered:
                    self.connection.lrem(queue.key, 1, task)
                    log.error("node %s: launch task %s stranded twice; dropped", self.agent.name, name)
                    continue
                delivered.add(name)
                log.warning("node %s: launch task %s was dequeued as Redis went away, never started; "
                            "delivering it again", self.agent.name, name)


class NodeAgent:
    simulated = False
    """A simulated node (node.simulated) says so when it registers."""

    def __init__(
        self, settings: Settings, name: str, addr: str | None = None, metrics_port: int | None = None
    ):
        self.settings = settings
        self.name = name
        self.addr = addr or socket.gethostname()
        self.metrics_port = metrics_port
        self.store = Store(connect(settings.redis_url))
        # The rq worker's own: it blocks for minutes in its dequeue and sets its own, longer
        # socket timeout; everything else of ours keeps the 5 s one, so an outage raises.
        self.rq_store = Store(connect(settings.redis_url, socket_timeout=None))
        self.shutting_down = threading.Event()
        self._stopped = threading.Event()
        # Held for each heartbeat's Redis call and while heartbeats are stopped: a beat in flight
        # when a stop comes lands before the alive key is dropped, never after it (which would
        # bring the stopping node back for a node timeout, and the master would give it a job).
        # Reentrant: SIGTERM's handler may run while run()'s own _leave holds it.
        self._beating = threading.RLock()
        self.warm = WarmLauncher() if settings.warm_launcher else None
        self.gpus_held: tuple[int, list[int]] | None = None  # (job, the GPUs its share runs on), for the exporter
        self.firewall = (JobFirewall(settings.redis_url, settings.service_user, self._firewall_unset)
                         if guards_redis(settings) else None)

    def _firewall_unset(self, problem: str) -> None:
        try:
            self.store.incident("job_firewall_unset", node=self.name, reason=problem)
        except redis.RedisError:
            pass

    def going_down(self) -> None:
        """A stop was asked for: stop heartbeating and drop the alive key at once, so the
        scheduler gives this node nothing new while its running job is torn down."""
        self.shutting_down.set()
        self._leave()

    def _leave(self) -> None:
        """Stop heartbeating (after a beat in flight has landed), then drop the alive key. A beat
        stuck on an unanswering Redis is waited for no longer than its call may take."""
        held = self._beating.acquire(timeout=BEAT_CALL_MAX)
        try:
            self._stopped.set()
        finally:
            if held:
                self._beating.release()
        self.store.leave(self.name)

    def _heartbeat_loop(self) -> None:
        store = Store(connect(self.settings.redis_url))
        while not self._stopped.wait(self.settings.heartbeat_interval):
            failed = None
            with self._beating:  # nothing else under it: a signal handler waits on it (no logging lock)
                if self._stopped.is_set():
                    return
                try:
                    store.heartbeat(self.name, self.settings.node_timeout)
                except redis.RedisError as exc:  # keep beating through whatever Redis answers (state.connect)
                    failed = exc
            if failed is not None:
                log.warning("node %s: heartbeat failed", self.name, exc_info=failed)

    def start_heartbeats(self) -> None:
        threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True).start()

    def start(self) -> None:
        """Register the node and forget anything a previous incarnation held: its ranks died
        with it, so its allocation and undelivered launch tasks are void."""
        who = identity.resolve(self.settings.job_user)  # a user it cannot become fails here, not per job
        if who is not None:
            log.info("node %s: jobs run as %s (uid %s)", self.name, who.user, who.uid)
        elif self.settings.job_user == tenants.OWNER:
            log.info("node %s: each job runs as its own user (MINIHPC_JOB_USER=%s)", self.name, tenants.OWNER)
        else:
            log.info("node %s: jobs run as the agent's own user, uid %s (MINIHPC_JOB_USER is empty)",
                     self.name, os.getuid())
        # Jobs of another user: whatever they detach is re-parented here, not to init, so
        # node.sweep finds and ends it (and reaps it) when the share ends.
        if self.settings.job_user and not become_subreaper():
            log.warning("node %s: not a child subreaper: a process a job detaches may outlive it", self.name)
        if self.firewall is not None:
            self.firewall.ensure()
        queue = self.queue()
        stale = self.store.release_node(self.name)
        if stale is not None:
            log.warning("node %s: released job %s held by a previous agent", self.name, stale)
        queue.empty()
        metrics = ""
        if self.metrics_port is not None:
            collector = NodeCollector(self.name, self._current_job, self._models_dir, self._record,
                                      held_gpus=lambda: self.gpus_held)
            metrics = f"{self.addr}:{serve(self.metrics_port, collector)}"
        made = self.hardware()
        self.store.register_node(self.name, self.addr, ttl=self.settings.node_timeout, metrics=metrics,
                                 simulated=self.simulated, **made)
        self.start_heartbeats()
        if self.warm is not None:
            self.warm.start()
        log.info("node %s: registered at %s (metrics %s)", self.name, self.addr, metrics or "off")
        machine = measurements.signature(made["cpu_model"], made["cpus"], made["cpu_limit"])
        if self.settings.speed_probe and measurements.needs_probe(self.store.node_record(self.name), machine):
            speed.probe_in_background(self.store, self.name, machine)

    def _models_dir(self) -> str | None:
        """Where checkpoints go (the shared volume that fills up first), once the master has said."""
        try:
            return self.store.cluster_info().get("checkpoint_dir")
        except redis.RedisError:  # a scrape must not fail on Redis
            return None

    def _record(self) -> NodeStatus | None:
        """The node as registered and measured, for the exporter (None while Redis is away)."""
        try:
            return self.store.node_status(self.name)
        except redis.RedisError:  # a scrape must not fail on Redis
            return None

    def _current_job(self) -> int | None:
        return self.store.node_job(self.name)

    def queue(self) -> Queue:
        return node_queue(self.rq_store, self.name)

    def share(self, spec: LaunchSpec):
        """Run this node's share of a job (node.share), to its end."""
        return run_share(spec, self.store, self.settings, self.shutting_down, self.warm)

    def hardware(self) -> dict:
        """What the node registers itself as: its CPUs, memory, GPUs and their models."""
        devices = gpus.node_devices(self.settings.node_gpu_devices, self.settings.node_gpus, gpu_count())
        return {"cpus": hardware.usable_cpus(), "memory_bytes": hardware.memory_bytes(), "gpu_devices": devices,
                "cpu_model": hardware.cpu_model(), "cpu_limit": hardware.cpu_limit(),
                "gpu_model": hardware.gpu_model(hardware.gpus(), len(devices))}

    def worker(self) -> SimpleWorker:
        worker = _Worker(
            [self.queue()],
            connection=self.rq_store.connection,
            serializer=SERIALIZER,
            # Unique per incarnation: a container's pid repeats, and a killed agent's rq
            # registration outlives it, which would make rq refuse the name.
            name=f"{self.name}.{os.getpid()}.{secrets.token_hex(3)}",
        )
        worker.agent = self
        return worker

    def run(self) -> None:
        _current.agent = self
        self.start()
        # The node's Redis user may not list other clients (minihpc.state.acl); rq then only
        # records its address as unknown, and says so with a warning in every agent's log.
        warnings.filterwarnings("ignore", message="CLIENT LIST command not supported")
        worker = self.worker()
        try:
            worker.work(with_scheduler=False, logging_level="WARNING")
        finally:
            try:
                self._leave()
            finally:
                if self.warm is not None:
                    self.warm.close()
            log.info("node %s: agent stopped", self.name)
