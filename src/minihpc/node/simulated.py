"""Simulated nodes (core.simulation): many node agents in one process, each registering,
heartbeating and taking launch tasks from its own rq queue exactly as a real agent does, whose
share of a job is a timer instead of torchrun. The master, the queues, the records and the
health checks cannot tell them apart from real nodes, except that each says it is simulated,
so the control plane's cost can be measured at hundreds of nodes on one machine.

``minihpc simulate COUNT`` runs them (``--prefix``, ``--cpus``, ``--seconds``); SIGTERM or
SIGINT makes every one leave as a stopped agent does.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import subprocess
import sys
import threading
import time

from rq.timeouts import TimerDeathPenalty

from minihpc.core import simulation
from minihpc.core.config import Settings
from minihpc.core.errors import UsageError
from minihpc.core.launch_spec import LaunchSpec
from minihpc.core.outcome import NodeResult
from minihpc.machine.ports import free_port
from minihpc.node import agent as agents
from minihpc.node import joblog
from minihpc.node.share import Stop, agree_port, current_or_unknown, settle
from minihpc.state.connect import REDIS_ERRORS, connect, retrying
from minihpc.state.store import Store

log = logging.getLogger(__name__)

SIM_MEMORY = 64 << 30
"""Memory each simulated node says it has."""


class SimulatedAgent(agents.NodeAgent):
    simulated = True

    def __init__(self, settings: Settings, name: str, cpus: int, seconds: float):
        super().__init__(settings.with_overrides(warm_launcher=False, speed_probe=False, job_firewall=False,
                                                 job_user=""), name, addr=name)
        self.cpus, self.seconds = cpus, seconds
        self.registered = False

    def start_heartbeats(self) -> None:
        self.registered = True  # from now on the host beats for it, with all of its nodes (beat_all)

    def beating(self) -> bool:
        return self.registered and not self._stopped.is_set()

    def hardware(self) -> dict:
        return {"cpus": self.cpus, "memory_bytes": SIM_MEMORY, "gpu_devices": [], "cpu_model": "simulated",
                "cpu_limit": None, "gpu_model": ""}

    def worker(self):
        worker = super().worker()
        # A thread may not set signal handlers: the host process handles SIGTERM and SIGINT,
        # and a task's timeout (if the master gives one) is a timer, not SIGALRM.
        worker._install_signal_handlers = lambda: None
        worker.death_penalty_class = TimerDeathPenalty
        return worker

    def share(self, spec: LaunchSpec) -> NodeResult:
        return settle(self.store, spec, lambda: self._timer(spec))

    def _timer(self, spec: LaunchSpec) -> tuple[NodeResult, Stop | None]:
        """The share: the rendezvous a real one makes, then a wait of the job's duration,
        ended early as a real share's ranks are (the job cancelled, the node stopping)."""
        store = self.store
        if not retrying(store.attempt_is_current, spec.job_id, spec.attempt, what=f"job {spec.job_id} launch"):
            return NodeResult(None), None
        job = retrying(store.get_job, spec.job_id, what=f"job {spec.job_id} launch")
        if not simulation.wanted(job.constraint):  # the scheduler never does this; a real job is never faked
            raise RuntimeError(f"node {spec.node} is simulated and runs only jobs with "
                               f"--constraint {simulation.FEATURE}")
        port = free_port() if spec.launch == "batch" else retrying(agree_port, store, spec, self.settings.poll_interval,
                                                                   what=f"job {spec.job_id} rendezvous")
        if port is None:
            return NodeResult(None), None
        self._log(spec, f"=== {joblog.stamp()} job {spec.job_id} attempt {spec.attempt} on {spec.node} (node rank "
                        f"{spec.node_rank} of {spec.nnodes}, simulated) ===\n")
        deadline = time.monotonic() + simulation.duration(spec.args, self.seconds)
        stopped = None
        while (left := deadline - time.monotonic()) > 0:
            if self.shutting_down.wait(min(left, self.settings.poll_interval)):
                stopped = Stop.NODE_SHUTTING_DOWN
                break
            if not current_or_unknown(store, spec):
                stopped = Stop.JOB_ENDED
                break
        code = simulation.exit_code(spec.args) if stopped is None else None
        result = NodeResult(code, at=time.time() if code else None) if stopped is None else NodeResult(None)
        self._log(spec, f"=== {joblog.stamp()} job {spec.job_id} on {spec.node}: "
                        f"{'exit code ' + str(code) if stopped is None else stopped.value} ===\n")
        return result, stopped

    @staticmethod
    def _log(spec: LaunchSpec, line: str) -> None:
        if spec.log_path:
            os.makedirs(os.path.dirname(spec.log_path), exist_ok=True)
            with open(spec.log_path, "a") as out:
                out.write(line)


def beat_all(nodes: list[SimulatedAgent], settings: Settings, stop: threading.Event) -> None:
    """Every node's heartbeat, as each real agent's thread writes it, in one round trip a beat
    (a thread of its own per node cost a simulated cluster more CPU than its jobs), until the
    nodes have registered and :func:`beats_process` takes over, or ``stop``."""
    store = Store(connect(settings.redis_url))
    while not stop.wait(settings.heartbeat_interval):
        try:
            store.heartbeats([n.name for n in nodes if n.beating()], settings.node_timeout)
        except REDIS_ERRORS as exc:
            log.warning("simulated nodes: heartbeat failed: %s", exc)


REGISTER_WAIT = 120.0
"""Seconds the host waits for its nodes to register before their beats go to a process of
their own (node.sim_beats); one registering later is not beaten."""


def beats_process(settings: Settings, names: list[str]) -> subprocess.Popen:
    """The child that beats ``names`` from now on (node.sim_beats): a thousand busy worker
    threads starved a heartbeat thread among them for seconds."""
    env = dict(os.environ, MINIHPC_REDIS_URL=settings.redis_url,
               MINIHPC_HEARTBEAT_INTERVAL=str(settings.heartbeat_interval),
               MINIHPC_NODE_TIMEOUT=str(settings.node_timeout))
    return subprocess.Popen([sys.executable, "-m", "minihpc.node.sim_beats", str(os.getpid()), *names], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def watch_beats(child: subprocess.Popen, nodes: list[SimulatedAgent], stop: threading.Event) -> None:
    """Until ``stop``: tell the beats process of each node whose agent stopped (it leaves for
    good, as a stopped agent does); should the process die, the nodes fall silent, and say so."""
    told: set[str] = set()
    while not stop.wait(1.0):
        if child.poll() is not None:
            log.error("simulated nodes: the heartbeat process ended (exit %s); the nodes will go DOWN", child.returncode)
            stop.wait()
            return
        for node in nodes:
            if node.registered and not node.beating() and node.name not in told:
                told.add(node.name)
                try:
                    child.stdin.write(f"{node.name}\n")
                    child.stdin.flush()
                except (BrokenPipeError, ValueError):
                    pass


def host(settings: Settings, node_names: list[str], cpus: int, seconds: float) -> int:
    """Run a simulated agent per name, each in its own thread, until SIGTERM or SIGINT; then
    each leaves (its alive key dropped), as a stopped agent does."""
    taken = sorted(n.name for n in Store(connect(settings.redis_url)).node_statuses()
                   if n.alive and not n.simulated and n.name in set(node_names))
    if taken:  # two agents on one node's queue: a real one would run simulated jobs for real
        raise UsageError(f"simulate: {', '.join(taken[:5])} {'is a real node' if len(taken) == 1 else 'are real nodes'} "
                         "that is up; choose another --prefix")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # three connections a node
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    nodes = [SimulatedAgent(settings, name, cpus, seconds) for name in node_names]
    for node in nodes:
        threading.Thread(target=node.run, name=f"sim-{node.name}", daemon=True).start()
    log.info("%d simulated node(s) started (%s ... %s)", len(nodes), node_names[0], node_names[-1])
    handed = threading.Event()  # the beats process took over
    beats = threading.Thread(target=beat_all, args=(nodes, settings, handed), name="heartbeats", daemon=True)
    beats.start()
    deadline = time.monotonic() + REGISTER_WAIT
    while not stop.is_set() and not all(n.registered for n in nodes) and time.monotonic() < deadline:
        stop.wait(0.2)
    child = None if stop.is_set() else beats_process(settings, [n.name for n in nodes if n.registered])
    if child is not None and child.stdout.readline():  # its first beat landed: the thread may stop
        handed.set()
        watch_beats(child, nodes, stop)
    elif child is not None:
        log.warning("simulated nodes: the heartbeat process did not start; beating from this one")
        stop.wait()
    handed.set()
    if child is not None:
        child.terminate()
        try:
            child.wait(agents.BEAT_CALL_MAX + 1)  # a beat in flight lands before the nodes leave, not after
        except subprocess.TimeoutExpired:
            child.kill()
    beats.join(agents.BEAT_CALL_MAX + 1)
    for node in nodes:
        node.going_down()
    log.info("%d simulated node(s) left", len(nodes))
    os._exit(0)  # the workers block in their dequeues for minutes; what they hold is void now
