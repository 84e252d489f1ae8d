"""Drills: inject a fault (minihpc.ops.faults) into a running cluster and measure its recovery.

Every figure counts from the moment the fault was injected and is read from what the cluster
itself recorded, so a drill measures the product, not the drill:

- detected: the master's "down" incident for the node;
- node back: its "back" incident (heartbeating again after the restart);
- resumed: the first training step the job's next attempt reported (its progress reports, kept
  per attempt), and the step it resumed from; for a job that reports no progress (the interrupted
  attempt reported no step), the next attempt's start (kept per attempt) -- there is no training
  step to wait for, and ``resumed_by`` says which of the two was measured;
- steps lost: steps the interrupted attempt had trained beyond the checkpoint it resumed from;
- for an elastic job (``--elastic``), which goes on without the node instead of being requeued:
  the nodes it continued on (its "resized" incident) and when it grew back onto the node once
  that was back. Its launches are counted as attempts are (``Job.attempts``), so "resumed" is
  the first step of the launch on the nodes left.

``summarize`` is a pure function of those records; ``run`` is the thin loop that polls them and
returns as soon as every figure is in.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field

import redis

from minihpc.core.models import JobState
from minihpc.ops import faults as _faults
from minihpc.state import wire
from minihpc.state.store import Store

POLL = 0.05


@dataclass
class Drill:
    kind: str
    node: str | None
    job: int | None
    fault_at: float
    attempt: int | None = None
    """The job's attempt when the fault hit."""
    attempt_now: int | None = None
    """The job's attempt at the drill's last look (``job_state`` is that attempt's state)."""
    detected: float | None = None
    back: float | None = None
    resumed: float | None = None
    resumed_from: int | None = None
    resumed_attempt: int | None = None
    """The attempt that resumed the job."""
    resumed_by: str | None = None
    """What ``resumed`` measured: "step" (the resumed attempt's first training step) or "start"
    (its start: the interrupted attempt had reported no progress)."""
    last_step: int | None = None
    steps_lost: int | None = None
    job_state: str | None = None
    redis_back: float | None = None
    """redis-restart: when Redis answered again."""
    kept_running: bool | None = None
    """redis-restart: the job trained on in the same attempt after Redis was back."""
    continued_on: int | None = None
    """An elastic job: the nodes it went on with, without the node (None: it was requeued)."""
    grew_back: float | None = None
    """An elastic job: when it took the node back (its growth, from the fault)."""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(drill: Drill, incidents: list[dict], steps: dict[int, dict[str, dict]],
              starts: dict[int, float] | None = None) -> Drill:
    """Fill in the figures from the node's incidents, the job's per-attempt steps and its
    attempts' start times ({attempt: at}).

    A job whose interrupted attempt reported progress has resumed when a later attempt reports
    its first step (training again, not merely started); one that reported none has resumed when
    a later attempt starts."""
    mine = sorted((i for i in incidents if i.get("node") == drill.node and i["at"] >= drill.fault_at),
                  key=lambda i: i["at"])
    down = next((i for i in mine if i["kind"] == "down"), None)
    if down is not None:
        drill.detected = down["at"] - drill.fault_at
        back = next((i for i in mine if i["kind"] == "back" and i["at"] >= down["at"]), None)
        drill.back = None if back is None else back["at"] - drill.fault_at
    if drill.job is None or drill.attempt is None:
        return drill
    resized = sorted((i for i in incidents if i.get("job") == drill.job and i["kind"] == "resized"
                      and i["at"] >= drill.fault_at), key=lambda i: i["at"])
    shrunk = next((i for i in resized if not i.get("grew")), None)
    if shrunk is not None:
        drill.continued_on = shrunk.get("nodes")
        grew = next((i for i in resized if i.get("grew") and i["at"] >= shrunk["at"]), None)
        drill.grew_back = None if grew is None else grew["at"] - drill.fault_at
    last = steps.get(drill.attempt, {}).get("last")
    drill.last_step = None if last is None else int(last["step"])
    later = sorted(a for a in steps if a > drill.attempt and "first" in steps[a])
    started = sorted(a for a in starts or {} if a > drill.attempt)
    if later:
        first = steps[later[0]]["first"]
        drill.resumed = first["at"] - drill.fault_at
        drill.resumed_from = int(first["step"]) - 1
        drill.resumed_attempt, drill.resumed_by = later[0], "step"
        if drill.last_step is not None:
            drill.steps_lost = max(0, drill.last_step - drill.resumed_from)
    elif last is None and started:
        drill.resumed = starts[started[0]] - drill.fault_at
        drill.resumed_attempt, drill.resumed_by = started[0], "start"
    elif drill.redis_back is not None and last is not None and last["at"] > drill.fault_at + drill.redis_back:
        drill.kept_running, drill.steps_lost = True, 0
    return drill


def finished(drill: Drill) -> bool:
    """Whether every figure the drill can expect is in."""
    if drill.kind == "redis-restart":
        node_done = drill.redis_back is not None
    else:
        node_done = drill.detected is not None and drill.back is not None
    job_done = (drill.job is None or drill.resumed is not None or bool(drill.kept_running)
                or drill.job_state not in (None, "RUNNING", "PENDING"))
    # An elastic job that went on without the node takes it back once it is: wait for that too.
    regrown = drill.continued_on is None or drill.grew_back is not None or drill.job_state != "RUNNING"
    return node_done and job_done and regrown


def running_job_on(store: Store, node: str | None) -> int | None:
    for job in store.running_jobs():
        if node is None or node in job.nodes:
            return job.id
    return None


def run(store: Store, injector, kind: str, node: str | None, job_id: int | None = None,
        duration: float = 30.0, timeout: float = 180.0, log=print) -> Drill:
    """Inject the fault, hold it ``duration`` seconds when it is timed, and measure until every
    figure is in or ``timeout`` has passed."""
    _faults.check_kind(kind)
    if job_id is None:
        job_id = running_job_on(store, None if kind == "redis-restart" else node)
    attempt = store.get_job(job_id).attempts if job_id is not None else None
    drill = Drill(kind, node, job_id, time.time(), attempt)
    injector.inject(kind, node)
    log(f"{kind} {node or ''}: injected at {time.strftime('%H:%M:%S', time.localtime(drill.fault_at))}"
        + (f", job {job_id} attempt {attempt}" if job_id is not None else ", no job running there"))
    undone: list[str] = []
    undo = threading.Thread(target=lambda: undone.append(_faults.wait_undo(injector, kind, node, duration)),
                            daemon=True)
    undo.start()
    deadline = drill.fault_at + timeout + (duration if kind in _faults.TIMED else 0)
    while time.time() < deadline:
        try:
            store.ping()
            if drill.redis_back is None and kind == "redis-restart":
                drill.redis_back = time.time() - drill.fault_at
            if job_id is not None:
                job = store.get_job(job_id)
                drill.job_state, drill.attempt_now = job.state.value, job.attempts
            summarize(drill, store.incidents(200), store.attempt_steps(job_id) if job_id else {},
                      store.attempt_starts(job_id) if job_id else {})
        except (redis.RedisError, wire.RedisError):
            pass  # a Redis restart (or the drill's own fault): keep measuring
        if finished(drill) and not undo.is_alive():
            break
        time.sleep(POLL)
    else:
        drill.notes.append(f"timed out after {timeout:g}s")
    if undo.is_alive():
        undo.join(timeout=60)
    drill.notes.extend(n for n in undone if n)
    if drill.job_state == JobState.FAILED.value:
        drill.notes.append("the job FAILED")
    return drill


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _resume(d: Drill) -> str:
    """What ``job resumed`` measured, or where the job stands when it has not resumed."""
    if d.resumed_by == "step":
        return f"job {d.job}, attempt {d.attempt} -> {d.resumed_attempt}, from step {d.resumed_from}"
    if d.resumed_by == "start":
        return f"job {d.job}: attempt {d.resumed_attempt} started; attempt {d.attempt} reported no progress"
    now = d.attempt_now if d.attempt_now is not None else d.attempt
    hit = f"; the fault hit attempt {d.attempt}" if now != d.attempt else ""
    return f"job {d.job}: {d.job_state}, attempt {now}{hit}"


def format_drill(d: Drill) -> str:
    lines = [f"drill {d.kind} {d.node or ''}".rstrip()]
    if d.kind == "redis-restart":
        lines.append(f"  redis back    {_secs(d.redis_back)}")
    else:
        lines.append(f"  detected      {_secs(d.detected)}")
        lines.append(f"  node back     {_secs(d.back)}")
    if d.job is None:
        lines.append("  job           none was running there")
    elif d.kept_running:
        lines.append(f"  job           kept running (job {d.job}, attempt {d.attempt}, no requeue)")
        lines.append("  steps lost    0")
    elif d.continued_on is not None:
        lines.append(f"  job           continued on {d.continued_on} nodes after {_secs(d.resumed)} (job {d.job}, "
                     f"no requeue, from step {'-' if d.resumed_from is None else d.resumed_from})")
        lines.append(f"  grew back     {_secs(d.grew_back)}" + (" (onto the node, once it was back)"
                                                                if d.grew_back is not None else ""))
        lines.append(f"  steps lost    {'-' if d.steps_lost is None else d.steps_lost}")
    else:
        lines.append(f"  job resumed   {_secs(d.resumed)}  ({_resume(d)})")
        lines.append(f"  steps lost    {'-' if d.steps_lost is None else d.steps_lost}"
                     + (f"  (trained to {d.last_step}, resumed from {d.resumed_from})" if d.steps_lost is not None
                        else "  (no steps reported)" if d.resumed_by == "start" else ""))
    lines.extend(f"  note: {n}" for n in d.notes)
    return "\n".join(lines)
