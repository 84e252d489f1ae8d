"""Bearer tokens: every route but ``/health`` and the page's files names its user with one."""

from __future__ import annotations

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from minihpc.client import access

bearer = HTTPBearer(auto_error=False, description="A token from `minihpc token create USER`.")
"""Declares the scheme in /openapi.json (the docs' Authorize button); the check is ours."""


def principal(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> access.Principal:
    """The user the request's ``Authorization: Bearer TOKEN`` names (401 without one)."""
    return access.from_token(request.app.state.store, credentials.credentials.strip() if credentials else "")
