"""Who a job's ranks run as: their own user, never the agent's.

In the containers (and on hosts set up by Ansible) the node agent runs as root with only the
capabilities it needs (SETUID, SETGID, KILL, CHOWN, DAC_OVERRIDE, FOWNER) and starts each
job's launcher as ``MINIHPC_JOB_USER`` (``job`` in the image). Ranks then hold no
capability, cannot read ``/proc/<daemon>/environ`` (root's, 0400), cannot signal or ptrace
the daemons (another uid), and cannot write the spool or the daemons' files. Without a job user
(local mode on a user's own account) ranks run as the agent's user, as a program the user
started would.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

from minihpc.core.errors import UsageError


@dataclass(frozen=True)
class Identity:
    user: str
    uid: int
    gid: int
    home: str

    def popen_kwargs(self) -> dict:
        """For subprocess.Popen: become this user, with its group only (no supplementary ones)."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def resolve(job_user: str, agent_uid: int | None = None) -> Identity | None:
    """The identity ranks run as: None for "the agent's own" (``job_user`` empty), else the
    user, which the agent must be root to become (one clear line otherwise)."""
    if not job_user:
        return None
    agent_uid = os.geteuid() if agent_uid is None else agent_uid
    try:
        entry = pwd.getpwnam(job_user) if not job_user.isdigit() else pwd.getpwuid(int(job_user))
    except KeyError:
        raise UsageError(f"MINIHPC_JOB_USER={job_user!r}: no such user on this node") from None
    if entry.pw_uid == 0:
        raise UsageError(f"MINIHPC_JOB_USER={job_user!r} is root; jobs must run as an unprivileged user")
    if agent_uid != 0 and agent_uid != entry.pw_uid:
        raise UsageError(
            f"MINIHPC_JOB_USER={job_user!r} needs the node agent to run as root (it runs as uid {agent_uid}); "
            "unset it to run jobs as the agent's user"
        )
    return Identity(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def give(path: str, identity: Identity | None) -> None:
    """Hand a directory the agent made for a job (its checkpoints) to the job's user."""
    if identity is not None and os.geteuid() == 0:
        os.chown(path, identity.uid, identity.gid)


def like_parent(path: str) -> None:
    """Give a directory the agent made the owner of its parent (a job's log folder stays the
    cluster user's, so the API, which runs as that user, can delete it with the job)."""
    if os.geteuid() != 0:
        return
    parent = os.stat(os.path.dirname(os.path.abspath(path)))
    mine = os.stat(path)
    if (mine.st_uid, mine.st_gid) != (parent.st_uid, parent.st_gid):
        os.chown(path, parent.st_uid, parent.st_gid)


def leftovers(identity: Identity | None) -> list:
    """Processes of the job user still alive on this node (psutil.Process). A node runs one job
    at a time, so once its share has ended, any is one a job left behind on purpose: double
    forked and detached from its session, out of the launcher's process tree."""
    import psutil

    if identity is None:
        return []
    found = []
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info.get("uids")
        if uids is not None and identity.uid in (uids.real, uids.effective):
            found.append(proc)
    return found
