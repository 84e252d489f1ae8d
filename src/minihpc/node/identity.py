"""Who a job's ranks run as: their own user, never the agent's.

In the containers (and on hosts set up by Ansible) the node agent runs as root with only the
capabilities it needs (SETUID, SETGID, KILL, CHOWN, DAC_OVERRIDE, FOWNER) and starts each
job's launcher as ``MINIHPC_JOB_USER`` (``job`` in the image). Ranks then hold no
capability, cannot read ``/proc/<daemon>/environ`` (root's, 0400), cannot signal or ptrace
the daemons (another uid), and cannot write the spool or the daemons' files. Without a job user
(local mode on a user's own account) ranks run as the agent's user, as a program the user
started would. With ``MINIHPC_JOB_USER=%u`` each job runs as its own user's account
(core.tenants): the default in the image and on Ansible hosts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import grp
import logging
import os
import pwd
import stat
import subprocess
from dataclasses import dataclass

from minihpc.core import tenants
from minihpc.core.errors import UsageError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Identity:
    user: str
    uid: int
    gid: int
    home: str
    allocated: bool = False
    """A uid the cluster gave (core.tenants), not one of the node's own accounts."""

    def login_env(self) -> dict[str, str]:
        """The user's own home and name for its processes' environment, not the agent's."""
        return {"HOME": self.home, "USER": self.user, "LOGNAME": self.user}

    def popen_kwargs(self) -> dict:
        """For subprocess.Popen: become this user, with its group only (no supplementary ones)."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def resolve(job_user: str, agent_uid: int | None = None) -> Identity | None:
    """The identity ranks run as: None for "the agent's own" (``job_user`` empty), else the
    user, which the agent must be root to become (one clear line otherwise)."""
    if not job_user:
        return None
    agent_uid = os.geteuid() if agent_uid is None else agent_uid
    if job_user == tenants.OWNER:
        if agent_uid != 0:
            raise UsageError(f"MINIHPC_JOB_USER={job_user} runs each job as its owner, which needs the node "
                             f"agent to run as root (it runs as uid {agent_uid})")
        return None
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


def for_job(job_user: str, user: str, allocated_uid: int | None, service_user: str = "minihpc") -> Identity | None:
    """Who one job's ranks run as: the fixed job user (or the agent's own, None), or with
    ``%u`` the job's owner (core.tenants.choose: the node's ordinary account of that name,
    else the uid the cluster gave the user; never ``service_user``'s)."""
    if job_user != tenants.OWNER:
        return resolve(job_user)
    resolve(job_user)  # the agent must be root
    try:
        entry = pwd.getpwnam(user)
        host = (entry.pw_uid, entry.pw_gid, entry.pw_dir)
    except KeyError:
        host = None
    account = tenants.choose(user, host, allocated_uid, _service_uids(service_user))
    return Identity(account.user, account.uid, account.gid, account.home, account.allocated)


def _service_uids(service_user: str) -> set[int]:
    uids = {0, os.getuid(), os.geteuid()}
    try:
        uids.add(pwd.getpwnam(service_user).pw_uid)
    except KeyError:
        pass
    return uids


def ensure_account(identity: Identity | None) -> Identity | None:
    """A uid the cluster gave gets an entry in the node's user database the first time it runs
    there (useradd: its own group, its home, no login), so the job's ``id -un``, ``whoami``,
    getpass and ssh know who it is; the identity under that name. A node's own accounts are
    returned as they are, and so is one that cannot be added (the job still runs, nameless)."""
    if identity is None or os.geteuid() != 0 or not identity.allocated:
        return identity
    try:  # added before: no lock needed
        return dataclasses.replace(identity, user=pwd.getpwuid(identity.uid).pw_name)
    except KeyError:
        pass
    with _accounts_lock():  # the agents of one machine (local mode) share its user database
        try:
            return dataclasses.replace(identity, user=pwd.getpwuid(identity.uid).pw_name)
        except KeyError:
            pass
        name = tenants.account_name(identity.user, identity.uid, _name_taken(identity.user, identity))
        for argv in (["groupadd", "--gid", str(identity.gid), name],
                     ["useradd", "--uid", str(identity.uid), "--gid", str(identity.gid), "--no-create-home",
                      "--home-dir", identity.home, "--shell", "/usr/sbin/nologin", name]):
            try:
                subprocess.run(argv, capture_output=True, timeout=30, check=False)
            except (OSError, subprocess.SubprocessError) as exc:
                log.warning("cannot run %s: %s", argv[0], exc)
    try:
        return dataclasses.replace(identity, user=pwd.getpwuid(identity.uid).pw_name)
    except KeyError:
        log.warning("uid %s has no name on this node (useradd failed): its jobs run nameless", identity.uid)
        return identity


@contextlib.contextmanager
def _accounts_lock():
    """One agent at a time adds accounts on a machine: two agents adding the same user at once
    raced (one saw the other's new group, took the name for taken and added ``u<uid>``)."""
    os.makedirs(tenants.HOME_ROOT, mode=0o711, exist_ok=True)
    fd = os.open(os.path.join(tenants.HOME_ROOT, ".accounts.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _name_taken(name: str, identity: Identity) -> bool:
    """Whether ``name`` belongs to an account or group other than ``identity``'s own (a group
    of its gid left by an earlier, interrupted add is its own)."""
    try:
        if pwd.getpwnam(name).pw_uid != identity.uid:
            return True
    except KeyError:
        pass
    try:
        return grp.getgrnam(name).gr_gid != identity.gid
    except KeyError:
        return False


def make_home(identity: Identity | None) -> None:
    """The job user's home, made 0700 for it when the cluster gave it its uid (a node's own
    accounts have theirs): under a root-owned directory, so no job can plant anything there."""
    if identity is None or os.geteuid() != 0 or not identity.allocated:
        return
    os.makedirs(tenants.HOME_ROOT, mode=0o711, exist_ok=True)
    root = os.lstat(tenants.HOME_ROOT)
    if not stat.S_ISDIR(root.st_mode) or root.st_uid != 0:
        raise UsageError(f"{tenants.HOME_ROOT} is not a directory of root's; no job home is made there")
    try:
        os.mkdir(identity.home, 0o700)
    except FileExistsError:
        pass
    give(identity.home, identity)


def give(path: str, identity: Identity | None, mode: int = 0o700, gid: int | None = None) -> None:
    """Hand a directory the agent made for a job (its checkpoints, its home) to the job's user,
    private to it (``mode``; ``gid``: another group than the user's, which ``mode`` may let
    in). Through a descriptor opened without following a symlink, so a link a job planted at
    the path hands nothing else over."""
    if identity is None or os.geteuid() != 0:
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, identity.uid, identity.gid if gid is None else gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def lend(path: str | None, identity: Identity | None, mode: int = 0o750) -> None:
    """Let the job's user read a folder the daemons keep for it (its spool folder: the script,
    the working tree) through its group, and no one else. Its owner becomes the spool's (the
    daemons' user), whoever spooled it (the API runs as a uid of its own on hosts Ansible
    provisioned), so the job cannot change what it was submitted with, another user's job
    cannot read it, and the master can remove it with the job. Through a descriptor opened
    without following a symlink."""
    if path is None or identity is None or os.geteuid() != 0:
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, os.stat(os.path.dirname(os.path.abspath(path))).st_uid, identity.gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def parent_group(path: str) -> int:
    """The group of ``path``'s parent: the daemons' on the shared volumes."""
    return os.stat(os.path.dirname(os.path.abspath(path))).st_gid


def open_log(path: str):
    """The agent's log of a job on this node, for appending: 0640, owned like its folder (the
    daemons' user, so the API reads it) and no one else's to read; never through a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
    try:
        if os.geteuid() == 0:
            folder = os.stat(os.path.dirname(os.path.abspath(path)))
            try:
                os.fchown(fd, folder.st_uid, folder.st_gid)
                os.fchmod(fd, 0o640)
            except PermissionError:  # a shared filesystem that squashes root: its owner stays
                pass
        return os.fdopen(fd, "ab", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def like_parent(path: str, mode: int | None = None) -> None:
    """Give a directory the agent made the owner of its parent (a job's log folder stays the
    cluster user's, so the API, which runs as that user, can delete it with the job), and
    ``mode`` if given."""
    if os.geteuid() != 0:
        return
    parent = os.stat(os.path.dirname(os.path.abspath(path)))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        mine = os.fstat(fd)
        if (mine.st_uid, mine.st_gid) != (parent.st_uid, parent.st_gid):
            os.fchown(fd, parent.st_uid, parent.st_gid)
        if mode is not None:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)
