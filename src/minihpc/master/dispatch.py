"""Dispatch: the per-node launch tasks of a job the scheduler started, queued on each node's
rq queue in the same transaction that reserves the nodes (see ``Store.start``)."""

from __future__ import annotations

import os

from minihpc.core import gpus
from minihpc.core.elastic import elastic
from minihpc.core.launch_spec import LAUNCH_TASK, LaunchSpec
from minihpc.core.models import Job, NodeStatus
from minihpc.core.partitions import Partitions
from minihpc.state.queues import launch_id, node_queue

LAUNCH_RESULT_TTL = 0
"""Seconds rq keeps a finished launch task: none. The node's report (keys.JOB_RESULTS) is the
record of how the share ended; rq's copy of the task (its whole payload, about a kilobyte a
node) and of its result kept for 10 minutes cost Redis ~10 KiB per ended job (issue 38)."""
LAUNCH_FAILURE_TTL = 86400
"""Seconds rq keeps a failed launch task (for an operator to read)."""


def launch_specs(job: Job, nodes: dict[str, NodeStatus], cluster: dict[str, str],
                 uid: int | None = None) -> list[LaunchSpec]:
    """The per-node launch tasks of a job that has just been given ``job.nodes``; ``uid``:
    the one the cluster gave the job's user (core.tenants)."""
    log_dir = os.path.join(cluster["log_dir"], f"job-{job.id}")
    checkpoint_dir = os.path.join(cluster["checkpoint_dir"], f"job-{job.id}")
    master_addr = nodes[job.nodes[0]].addr
    partition = Partitions.from_record(cluster).effective(job.partition)  # SLURM_JOB_PARTITION
    return [
        LaunchSpec(
            job_id=job.id,
            attempt=job.attempts,
            name=job.name,
            node=name,
            node_rank=rank,
            nodes=list(job.nodes),
            master_addr=master_addr,
            tasks_per_node=job.tasks_per_node,
            script=job.script,
            args=list(job.args),
            workdir=job.workdir,
            source_dir=os.path.dirname(job.script_source) if job.script_source.startswith("/") else "",
            log_path=os.path.join(log_dir, f"{name}.log"),
            checkpoint_dir=checkpoint_dir,
            data_dir=cluster.get("data_dir", ""),
            script_sha256=job.script_sha256,
            launch=job.launch,
            submit_dir=job.submit_dir,
            user=job.user,
            cpus_per_task=job.cpus_per_task,
            output=job.output,
            error=job.error,
            environment=dict(job.environment),
            warn_signal=job.warn_signal,
            cold=job.cold,
            partition=partition,
            stdin=job.stdin,
            array_job_id=job.array_job_id,
            array_task_id=job.array_task_id,
            array_spec=job.array_spec,
            gpus=gpus.allocate(nodes[name].gpu_devices, job.gpus),
            gpus_per_task=job.gpus_per_task,
            uid=uid,
            resizes=job.resizes,
            elastic=job.node_range if elastic(job) else "",
        )
        for rank, name in enumerate(job.nodes)
    ]


def dispatcher(store, nodes: dict[str, NodeStatus], cluster: dict[str, str]):
    """``dispatch(pipe, job)`` for ``Store.start``: queue every node's launch task on ``pipe``."""

    uids: dict[str, int | None] = {}  # a pass starting a user's hundred jobs asks once

    def dispatch(pipe, job: Job) -> None:
        # Asked outside the transaction (the pipe only queues): the same answer on a retry.
        if job.user and job.user not in uids:
            uids[job.user] = store.user_uid(job.user)
        uid = uids.get(job.user) if job.user else None
        store.with_environments([job])  # its record names it apart (state.environments)
        for spec in launch_specs(job, nodes, cluster, uid):
            node_queue(store, spec.node).enqueue_call(
                LAUNCH_TASK,
                kwargs=spec.to_payload(),
                timeout=-1,
                result_ttl=LAUNCH_RESULT_TTL,
                failure_ttl=LAUNCH_FAILURE_TTL,
                job_id=launch_id(job.id, job.attempts, spec.node),
                description=f"job {job.id} attempt {job.attempts} on {spec.node}",
                pipeline=pipe,
            )

    return dispatch
