"""A launch task that Redis lost mid-dequeue is delivered again, at once.

rq's dequeue moves a task to its queue's intermediate list and starting it takes it off; Redis
killed between the two strands it there, and rq itself only fails it after its 10-minute
maintenance interval. Seen in the integration tier: after `restart_redis` mid-burst, a node
held job 97's allocation, beat on, and never ran it, so the job stayed RUNNING. The node's
worker (node.agent._Worker) is its queue's only consumer: before each dequeue it puts such a
task back at the head. Real redis-server and rq here; the cluster-level drill is
test_redis_crash."""

from types import SimpleNamespace

import pytest
import redis

from minihpc.core.launch_spec import LAUNCH_TASK
from minihpc.node.agent import _Worker
from minihpc.state.queues import SERIALIZER, node_queue
from minihpc.state.store import Store

pytestmark = pytest.mark.integration


def test_a_task_stranded_between_dequeue_and_start_goes_back_to_the_head_of_the_queue(redis_port):
    conn = redis.Redis(port=redis_port)
    queue = node_queue(Store(conn), "n1")
    first = queue.enqueue(LAUNCH_TASK, job_id="minihpc-97-1-n1")
    second = queue.enqueue(LAUNCH_TASK, job_id="minihpc-98-1-n1")
    # A dequeue whose worker lost Redis before it could start the task.
    assert conn.lmove(queue.key, queue.intermediate_queue_key, "LEFT", "RIGHT") == first.id.encode()
    worker = _Worker([queue], connection=conn, serializer=SERIALIZER, name="n1.test")
    worker.agent = SimpleNamespace(name="n1")
    assert worker.should_run_maintenance_tasks
    worker.run_maintenance_tasks()
    assert conn.llen(queue.intermediate_queue_key) == 0
    assert queue.job_ids == [first.id, second.id]
    assert not worker.should_run_maintenance_tasks  # rq's own maintenance ran too, and is not due
    job, _ = queue.dequeue_any([queue], None, connection=conn, serializer=SERIALIZER)
    assert job.id == first.id


def test_a_task_stranded_again_is_dropped_not_delivered_forever(redis_port):
    conn = redis.Redis(port=redis_port)
    queue = node_queue(Store(conn), "n1")
    task = queue.enqueue(LAUNCH_TASK, job_id="minihpc-97-1-n1")
    worker = _Worker([queue], connection=conn, serializer=SERIALIZER, name="n1.test")
    worker.agent = SimpleNamespace(name="n1")
    for _ in range(2):
        conn.lmove(queue.key, queue.intermediate_queue_key, "LEFT", "RIGHT")
        worker.run_maintenance_tasks()
    assert conn.llen(queue.intermediate_queue_key) == 0 and queue.job_ids == [], task.id
