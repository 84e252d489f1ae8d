"""Redis is killed (SIGKILL) and restarted in the middle of a burst of 200 submits: every
submit that was acknowledged is still there, every job ends COMPLETED, and every job's state
agrees with the queue sets."""

import threading
import time

import pytest
import redis

from minihpc.client.submit import Request, submit
from minihpc.core.errors import MinihpcError
from minihpc.core.models import JobState
from minihpc.ops import local
from minihpc.state import keys
from minihpc.state.connect import connect
from minihpc.state.store import Store
from tests.conftest import wait_until

pytestmark = pytest.mark.integration


def test_no_acknowledged_job_is_lost_when_redis_is_killed_mid_burst(idle_cluster, tmp_path):
    c = idle_cluster
    script = tmp_path / "tiny.py"
    script.write_text("print('tiny ok')\n")
    store = Store(connect((c.state_dir / "redis_url").read_text().strip()))
    acked: list[int] = []

    def burst():
        for i in range(200):
            while True:
                try:
                    acked.append(submit(store, Request(script=str(script), name=f"burst-{i}")).id)
                    break
                except (redis.ConnectionError, redis.TimeoutError, MinihpcError):
                    time.sleep(0.05)  # not acknowledged: the client tries again

    thread = threading.Thread(target=burst)
    thread.start()
    wait_until(lambda: len(acked) >= 60, timeout=60, message="60 acknowledged submits")
    local.restart_redis(c.state_dir)
    thread.join(timeout=120)
    assert len(acked) == 200 and len(set(acked)) == 200

    def all_done():
        states = store.job_states(acked)
        assert None not in states.values(), [i for i, s in states.items() if s is None]
        return all(s is not None and s.terminal for s in states.values())

    wait_until(all_done, timeout=600, interval=1, message="all 200 jobs to end")
    jobs = store.get_jobs(acked)
    assert {j.state for j in jobs} == {JobState.COMPLETED}, {j.id: j.state for j in jobs if j.state is not JobState.COMPLETED}
    ended = {int(i) for i in store.r.zrange(keys.JOBS_ENDED, 0, -1)}
    assert set(acked) <= ended
    assert not ({int(i) for i in store.r.smembers(keys.JOBS_PENDING)} & set(acked))
    assert store.reconcile() == {}
