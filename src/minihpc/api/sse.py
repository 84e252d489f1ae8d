"""Server-Sent Events as pure functions: framing an event, and a log stream's resumable
cursor (reading the logs is :mod:`minihpc.client.logs`'s)."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlencode

KEEPALIVE = b": keepalive\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""A stream's response headers: no caching, and no buffering by a proxy in front."""


def frame(event: str, data, event_id: str | None = None) -> bytes:
    """One event in text/event-stream form; ``data`` is sent as JSON on one line."""
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, sort_keys=True, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def encode_cursor(offsets: dict[str, int]) -> str:
    """Byte offsets per node as an event id (``node=offset&...``)."""
    return urlencode(sorted(offsets.items()))


def decode_cursor(text: str | None) -> dict[str, int]:
    """The offsets of a Last-Event-ID; anything unreadable counts as the start (all lines)."""
    if not text:
        return {}
    try:
        return {node: int(offset) for node, offset in parse_qsl(text, strict_parsing=True) if int(offset) >= 0}
    except ValueError:
        return {}
