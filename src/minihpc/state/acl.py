"""Redis ACL users, one per role, each with the commands and keys that role needs.

No process holds more than its role: a node agent that ran a job's code by mistake could still
not read or mint API tokens, and no role can wipe, reconfigure or debug Redis (the classic
``CONFIG SET dir`` + ``SAVE`` takeover included). The default user is off.

Roles:
- ``master``: the scheduler and health monitor (and the CLI run beside it, where operators
  act for the cluster): every minihpc and rq key;
- ``node``: a node agent: every minihpc key but the API tokens, and rq's;
- ``cli``: the CLI, the operators' and users' face on the host: minihpc's keys, rq's read only;
- ``api``: the REST API: as ``cli``, but the API tokens, the cluster's settings and the users'
  uids are read only to it -- it checks tokens, never makes them (an admin's CLI does), and a
  flaw in it cannot mint an admin or change the cluster;
- ``exporter``: whatever only looks (the restart proxy, a healthcheck): read-only.

The ACL file holds each password's SHA-256 only, so it may lie beside the configuration.
``python3 -m minihpc.state.acl`` prints the file for the passwords in the environment
(``REDIS_<ROLE>_PASSWORD``): the Compose cluster's ``make up`` does that (stdlib only).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Mapping

from minihpc.state import keys

ROLES = ("master", "node", "cli", "api", "exporter")

DENIED = ("flushall", "flushdb", "config", "debug", "module", "shutdown", "acl", "keys", "monitor",
          "save", "bgsave", "replicaof", "slaveof", "migrate", "restore", "swapdb")
"""Commands no role has: all of them are in ``@dangerous`` too; naming them keeps them out
should a category change."""

RQ_KEYS = "rq:*"
"""Every key and channel rq uses (queues, jobs, registries, workers, its pub/sub commands)."""

RQ_EXTRA = ("+info", "+client|setname", "+client|getname")
"""Commands rq calls that ``@dangerous`` holds: the server's version (``INFO server``) and
naming its connection."""


def _pattern(template: str) -> str:
    """A key template of :mod:`keys` as a glob: every ``{n}`` a ``*``."""
    return re.sub(r"\{[^}]*\}", "*", template)


def minihpc_keys(exclude: tuple[str, ...] = ()) -> list[str]:
    """Globs of every key in :mod:`keys` but ``exclude`` (templates), in declaration order."""
    templates = [v for k, v in vars(keys).items() if k.isupper() and isinstance(v, str) and v.startswith("minihpc:")]
    return [_pattern(t) for t in templates if t not in exclude and t != keys.LIVE]


def rules(role: str) -> list[str]:
    """The ACL rules of ``role`` (after ``reset``): keys, channels, then commands."""
    denied = [f"-{c}" for c in DENIED]
    if role == "master":
        return ["~minihpc:*", f"~{RQ_KEYS}", f"&{keys.LIVE}", f"&{RQ_KEYS}", "+@all", "-@dangerous", *RQ_EXTRA, *denied]
    if role == "node":
        return [*(f"~{p}" for p in minihpc_keys(exclude=(keys.TOKENS,))), f"~{RQ_KEYS}", f"&{keys.LIVE}",
                f"&{RQ_KEYS}", "+@all", "-@dangerous", *RQ_EXTRA, *denied]
    if role == "cli":
        return ["~minihpc:*", f"%R~{RQ_KEYS}", f"&{keys.LIVE}", "+@all", "-@dangerous", *denied]
    if role == "api":
        fixed = (keys.TOKENS, keys.CLUSTER, keys.USER_UIDS, keys.USER_UID_SEQ)
        return [*(f"~{p}" for p in minihpc_keys(exclude=fixed)), *(f"%R~{_pattern(t)}" for t in fixed),
                f"%R~{RQ_KEYS}", f"&{keys.LIVE}", "+@all", "-@dangerous", *denied]
    if role == "exporter":
        return ["%R~minihpc:*", f"%R~{RQ_KEYS}", "+@read", "+@connection", "-@dangerous", *denied]
    raise ValueError(f"unknown Redis role {role!r}; the roles are {', '.join(ROLES)}")


def acl_file(passwords: Mapping[str, str]) -> str:
    """The ACL file for ``passwords`` (role -> password): every role, the default user off."""
    missing = [r for r in ROLES if not passwords.get(r)]
    if missing:
        raise ValueError(f"no Redis password for the role(s) {', '.join(missing)}")
    # The default user is off and has no password: no connection can be it. It keeps every
    # permission because Redis 7.0 replays the AOF as the default user and checks the ACL at
    # each replayed EXEC: with none, every transaction is dropped when Redis restarts (seen
    # with Debian's 7.0.15: "NOPERM ACLs rules changed ... after processing the command 'exec'").
    lines = ["user default off resetpass ~* &* +@all"]
    for role in ROLES:
        digest = hashlib.sha256(passwords[role].encode()).hexdigest()
        lines.append(" ".join(["user", role, "reset", "on", f"#{digest}", *rules(role)]))
    return "\n".join(lines) + "\n"


def password_variable(role: str) -> str:
    """The environment variable (and .env key) holding ``role``'s password."""
    return f"REDIS_{role.upper()}_PASSWORD"


def url(role: str, password: str, host: str, port: int, db: int = 0) -> str:
    """The Redis URL a process of ``role`` connects with."""
    return f"redis://{role}:{password}@{host}:{port}/{db}"


def main(env: Mapping[str, str] = os.environ) -> int:
    try:
        sys.stdout.write(acl_file({r: env.get(password_variable(r), "") for r in ROLES}))
    except ValueError as exc:
        print(f"minihpc: {exc} (set {', '.join(password_variable(r) for r in ROLES)})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
