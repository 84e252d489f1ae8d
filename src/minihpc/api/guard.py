"""What every response and request passes through: a cap on request bodies (413 before a
large upload is read into memory) and the headers that keep the page to its own files (a
Content-Security-Policy with no inline code, no MIME sniffing, no framing, no referrer).

A plain ASGI middleware, not Starlette's BaseHTTPMiddleware: that one buffers responses and
would hold back the server-sent event streams."""

from __future__ import annotations

import json

from minihpc.client.submit import SCRIPT_MAX

BODY_MAX = SCRIPT_MAX + (64 << 10)
"""Bytes a request body may have: the largest script plus room for the form around it."""

HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


def declared_length(scope: dict) -> int | None:
    """The request's Content-Length, or None when it has none (or an unreadable one)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def with_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The response's headers plus :data:`HEADERS` (a route's own value wins)."""
    present = {name.lower() for name, _ in headers}
    return list(headers) + [(k.encode(), v.encode()) for k, v in HEADERS.items() if k.encode() not in present]


def replay(first: dict, receive):
    """A receive that gives ``first`` once, then what the client sends (its disconnect)."""
    pending = [first]

    async def receive_again():
        return pending.pop() if pending else await receive()
    return receive_again


class Guard:
    def __init__(self, app, body_max: int = BODY_MAX):
        self.app, self.body_max = app, body_max

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = dict(message, headers=with_headers(message.get("headers", [])))
            await send(message)

        length = declared_length(scope)
        if length is not None and length > self.body_max:
            return await self.refuse(send_with_headers)
        if length is None:  # chunked, or no body: read it here, up to the cap, then replay it
            first = await self.read_body(receive)
            if first is None:
                return await self.refuse(send_with_headers)
            receive = replay(first, receive)
        await self.app(scope, receive, send_with_headers)

    async def read_body(self, receive) -> dict | None:
        """The request's whole body as one message (or the disconnect that came instead);
        None when it passes the cap."""
        parts, total = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message
            parts.append(message.get("body", b""))
            total += len(parts[-1])
            if total > self.body_max:
                return None
            if not message.get("more_body"):
                return {"type": "http.request", "body": b"".join(parts), "more_body": False}

    async def refuse(self, send) -> None:
        body = json.dumps({"error": f"the request body is over {self.body_max} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
