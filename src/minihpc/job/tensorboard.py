"""TensorBoard event files without TensorBoard: TFRecord framing and the few Event protobuf
fields a scalar needs, written (and read back) by hand.

A record: uint64 length, masked crc32c of the length, the data, masked crc32c of the data.
The first record is Event{file_version: "brain.Event:2"}; each scalar is
Event{wall_time: 1 (double), step: 2 (int64), summary: 5 {value: 1 {tag: 1, simple_value: 2 (float)}}}.
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_bytes(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def event(wall_time: float, step: int = 0, file_version: str | None = None,
          scalars: dict[str, float] | None = None) -> bytes:
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3 | 0) + _varint(step)
    if file_version is not None:
        out += _field_bytes(3, file_version.encode())
    if scalars:
        values = b"".join(_field_bytes(1, _field_bytes(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", v))
                          for tag, v in scalars.items())
        out += _field_bytes(5, values)
    return out


class EventWriter:
    """One ``events.out.tfevents.*`` file that TensorBoard reads; scalars appended per step."""

    def __init__(self, directory: str | Path):
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = Path(directory) / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
        self._fh = open(self.path, "wb")
        self._fh.write(frame(event(time.time(), file_version="brain.Event:2")))

    def scalars(self, step: int, values: dict[str, float], wall_time: float | None = None) -> None:
        self._fh.write(frame(event(wall_time or time.time(), step, scalars=values)))
        self._fh.flush()  # TensorBoard follows the file while the job runs

    def close(self) -> None:
        self._fh.close()


# -- reading back (tests, and anyone without TensorBoard) --

def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def fields(data: bytes) -> list[tuple[int, object]]:
    """(field number, value) of a protobuf message: ints, floats/doubles, bytes."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 1:
            value, pos = struct.unpack("<d", data[pos:pos + 8])[0], pos + 8
        elif wire == 5:
            value, pos = struct.unpack("<f", data[pos:pos + 4])[0], pos + 4
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        else:
            raise ValueError(f"protobuf wire type {wire} is not supported")
        out.append((number, value))
    return out


def read_records(path: str | Path) -> list[bytes]:
    """The records of a TFRecord file; ValueError on a bad checksum."""
    data, pos, out = Path(path).read_bytes(), 0, []
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        if struct.unpack("<I", data[pos + 8:pos + 12])[0] != masked_crc(header):
            raise ValueError(f"{path}: bad length checksum at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        if struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])[0] != masked_crc(body):
            raise ValueError(f"{path}: bad data checksum at byte {pos}")
        out.append(body)
        pos += 16 + length
    return out


def read_scalars(path: str | Path) -> tuple[str | None, list[tuple[int, str, float]]]:
    """The file version and every (step, tag, value)."""
    version, scalars = None, []
    for record in read_records(path):
        ev = dict(fields(record))
        if 3 in ev:
            version = ev[3].decode()
        for number, summary in fields(record):
            if number != 5:
                continue
            for _n, value in fields(summary):
                v = dict(fields(value))
                scalars.append((ev.get(2, 0), v[1].decode(), v[2]))
    return version, scalars
