"""Bearer tokens: every route but ``/health`` and the page's files names its user with one."""

from __future__ import annotations

from fastapi import Request

from minihpc.client import access


def principal(request: Request) -> access.Principal:
    """The user the request's ``Authorization: Bearer TOKEN`` names (401 without one)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return access.from_token(request.app.state.store, token.strip() if scheme.lower() == "bearer" else "")
