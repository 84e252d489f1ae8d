"""Whose uid a job's ranks run as, when every user's jobs run as that user (issue 33).

``MINIHPC_JOB_USER=%u`` (:data:`OWNER`) asks for it: a job runs as the account of the user who
submitted it, as Slurm runs it. The account comes from the node's user database when the user
has an ordinary account there (real hosts, as Slurm's nodes do), else from the cluster: the
master gives each user a uid of its own once (:data:`ALLOCATED_UID_BASE` upwards, kept in
Redis), so the same user is the same uid on every node of a Compose cluster, whose containers
know no users. Root, system accounts and the daemons' service account are never a job's user:
a user with such a name (``root`` on a laptop, ``minihpc`` in the control container) gets an
allocated uid instead, which can do nothing the service account can.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from minihpc.core.errors import UsageError

OWNER = "%u"
"""MINIHPC_JOB_USER's value for "each job as its own user" (Slurm's %u: the job's user)."""

UID_MIN = 1000
"""The lowest uid of an ordinary account (login.defs' UID_MIN): below it are root and the system's."""

ALLOCATED_UID_BASE = 200_000
"""The first uid the cluster gives a user without an account on the nodes: above ordinary
accounts and the usual subordinate-uid ranges (100000 + 65536 per user), so it names no one
else on a node. Each user's uid is also its group id."""

HOME_ROOT = "/var/lib/minihpc-homes"
"""Where a user with an allocated uid gets a home (``<HOME_ROOT>/<uid>``, 0700): a place only
root can create things in, never the shared volumes or /tmp."""


@dataclass(frozen=True)
class Account:
    user: str
    uid: int
    gid: int
    home: str
    allocated: bool
    """True for a uid the cluster gave; False for the node's own account of that user."""


def choose(user: str, host: tuple[int, int, str] | None, allocated_uid: int | None,
           service_uids: set[int], home_root: str = HOME_ROOT) -> Account:
    """The account a job of ``user`` runs as. ``host``: the node's (uid, gid, home) for that
    name, if it has one; ``allocated_uid``: the uid the cluster gave the user (None: none was
    given, a master from before this rule); ``service_uids``: the daemons' and agent's uids."""
    if host is not None:
        uid, gid, home = host
        if UID_MIN <= uid < ALLOCATED_UID_BASE and uid not in service_uids and gid != 0:
            return Account(user, uid, gid, home, allocated=False)
    if allocated_uid is None or allocated_uid < ALLOCATED_UID_BASE:
        raise UsageError(f"the job's user {user!r} has no ordinary account on this node and the cluster "
                         f"gave it no uid (is the master older than its nodes?)")
    return Account(user, allocated_uid, allocated_uid, os.path.join(home_root, str(allocated_uid)), allocated=True)


def allocated(sequence: int) -> int:
    """The uid of the ``sequence``-th user (1, 2, ...) the cluster gave one to."""
    if sequence < 1:
        raise ValueError(f"sequence {sequence} < 1")
    return ALLOCATED_UID_BASE + sequence - 1


NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
"""A name useradd takes everywhere (Debian's NAME_REGEX, without the trailing $)."""


def account_name(user: str, uid: int, taken: bool) -> str:
    """The name a cluster uid gets in a node's user database (so ``id -un``, ``whoami`` and
    ssh know it): the user's own, unless the node already has an account or group of that
    name (``taken``: root, the service account) or useradd would refuse it; then ``u<uid>``."""
    return user if NAME.fullmatch(user) and not taken else f"u{uid}"
