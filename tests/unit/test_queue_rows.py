"""The web page's queue and history panels (core.queue_rows, api/queue.py): the queue as squeue
shows it -- pending and running only, an array's pending tasks that wait alike as one row, with
its %N throttle, running tasks one by one -- and ended jobs apart, newest first, a pending array
cancelled whole as one row, with honest counts."""

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from minihpc.api import queue as api_queue
from minihpc.api.app import error, status_of
from minihpc.api.auth import principal
from minihpc.api.views import panel_json
from minihpc.cli.display import queue_rows
from minihpc.client import jobs as client_jobs
from minihpc.client.access import Principal
from minihpc.client.arrays import task_id
from minihpc.core.errors import MinihpcError
from minihpc.core.models import Job, JobState
from minihpc.core.queue_rows import Row, collapse_ended, history_panel, queue_panel

PD, R, CD, CA = JobState.PENDING, JobState.RUNNING, JobState.COMPLETED, JobState.CANCELLED
LIMIT = "JobArrayTaskLimit"


def job(job_id, state=PD, reason="None", attempts=0, **fields):
    return Job(job_id, "train", "alice", "s", "s", "x", state=state, reason=reason, attempts=attempts,
               submitted_at=1.0, **fields)


def array(first, indexes, state=PD, reason="Priority", limit=0, ran=()):
    """An array's tasks as client.arrays numbers them (the last index keeps the array's id);
    tasks at ``ran`` indexes are RUNNING on one attempt (``state`` terminal: ended after one)."""
    tasks = []
    for offset, index in enumerate(indexes):
        ran_here = index in ran
        tasks.append(job(task_id(first, offset, len(indexes)), R if ran_here and state is PD else state,
                         "None" if ran_here else reason, attempts=1 if ran_here else 0,
                         array_job_id=first, array_task_id=index, array_spec="0-1000", array_limit=limit))
    return tasks


def shown(panel):
    return [(row.shown, row.job.state.code, row.count) for row in panel.rows]


def test_a_cancelled_1001_task_array_is_one_history_row_and_the_running_job_keeps_the_queue():
    """The issue's page: `Queue (50 of 1001)` of CA rows pushed the running job out of view."""
    running = job(3100, R, attempts=1, nodes=["node-1"])
    cancelled = array(2017, range(1001), CA, "cancelled by alice")
    queue = queue_panel([running, *cancelled], limit=50)
    assert shown(queue) == [("3100", "R", 1)]
    assert (queue.total_rows, queue.total_jobs, queue.more_jobs) == (1, 1, 0)
    history = history_panel(list(reversed(cancelled)), total=1001, limit=50)
    assert shown(history) == [("2017_[0-1000]", "CA", 1001)]
    assert (history.total_rows, history.total_jobs, history.more_jobs, history.complete) == (1, 1001, 0, True)


def test_pending_tasks_collapse_with_their_throttle_and_running_tasks_stay_rows():
    tasks = array(2017, range(1001), reason=LIMIT, limit=4, ran=range(4))
    running = [t for t in tasks if t.state is R]
    panel = queue_panel([*running, *(t for t in tasks if t.state is PD)], limit=50)
    assert shown(panel) == [("2017_0", "R", 1), ("2017_1", "R", 1), ("2017_2", "R", 1), ("2017_3", "R", 1),
                            ("2017_[4-1000%4]", "PD", 997)]
    assert (panel.total_rows, panel.total_jobs) == (5, 1001)
    assert panel.rows[-1].ref == "2017_[4-1000]", "scancel's form: %N belongs to --array, not to a job id"


def test_pending_tasks_waiting_for_different_reasons_are_different_rows():
    tasks = array(40, range(6), reason="Priority")
    for t in tasks[2:4]:
        t.reason = "JobHeldUser"
    assert shown(queue_panel(tasks, limit=50)) == [("40_[0-1,4-5]", "PD", 4), ("40_[2-3]", "PD", 2)]


def test_the_queue_rows_are_those_of_minihpc_squeue():
    """One rule for every face: the page's JOBID column is the CLI's (cli.display.queue_rows)."""
    jobs = [job(9, R, attempts=1, nodes=["n1"]), *array(40, range(6), reason=LIMIT, limit=2, ran=(0, 1)), job(50)]
    jobs.sort(key=lambda j: j.state is not R)
    assert [row.shown for row in queue_panel(jobs, limit=50).rows] == [r[0] for r in queue_rows(jobs, now=2.0)]


def test_ended_jobs_leave_the_queue_and_a_requeued_one_leaves_the_history():
    done, requeued = job(7, CD, attempts=1), job(8, PD, reason="BeginTime", attempts=1)
    assert shown(queue_panel([requeued, done], limit=50)) == [("8", "PD", 1)]
    assert shown(history_panel([requeued, done], total=2, limit=50)) == [("7", "CD", 1)]


def test_in_the_history_only_tasks_that_never_ran_collapse():
    """Slurm keeps pending tasks as the array's one record; a task that started has its own,
    and sacct shows it alone."""
    tasks = array(2017, range(1001), CA, "cancelled by alice", limit=4, ran=range(4))
    kept, names = collapse_ended(list(reversed(tasks)))
    assert [names.get(j.id, j.array_name) for j in kept] == ["2017_[4-1000%4]", "2017_3", "2017_2", "2017_1", "2017_0"]


def test_the_history_is_newest_first_limited_and_says_how_many_more():
    ended = [job(i, CD, attempts=1) for i in range(200, 100, -1)]
    panel = history_panel(ended[:60], total=100, limit=50)
    assert [row.job.id for row in panel.rows] == list(range(200, 150, -1))
    assert (panel.total_rows, panel.total_jobs, panel.shown_jobs, panel.more_jobs) == (None, 100, 50, 50)
    assert panel.complete, "the oldest job read is a row of its own: no row shown goes on past it"
    everything = history_panel(ended, total=100, limit=50)
    assert (everything.total_rows, everything.more_jobs) == (100, 50)


def test_a_row_cut_by_the_read_is_incomplete_until_more_is_read():
    cancelled = list(reversed(array(2017, range(1001), CA, "cancelled by alice")))
    assert not history_panel(cancelled[:200], total=1001, limit=50).complete
    assert history_panel([*cancelled, job(3, CD, attempts=1)], total=1500, limit=50).complete


class FakeStore:
    """What the /queue, /history and /queue/cancel routes read of the store."""

    def __init__(self, jobs):
        self.jobs = {j.id: j for j in jobs}
        self.reads = []

    def running_jobs(self):
        return [j for j in self.jobs.values() if j.state is R]

    def latest_change(self):
        return None, 0  # no changes stream: PendingCache reads the queue whole each time

    def pending_jobs(self, cache=None):
        return [j for j in self.jobs.values() if j.state is PD]

    def _ended(self):
        return sorted((j for j in self.jobs.values() if j.state.terminal), key=lambda j: -(j.ended_at or 0))

    def ended_jobs(self, limit=100):
        self.reads.append(limit)
        return self._ended()[:limit]

    def oldest_ended(self, count):
        return [], len(self._ended())

    def array_tasks(self, array_job_id):
        return {j.array_task_id: j.id for j in self.jobs.values() if j.array_job_id == array_job_id}

    def get_jobs(self, ids):
        return [self.jobs[i] for i in ids if i in self.jobs]

    def get_job(self, job_id):
        return self.jobs[job_id]

    def transition(self, job_id, new, reason, only_from=()):
        if self.jobs[job_id].state not in only_from:
            return False
        self.jobs[job_id].state, self.jobs[job_id].reason = new, reason
        return True


@pytest.fixture
def cluster():
    running = job(3100, R, attempts=1, nodes=["node-1"])
    tasks = array(2017, range(1001), reason=LIMIT, limit=4)
    for t in tasks:
        t.ended_at = 100.0 + t.array_task_id
    old = [job(i, CD, attempts=1, ended_at=float(i)) for i in range(1, 31)]
    store = FakeStore([running, *tasks, *old])
    app = FastAPI()
    app.include_router(api_queue.router)
    app.state.store, app.state.pending = store, client_jobs.PendingCache()
    app.dependency_overrides[principal] = lambda: Principal("alice")
    app.add_exception_handler(MinihpcError, lambda request, exc: error(status_of(exc), str(exc)))
    return store, TestClient(app)


def test_the_routes_answer_the_panels_and_cancel_a_row(cluster):
    store, client = cluster
    queue = client.get("/queue").json()
    assert [(r["row_id"], r["count"], r["ref"]) for r in queue["rows"]] == [("3100", 1, "3100"),
                                                                            ("2017_[0-1000%4]", 1001, "2017_[0-1000]")]
    assert (queue["total_rows"], queue["total_jobs"], queue["more_jobs"]) == (2, 1002, 0)
    assert queue["rows"][1]["id"] == 2018 and queue["rows"][1]["state_code"] == "PD"

    answer = client.post("/queue/cancel", json={"jobs": queue["rows"][1]["ref"]}).json()
    assert len(answer["cancelled"]) == 1001 and answer["errors"] == []
    assert [r["row_id"] for r in client.get("/queue").json()["rows"]] == ["3100"]
    store.reads.clear()
    history = client.get("/history?limit=5").json()
    assert [(r["row_id"], r["state_code"], r["count"]) for r in history["rows"]] == [
        ("2017_[0-1000%4]", "CA", 1001), ("30", "CD", 1), ("29", "CD", 1), ("28", "CD", 1), ("27", "CD", 1)]
    assert (history["total_jobs"], history["shown_jobs"], history["more_jobs"]) == (1031, 1005, 26)
    assert store.reads == [200, 800, 2202], "reads more while the last row shown may go on past the oldest read"
    assert client.post("/queue/cancel", json={"jobs": "2017_[0-1000]"}).status_code == 409


def test_panel_json_keeps_the_job_fields_the_page_reads():
    row = panel_json(queue_panel([job(5, R, attempts=1, nodes=["n1"])], 50), 50, now=2.0)["rows"][0]
    assert {"id", "name", "user", "state", "state_code", "elapsed", "nodes", "reason", "row_id", "count"} <= set(row)
    assert Row(job(5), "12_[4-15%4]").ref == "12_[4-15]"
