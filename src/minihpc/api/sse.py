"""Server-Sent Events as pure functions: framing an event, a log stream's resumable cursor,
and cutting a log's new bytes into whole lines."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlencode

KEEPALIVE = b": keepalive\n\n"


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


def whole_lines(data: bytes, final: bool = False) -> tuple[list[bytes], int]:
    """The complete lines in ``data`` (without their newline) and how many bytes they used; a
    partial last line waits for its end unless ``final`` (the job is over)."""
    lines = data.split(b"\n")
    rest = lines.pop()
    used = len(data) - len(rest)
    if final and rest:
        lines.append(rest)
        used = len(data)
    return lines, used


def tail_lines(text: str, count: int | None) -> str:
    """The last ``count`` lines of ``text`` (all of it for None)."""
    if count is None:
        return text
    if count <= 0:
        return ""
    lines = text.splitlines(keepends=True)
    return "".join(lines[-count:])
