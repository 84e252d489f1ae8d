"""The master's loop: enforce time limits, notice lost nodes, start what the plan says, and
forget old ended jobs (minihpc.master.retention).

Every decision is made by the pure functions of minihpc.core (scheduler, outcome, restart_policy); this module only reads the
state, applies the decisions through the store, and waits for the next event.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection

from prometheus_client import Histogram

from minihpc.core import dependency, elastic, replan, scheduler
from minihpc.core.config import Settings
from minihpc.core.models import JobState, NodeStatus
from minihpc.core.outage import answered_late, in_outage_grace, lapsing_silence, outage_grace
from minihpc.core.outcome import held_failure
from minihpc.core.partitions import Partitions
from minihpc.core.requirements import published_cpus
from minihpc.core.restart_policy import RestartPolicy, next_lapse
from minihpc.master import elastic as elastic_jobs
from minihpc.master import retention
from minihpc.master.crashes import CrashInbox
from minihpc.master.dispatch import dispatcher
from minihpc.master.garbage import FullCollections
from minihpc.master.health import NodeHealth
from minihpc.master.stragglers import StragglerWatch
from minihpc.master.stuck import StuckWatch
from minihpc.metrics import discovery
from minihpc.restart.spec import CrashWatcher, Restarter
from minihpc.state.connect import BLOCK_MAX, CONNECT_TIMEOUT, REDIS_ERRORS, SOCKET_TIMEOUT, connect
from minihpc.state.nodes import NodeCache
from minihpc.state.pending import PendingCache, RunningCache
from minihpc.state.store import Store

log = logging.getLogger(__name__)

RECONNECT = CONNECT_TIMEOUT + SOCKET_TIMEOUT
"""Extra grace after an outage: a node's heartbeat call in flight when Redis came back may sit
in a connection attempt and then a read before it fails and the next one gets through. Seen
on Compose after a 40 s outage: a worker's beat stalled over 4 s, it was judged DOWN 3.1 s
after Redis answered (grace 3 s), restarted, and its job requeued."""

MASTER_BEAT_TTL = 4 * BLOCK_MAX
"""Seconds the master's heartbeat key outlives a pass; a pass comes at least every BLOCK_MAX."""
PLANNING_SHARE = 0.5
"""At most this share of a core goes to planning: after a pass that planned, the master rests as
long as the pass took (but for starting its jobs) before the next one, so a flood of wake-ups
(a submit loop, short jobs ending) is taken in batches, not one pass each, and the API and
Redis beside it keep the rest (a pass over 10,000 jobs on 1,000 nodes takes about 0.05 s: it
delays what follows by as much)."""
START_BATCH = 50
"""Jobs a pass starts in one transaction (state.lifecycle.start_many): one sync of Redis's
append-only file for them all, in transactions of bounded size."""
PASS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""The scheduling pass histogram's bounds (seconds): the goal is 0.1 s at 10,000 pending jobs."""


class Master:
    """``sd_file``: where to keep Prometheus's file-SD targets (None: nowhere)."""

    def __init__(self, settings: Settings, sd_file: str | None = None, restarter: Restarter | None = None):
        self.settings = settings
        self.store = Store(connect(settings.redis_url))
        self.stop = threading.Event()
        self.sd_file = sd_file
        self.live_heartbeats: list[float | None] = []
        self.cluster_metrics: str | None = None
        self.redis_lost_at: float | None = None  # when Redis stopped answering (None: it answers)
        self.redis_back_at: float | None = None  # when it last answered again after an outage
        # A master that has just started has seen no heartbeat yet and may be starting after an
        # outage (its container killed with Redis, whose alive keys lapsed meanwhile): it gives
        # the nodes a node timeout, a heartbeat and RECONNECT to beat again before judging any,
        # as after an outage it saw (a node's beat may still sit in a connection attempt it
        # began while Redis was away; with a node timeout and a heartbeat only, a clean-clone
        # e2e run saw a job requeued after `docker kill` of control and Redis).
        self.started_grace_until = time.time() + outage_grace(settings.node_timeout, settings.heartbeat_interval,
                                                              RECONNECT)
        self.stale: dict[str, tuple[int, float]] = {}  # see scheduler.stale_allocations
        self.pending = PendingCache()  # pending records, kept by the changes stream (state.pending)
        self.running = RunningCache()  # and running ones
        self.node_cache = NodeCache()  # the nodes' records, read again when one changed (state.nodes)
        self.planned = replan.LastPlan()  # what the last plan was made from, when (core.replan)
        self.rest_until = 0.0  # monotonic: no pass before it (PLANNING_SHARE)
        self.starting = 0.0  # seconds the last pass that planned spent starting its jobs
        policy = RestartPolicy(
            backoff_max=settings.restart_backoff_max,
            budget=settings.restart_budget,
            window=settings.restart_window,
        )
        self.health = NodeHealth(self.store, restarter, policy, settings.node_timeout)
        self.restarter = restarter
        self.crashes = CrashInbox(self.store)
        self.stragglers = StragglerWatch(self.store)
        # An agent takes its next launch once it has torn its last job down (SIGTERM, kill_wait,
        # SIGKILL, the sweep): that much more before a launch waiting is a stuck node.
        self.stuck = StuckWatch(self.store, self.health, settings.launch_timeout + 2 * settings.kill_wait)
        self.garbage = FullCollections()  # full collections between passes, not in them (master.garbage)
        # How long each pass takes, for the master's exporter (its own process: no Redis call).
        self.pass_seconds = Histogram("minihpc_scheduling_pass_seconds", "Time of each master pass that planned "
                                      "(one whose inputs had not changed plans nothing: core.replan).",
                                      buckets=PASS_BUCKETS, registry=None)

    def publish_targets(self, nodes: list[NodeStatus]) -> None:
        if self.sd_file and discovery.write_atomically(self.sd_file, discovery.targets(nodes, self.cluster_metrics)):
            log.info("master: Prometheus targets now %s", ", ".join(n.name for n in nodes if n.metrics))

    def step(self, now: float) -> scheduler.Plan | None:
        """One pass: end running jobs that must end (time limit, lost node, no progress, a held
        failure), requeue node failures, free stale allocations, note stragglers (every few
        seconds: minihpc.master.stragglers), then schedule. Within the
        grace after a Redis outage no node is judged by its heartbeats (see core.outage)."""
        asked = time.monotonic()
        # Events: judged even within a grace, unlike silences.
        crashed = self.crashes.apply() if self.settings.crash_events else {}
        self.health.causes.update(crashed)
        nodes = self.store.node_statuses(self.node_cache)
        self.redis_answered(asked, 0.0, time.monotonic())
        quiet = now < self.started_grace_until or in_outage_grace(
            self.redis_back_at, now, self.settings.node_timeout, self.settings.heartbeat_interval, RECONNECT)
        self.live_heartbeats = [n.last_heartbeat for n in nodes if n.alive]
        self.publish_targets(nodes)
        self.health.saw(nodes)
        self.health.step(nodes if not quiet else [n for n in nodes if n.name in crashed], now)
        by_name = {n.name: n for n in nodes}
        self.end_jobs(by_name, now, quiet, crashed)
        self.requeue_node_failures()
        self.free_stale_allocations(nodes, now, quiet)
        if not quiet:
            running = lambda: self.running.read(self.store)  # noqa: E731 - what changed since end_jobs read it
            self.stragglers.step(now, running)
            self.stuck.step(nodes, now, running)
        return self.schedule(nodes, by_name, now)

    def end_jobs(self, by_name: dict[str, NodeStatus], now: float, quiet: bool,
                 crashed: Collection[str] = frozenset()) -> None:
        """End the running jobs that must end. The checks share one snapshot: every transition
        is guarded by the job's current state, so a job two checks pick is ended once. While
        ``quiet`` (an outage's grace) no job is ended for silence, nor for a lost node unless
        it was ``crashed`` (seen to end: an event, not a silence)."""
        store = self.store
        running = self.running.read(store)
        for job_id in scheduler.overdue(running, now):
            if store.transition(job_id, JobState.TIMEOUT, "TimeLimit", only_from=[JobState.RUNNING]):
                log.info("job %s: TIMEOUT (time limit reached)", job_id)
        resized = elastic_jobs.shrink(store, running, by_name, quiet, crashed)  # instead of a node failure
        lost = {j: n for j, n in scheduler.lost(running, by_name).items()
                if (not quiet or n in crashed) and j not in resized}
        for job_id, node in lost.items():
            if store.transition(
                job_id, JobState.NODE_FAIL, f"node {node} failed", only_from=[JobState.RUNNING], failed_node=node
            ):
                log.warning("job %s: NODE_FAIL (node %s lost)", job_id, node)
        progress = {} if quiet else store.progress(j.id for j in running)
        for job_id, silent in scheduler.stalled(running, progress, now, self.settings.progress_timeout).items():
            if store.transition(job_id, JobState.NODE_FAIL, f"no progress for {silent:.0f}s", only_from=[JobState.RUNNING],
                                incident={"kind": "stalled", "job": job_id, "silent_for": silent}):
                log.warning("job %s: no progress for %.0fs; tearing it down to requeue it", job_id, silent)
        grace = self.settings.node_timeout + 2 * self.settings.heartbeat_interval
        for job in [] if quiet else running:  # a held failure waits on lost(), which is off
            if job.failing:
                outcome = held_failure(job, store.job_results(job.id, job.attempts), now, grace)
                if outcome is not None and store.end_held_failure(job, outcome):
                    log.info("job %s: FAILED (exit %s on %s, every node up)", job.id, outcome.exit_code, outcome.failed_node)

    def schedule(self, nodes: list[NodeStatus], by_name: dict[str, NodeStatus], now: float) -> scheduler.Plan | None:
        """Start what the plan says, cancel what can never run, and say why the rest waits;
        None when nothing a plan reads has changed (core.replan), so nothing was planned."""
        store = self.store
        # Read before the jobs: a write after it makes the next pass plan again.
        revision = store.jobs_revision()
        cluster = store.cluster_info()  # the published partitions and CPU override, read each pass
        signature = replan.signature(revision, nodes, cluster)
        if not self.planned.due(signature, now):
            return None  # the plan would be the last one
        running = self.running.read(store)
        pending = self.pending.read(store)
        # Singleton terms read the same pending and running lists inside plan(): no more calls.
        known = dict.fromkeys(self.pending.records, JobState.PENDING)  # their ids: no job read again
        known.update(dict.fromkeys(self.running.records, JobState.RUNNING))
        deps = store.dependency_states({d for job in pending if job.dependency for d in dependency.refs(job.dependency)},
                                       known)
        grow_every = self.settings.elastic_grow_every
        plan = scheduler.plan(pending, nodes, running, deps, now, Partitions.from_record(cluster),
                              published_cpus(cluster), grow_every)
        for job_id, reason in plan.cancels.items():
            if store.transition(job_id, JobState.CANCELLED, reason, only_from=[JobState.PENDING]):
                log.info("job %s: CANCELLED (%s)", job_id, reason)
        began = time.perf_counter()
        if plan.starts:
            dispatch = dispatcher(self.store, by_name, cluster)
            for first in range(0, len(plan.starts), START_BATCH):
                for job in store.start_many(plan.starts[first:first + START_BATCH], dispatch):
                    log.info("job %s: RUNNING on %s (attempt %s)", job.id, ",".join(job.nodes), job.attempts)
        elastic_jobs.grow(store, plan.grows, running, by_name, cluster)
        elastic_jobs.reclaim(store, plan, pending, running, nodes, by_name, cluster)
        self.starting = time.perf_counter() - began
        reasons = plan.reasons
        store.set_reasons({job.id: why for job in pending if (why := reasons.get(job.id)) is not None and why != job.reason})
        due = [t for t in (replan.next_begin(pending, now), elastic.next_growth(running, now, grow_every)) if t]
        self.planned.made(signature, now, min(due, default=None))
        return plan

    def free_stale_allocations(self, nodes: list[NodeStatus], now: float, quiet: bool) -> None:
        """Free a node still allocated to a job that stopped running a while ago (its agent
        died before reporting, or lost its report); not during an outage's grace, when reports
        are late through no one's fault."""
        settings = self.settings
        states = self.store.job_states({n.job for n in nodes if n.job is not None})
        grace = 2 * settings.node_timeout + settings.kill_wait  # an in-flight report lands first
        self.stale, stale = scheduler.stale_allocations(nodes, states, self.stale, now, grace)
        for node, job_id in [] if quiet else stale:
            held_for, state = now - self.stale[node][1], states.get(job_id)
            incident = {"kind": "freed_stale_allocation", "held_for": held_for, "job_state": state.value if state else None}
            if self.store.release_if_held(node, job_id, incident):  # the incident in its transaction
                self.stale.pop(node)
                log.warning("node %s: freed (job %s is %s, allocation held %.0fs after)", node, job_id,
                            state.value if state else "gone", held_for)

    def requeue_node_failures(self) -> None:
        """Every job a node failure ended goes back to the queue (front of its priority) while
        it has requeues left, unless submitted with --no-requeue; its ranks on the surviving nodes are torn down by their agents,
        which see the attempt is no longer running."""
        limit = self.settings.max_requeues
        for job in self.store.node_failed_jobs():
            if job.state is not JobState.NODE_FAIL:
                self.store.settle_node_failure(job.id)
            elif scheduler.should_requeue(job, limit):
                reason = f"Requeued ({job.reason}; requeue {job.requeues + 1} of {limit})"
                incident = {"kind": "requeued", "node": job.failed_node, "job": job.id, "attempt": job.attempts,
                            "reason": job.reason}
                if self.store.requeue(job.id, job.attempts, reason, incident):
                    log.warning("job %s: requeued after attempt %s (%s)", job.id, job.attempts, job.reason)
            else:
                self.store.settle_node_failure(job.id)
                why = "--no-requeue" if not job.requeue else f"{job.requeues} requeues used"
                log.warning("job %s: NODE_FAIL for good (%s)", job.id, why)

    def pause(self) -> float:
        """How long to sleep until the next pass: the scheduler interval, or less when a node's
        heartbeat lapses sooner (a little after, so its alive key is gone by then)."""
        lapse = next_lapse(self.live_heartbeats, time.time(), self.settings.node_timeout)
        interval = self.settings.scheduler_interval
        return interval if lapse is None else min(interval, lapse + 0.02)

    def redis_silent(self, asked: float, exc: Exception) -> None:
        """Redis did not answer a call made at ``asked`` (monotonic): an outage, until it
        answers again."""
        self.pending.clear()  # Redis may come back from its files: read every record afresh
        self.running.clear()
        self.planned.signature = None  # and plan anew from them
        if self.redis_lost_at is None:
            self.redis_lost_at = asked
            log.warning("master: Redis unreachable (%s); retrying", exc)

    def redis_answered(self, asked: float, expected: float, now: float) -> None:
        """Redis answered a call made at ``asked`` (expected to take ``expected`` s; monotonic
        times): after a silence long enough to lapse a heartbeat -- errors, or an answer that
        late -- the outage's grace starts now. A shorter blip costs no heartbeat: no grace."""
        settings = self.settings
        late = answered_late(now - asked, expected, settings.node_timeout, settings.heartbeat_interval)
        if self.redis_lost_at is None and not late:
            return
        since = self.redis_lost_at if self.redis_lost_at is not None else asked
        self.redis_lost_at = None
        if now - since <= lapsing_silence(settings.node_timeout, settings.heartbeat_interval):
            log.warning("master: Redis answers again after %.1fs, too short to lapse a heartbeat", now - since)
            return
        wall = time.time()
        self.redis_back_at = wall
        self.health.outage_ended(wall)
        self.stale = {}  # allocations are timed afresh: reports were late through no one's fault
        grace = outage_grace(settings.node_timeout, settings.heartbeat_interval, RECONNECT)
        log.warning("master: Redis answers again after %.1fs of silence; no node is judged by its heartbeats "
                    "for %.1fs", now - since, grace)
        self.store.incident("redis_outage", silent_for=now - since)

    def run(self) -> None:
        log.info("master: scheduling (redis %s)", self.settings.redis_url.split("@")[-1])
        if isinstance(self.restarter, CrashWatcher) and self.settings.crash_events:
            self.restarter.watch(self.crashes.report, self.stop)  # crashes as events; heartbeats for silence
        self.reconcile_pending = True
        self.next_prune = self.next_left = 0.0  # the first pass does what is due at once
        self.garbage.take_over(time.monotonic())
        while not self.stop.is_set():
            try:
                asked = time.monotonic()
                if self.redis_lost_at is not None:
                    self.store.ping()
                    self.redis_answered(asked, 0.0, time.monotonic())
                if self.reconcile_pending:
                    for job_id, what in self.store.reconcile().items():
                        log.warning("master: reconciled job %s (%s)", job_id, what)
                    self.reconcile_pending = False
                started = time.perf_counter()
                if self.step(time.time()) is not None:  # a pass that planned: the skipped ones cost nothing
                    took = time.perf_counter() - started
                    self.pass_seconds.observe(took)
                    planning = max(0.0, took - self.starting)  # starting jobs is no reason to wait
                    self.rest_until = time.monotonic() + planning * (1 / PLANNING_SHARE - 1)
                self.store.master_beat(MASTER_BEAT_TTL)
                self.housekeeping(time.time())
            except REDIS_ERRORS as exc:
                self.redis_silent(asked, exc)
                time.sleep(self.settings.scheduler_interval)
                continue
            except Exception:  # noqa: BLE001 - a bad pass must not stop the cluster
                log.exception("master: scheduling pass failed")
                time.sleep(self.settings.scheduler_interval)
            self.wait()

    def housekeeping(self, now: float) -> None:
        """Retention's two passes, each when due: the folders of forgotten jobs their forgetter
        left (every LEFT_INTERVAL, not at each turn of the loop, which turns with every wake-up),
        then old ended jobs. A pass that fails waits as long. And a full garbage collection when
        one is due (master.garbage)."""
        self.garbage.step(time.monotonic())
        if now >= self.next_left:
            self.next_left = now + retention.LEFT_INTERVAL
            retention.remove_left_files(self.store)
        if now >= self.next_prune:
            self.next_prune = now + retention.PRUNE_INTERVAL
            self.next_prune = retention.forget_ended(self.store, self.settings, now,
                                                     lambda: self.pending.read(self.store))

    def wait(self) -> None:
        """Until the next event or pass, noticing an outage (or a late answer) meanwhile."""
        pause = min(self.pause(), BLOCK_MAX)
        rest = min(pause, self.rest_until - time.monotonic())
        if rest > 0:  # wake-ups meanwhile wait in their list: the next pass takes them all at once
            self.stop.wait(rest)
            pause -= rest
        asked = time.monotonic()
        try:
            self.store.wait_event(pause)
            self.redis_answered(asked, pause, time.monotonic())
        except REDIS_ERRORS as exc:
            self.redis_silent(asked, exc)
            time.sleep(self.settings.scheduler_interval)
