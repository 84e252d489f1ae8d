"""A user keeps at most ``max_checkpoint_bytes_per_user`` of checkpoints (issue 33): when one of
the user's jobs starts, its first node makes room from that user's own oldest ended jobs
(core.retention.checkpoints_to_prune decides), so one user's checkpoints cannot fill the disk
every user's jobs write to. A user's folders are those its uid owns (jobs run as their owners:
MINIHPC_JOB_USER=%u); the agent, root, reads and removes them. The job's log and an incident
say what went."""

from __future__ import annotations

import logging
import os
import shutil

from minihpc.core import tenants
from minihpc.core.parsing import human_bytes
from minihpc.core.retention import checkpoints_to_prune
from minihpc.node import joblog
from minihpc.node.identity import Identity

log = logging.getLogger(__name__)

def usage(path: str) -> int:
    """Bytes of the files under ``path`` (links not followed)."""
    total = 0
    for top, dirs, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total


def users_folders(root: str, uid: int) -> dict[int, str]:
    """job id -> checkpoint folder of each ``job-N`` under ``root`` that ``uid`` owns."""
    found = {}
    try:
        entries = list(os.scandir(root))
    except OSError:
        return found
    for entry in entries:
        name = entry.name
        if not (name.startswith("job-") and name[4:].isdigit()):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid == uid and entry.is_dir(follow_symlinks=False):
            found[int(name[4:])] = entry.path
    return found


def make_room(store, root: str, who: Identity, cap: int, job_id: int) -> tuple[list[int], int, int]:
    """Remove the user's oldest ended jobs' checkpoints past ``cap``: (the jobs whose folders
    went, their bytes, what the user had before)."""
    folders = {j: p for j, p in users_folders(root, who.uid).items() if j != job_id}
    if not cap or not folders:
        return [], 0, 0
    sizes = {j: usage(p) for j, p in folders.items()}
    states = store.job_states(list(folders))
    ended = store.ended_at(list(folders))
    had = sum(sizes.values())
    chosen = checkpoints_to_prune(
        [(j, sizes[j], states[j].value if states.get(j) else "COMPLETED", ended.get(j)) for j in folders], cap)
    for j in chosen:
        shutil.rmtree(folders[j], ignore_errors=True)
    freed = sum(sizes[j] for j in chosen)
    if chosen:
        store.incident("checkpoints_pruned", None, job_id, user=who.user, jobs=chosen, freed_bytes=freed,
                       cap_bytes=cap)
        log.warning("user %s: checkpoints of jobs %s removed (%d bytes) to keep within %d", who.user, chosen, freed, cap)
    return chosen, freed, had


def line(who: Identity, chosen: list[int], freed: int, had: int, cap: int) -> str:
    """The job log's line about what went."""
    return (f"=== minihpc: {who.user}'s checkpoints took {human_bytes(had)}, more than the {human_bytes(cap)} "
            f"one user keeps (MINIHPC_MAX_CHECKPOINT_BYTES_PER_USER): removed those of ended job(s) "
            f"{', '.join(map(str, chosen))} ({human_bytes(freed)}) ===\n")


def enforce(store, spec, who: Identity | None, job_user: str, out) -> None:
    """At a job's start, on its first node: make room for it within its user's cap (the cluster
    record's ``max_checkpoint_bytes_per_user``), when jobs run as their owners."""
    if not spec.checkpoint_dir or spec.node_rank != 0 or who is None or job_user != tenants.OWNER:
        return
    cap = int(store.cluster_info().get("max_checkpoint_bytes_per_user") or 0)
    chosen, freed, had = make_room(store, os.path.dirname(spec.checkpoint_dir), who, cap, spec.job_id)
    if chosen:
        joblog.note(out, line(who, chosen, freed, had, cap))
