"""The shared secret between the health monitor and the restart proxy: every POST to the proxy
carries ``Authorization: Bearer <token>``; without the right one, nothing is restarted.

Both sides read it the same way: the file named by ``--token-file`` or
``MINIHPC_RESTART_TOKEN_FILE`` (a Compose secret, out of every process's environment), else
``MINIHPC_RESTART_TOKEN``. Generate one with
``python3 -c 'import secrets; print(secrets.token_urlsafe(32))'``.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from pathlib import Path

from minihpc.core.errors import UsageError

TOKEN_ENV = "MINIHPC_RESTART_TOKEN"
"""The token itself, for where no file can be mounted."""

TOKEN_FILE_ENV = "MINIHPC_RESTART_TOKEN_FILE"
"""A file holding the token (preferred: it is not in any process's environment)."""

MIN_LENGTH = 16
"""Shortest token accepted: a generated one is 43 characters; a word typed by hand is refused."""

GENERATE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def load_token(env: Mapping[str, str], token_file: str | None = None) -> str:
    """The token from ``token_file``, else the file or value the environment names; UsageError
    naming where it looked when there is none or it is too short to be a generated one."""
    path = token_file or env.get(TOKEN_FILE_ENV)
    if path:
        try:
            token, where = Path(path).read_text().strip(), f"token file {path}"
        except OSError as exc:
            raise UsageError(f"restart token file {path} cannot be read ({exc.strerror or exc})") from None
    else:
        token, where = (env.get(TOKEN_ENV) or "").strip(), TOKEN_ENV
    if not token:
        raise UsageError(f"no restart token: {where} is empty or unset; expected a generated token "
                         f"in {TOKEN_ENV}, or in a file named by {TOKEN_FILE_ENV} ({GENERATE})")
    if len(token) < MIN_LENGTH:
        raise UsageError(f"restart token from {where} has {len(token)} characters; expected at least "
                         f"{MIN_LENGTH}, a generated one ({GENERATE})")
    return token


def bearer(token: str) -> str:
    """The Authorization header's value that carries ``token``."""
    return f"Bearer {token}"


def authorized(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries exactly ``token`` (compared in constant time)."""
    if not header:
        return False
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())
