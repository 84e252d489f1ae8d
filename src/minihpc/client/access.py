"""Who is asking, and what they may change: one rule for every face.

A user is named by an API token (``minihpc token create USER``; the REST API's bearer token,
the CLI's ``MINIHPC_TOKEN``), or, for the CLI without a token, by the login it runs under.
A user owns the jobs they submit; only the owner or an admin may cancel, delete or purge
them, and only an admin drains or resumes nodes. As in Slurm, where root and SlurmUser are
operators, root and the cluster's service account (``minihpc``, the user the node images and
hosts run the daemons as) are admins on the CLI.
"""

from __future__ import annotations

import os
import pwd
import re
import time
from dataclasses import dataclass

from minihpc.core.errors import Forbidden, Unauthorized, UsageError
from minihpc.core.models import Job
from minihpc.state.store import Store

TOKEN_PREFIX = "mhpc_"
SERVICE_USER = "minihpc"
"""The cluster's own account (Dockerfile, Ansible hosts): an admin on the CLI, like SlurmUser."""
USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
"""A user name as useradd takes it."""


@dataclass(frozen=True)
class Principal:
    user: str
    admin: bool = False


def digest(token: str) -> str:
    import hashlib  # here, as secrets below: most CLI calls carry no token

    return hashlib.sha256(token.encode()).hexdigest()


def from_token(store: Store, token: str | None) -> Principal:
    """The user ``token`` names; Unauthorized if there is none or the cluster does not know it."""
    if not token:
        raise Unauthorized("an API token is needed (Authorization: Bearer TOKEN); make one with 'minihpc token create USER'")
    record = store.token_record(digest(token.strip()))
    if record is None:
        raise Unauthorized("the API token is not known to this cluster (revoked, or from another cluster)")
    return Principal(record["user"], bool(record.get("admin")))


def for_cli(store: Store) -> Principal:
    """The CLI's user: MINIHPC_TOKEN's if set, else the login it runs under (root and the
    service account are admins)."""
    token = os.environ.get("MINIHPC_TOKEN")
    if token:
        return from_token(store, token)
    login = login_name()
    return Principal(login, os.geteuid() == 0 or login == SERVICE_USER)


def login_name() -> str:
    """The account this process runs as, from the system's user database: not $USER, which
    anyone can set."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid{os.geteuid()}"


def can_change(who: Principal, job: Job) -> bool:
    """Whether ``who`` owns ``job`` or is an admin: who may change a job."""
    return who.admin or job.user == who.user


def may_change(who: Principal, job: Job) -> None:
    """Forbidden unless ``who`` may change ``job`` (can_change)."""
    if not can_change(who, job):
        raise Forbidden(f"job {job.id} belongs to {job.user}; {who.user} may not change it")


def must_be_admin(who: Principal, what: str) -> None:
    if not who.admin:
        raise Forbidden(f"{what} needs an admin token; {who.user} is not an admin")


def create_token(store: Store, user: str, admin: bool = False, note: str = "") -> str:
    """A new token for ``user``, shown once; only its digest is kept."""
    import secrets

    if not USER_NAME.fullmatch(user):
        raise UsageError(f"invalid user name {user!r}: letters, digits, '_', '.', '-', at most 32")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    store.add_token(digest(token), {"user": user, "admin": admin, "created_at": time.time(), "note": note})
    return token


def tokens(store: Store) -> list[dict]:
    """Every token's user, admin flag, creation time and digest prefix (its id), oldest first."""
    rows = [dict(record, id=d[:TOKEN_ID_LEN]) for d, record in store.token_records().items()]
    return sorted(rows, key=lambda r: r.get("created_at", 0))


TOKEN_ID_LEN = 12
"""A token's id: the first characters of its digest (``token list`` shows them)."""


def revoke(store: Store, user: str | None = None, token_id: str | None = None, note: str | None = None) -> int:
    """Remove every token of ``user``, the one whose id is ``token_id``, or every token made
    with ``note``; how many went."""
    if token_id is not None and len(token_id) != TOKEN_ID_LEN:
        raise UsageError(f"invalid token id {token_id!r}: expected the {TOKEN_ID_LEN} characters 'token list' shows")
    records = store.token_records()
    gone = [d for d, r in records.items()
            if (user is not None and r["user"] == user) or (token_id and d[:TOKEN_ID_LEN] == token_id)
            or (note and r.get("note") == note)]
    if not gone and note is None:
        raise UsageError(f"no token {'of user ' + repr(user) if user else 'with id ' + repr(token_id)}")
    return store.remove_tokens(gone)
