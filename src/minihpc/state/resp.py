"""RESP2 replies parsed in pure Python: :mod:`minihpc.state.wire`'s reader where hiredis is missing.

The same interface as ``hiredis.Reader``: ``feed(data)``, then ``gets()`` returns the next whole
reply, or False until one has arrived. An error reply is returned as a ``replyError`` instance.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """The bytes are not RESP."""


class _Short(Exception):
    """The buffer ends inside a reply."""


class Reader:
    def __init__(self, replyError=Exception):  # noqa: N803 - hiredis's keyword
        self.error = replyError
        self.buffer = bytearray()
        self.encoding: str | None = None

    def set_encoding(self, encoding: str | None = None) -> None:
        """Bulk strings decoded with ``encoding`` from now on (None: bytes)."""
        self.encoding = encoding

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def gets(self):
        try:
            reply, end = self._parse(0)
        except _Short:
            return False
        del self.buffer[:end]
        return reply

    def _line(self, at: int) -> tuple[bytes, int]:
        end = self.buffer.find(b"\r\n", at)
        if end < 0:
            raise _Short
        return bytes(self.buffer[at:end]), end + 2

    def _parse(self, at: int):
        line, at = self._line(at)
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest, at
        if kind == b"-":
            return self.error(rest.decode(errors="replace")), at
        if kind == b":":
            return int(rest), at
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None, at
            if len(self.buffer) < at + size + 2:
                raise _Short
            data = bytes(self.buffer[at:at + size])
            return (data.decode(self.encoding) if self.encoding else data), at + size + 2
        if kind == b"*":
            count = int(rest)
            if count < 0:
                return None, at
            items = []
            for _ in range(count):
                item, at = self._parse(at)
                items.append(item)
            return items, at
        raise ProtocolError(f"not a RESP reply: {line[:40]!r}")
