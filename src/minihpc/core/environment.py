"""``sbatch --export``: which of the submitter's variables a job gets (pure).

Slurm's default is ALL: the job sees the environment it was submitted from. minihpc does the
same, less what describes the submitting machine rather than the job (PATH, HOME, a virtualenv,
the terminal: a Compose node or a real host has its own) and minihpc's own settings and
credentials; a variable named explicitly (``--export=ALL,PATH=/opt/bin``) is always carried.
"""

from __future__ import annotations

import hashlib
import json
import re

from minihpc.core.errors import UsageError

EXPORT_MAX = 64 * 1024
"""Bytes of variables one job may carry (names and values): an environment, not a data set."""

MACHINE_ENV = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "HOSTNAME", "HOST", "TERM", "SHLVL", "_",
    "MAIL", "DISPLAY", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "PYTHONSAFEPATH", "LD_LIBRARY_PATH",
    "LD_PRELOAD", "TMPDIR", "COLUMNS", "LINES", "PS1", "PROMPT_COMMAND", "SSH_AUTH_SOCK", "SSH_CLIENT",
    "SSH_CONNECTION", "SSH_TTY", "REDISCLI_AUTH",
})
"""What ALL leaves out: the submitting machine's own paths and session."""
_LEFT_OUT_PREFIXES = ("MINIHPC_", "SLURM_", "SLURMD_", "REDIS_", "GRAFANA_", "XDG_", "DBUS_", "CONDA_", "BASH_FUNC_")
"""minihpc's settings and credentials, the submitter's own job (a submit from inside a job), and
the desktop session."""

DIGEST_CHARS = 32
"""Hex digits of SHA-256 that name a stored environment: 128 bits, no two ever the same."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FORMS = "ALL, NONE, or [ALL,]VAR[=value][,...]"


def carried(env: dict[str, str]) -> dict[str, str]:
    """The submitter's variables that ALL carries."""
    return {k: v for k, v in env.items()
            if k not in MACHINE_ENV and not k.startswith(_LEFT_OUT_PREFIXES) and _NAME.fullmatch(k)}


def parse_export(text: str | None, env: dict[str, str]) -> dict[str, str]:
    """The variables a job gets from ``--export=text`` submitted with environment ``env``
    (None: Slurm's default, ALL). UsageError for a bad name or too much."""
    words = [w.strip() for w in (text if text is not None else "ALL").split(",") if w.strip()]
    if not words:
        raise UsageError(f"--export needs a value: {_FORMS}")
    out: dict[str, str] = {}
    if words[0].upper() in ("NONE", "NIL"):
        if len(words) > 1:
            raise UsageError(f"invalid --export {text!r}: NONE takes no variables ({_FORMS})")
        return out
    if words[0].upper() == "ALL":
        out.update(carried(env))
        words = words[1:]
    for word in words:
        name, eq, value = word.partition("=")
        if not _NAME.fullmatch(name):
            raise UsageError(f"invalid --export {text!r}: {name!r} is not a variable name ({_FORMS})")
        if eq:
            out[name] = value
        elif name in env:
            out[name] = env[name]
    size = sum(len(k) + len(v) + 2 for k, v in out.items())
    if size > EXPORT_MAX:
        raise UsageError(f"--export would carry {size} bytes of variables, over {EXPORT_MAX}: "
                         "name the ones the job needs (--export=VAR,...) or use --export=NONE")
    return out


def stored(env: dict[str, str]) -> tuple[str, str]:
    """How ``env`` is kept apart from the jobs that carry it (state.environments): its digest
    and its text, the same for the same variables in any order; ("", "") for none."""
    if not env:
        return "", ""
    body = json.dumps(env, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:DIGEST_CHARS], body
