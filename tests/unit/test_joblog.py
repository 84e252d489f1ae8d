"""A job's log is capped: the head as it comes, the tail at the end, the rest counted and
dropped; the relay drains the job's pipe whatever happens to the log."""

import errno
import logging
import os
import threading

import pytest

from minihpc.core.config import JOB_LOG_MAX, load_settings
from minihpc.core.errors import UsageError
from minihpc.node import joblog
from minihpc.node.joblog import Cap, dropped_line


def test_under_the_cap_everything_is_written_and_nothing_dropped():
    cap = Cap(100, tail=20)
    assert cap.take(b"a" * 50) == b"a" * 50
    assert cap.take(b"b" * 30) == b"b" * 30
    assert cap.take(b"c" * 20) == b""  # past the head: kept for the end
    assert (cap.written, cap.dropped) == (80, 0)
    assert cap.ending() == b"c" * 20


def test_exactly_the_head_then_exactly_the_tail_drops_nothing():
    cap = Cap(100, tail=20)
    assert cap.take(b"h" * 80) == b"h" * 80
    assert cap.take(b"t" * 20) == b""
    assert cap.ending() == b"t" * 20
    assert cap.dropped == 0


def test_one_byte_past_the_cap_is_dropped_and_said():
    cap = Cap(100, tail=20)
    cap.take(b"h" * 79 + b"\n")
    cap.take(b"x")
    cap.take(b"t" * 20)
    assert cap.dropped == 1
    assert cap.ending() == dropped_line(1, 100) + b"t" * 20


def test_a_chunk_across_the_boundary_is_split_and_the_tail_keeps_the_last_bytes():
    cap = Cap(100, tail=20)
    out = cap.take(bytes(range(70)) + b"a" * 60 + b"END")
    assert out == bytes(range(70)) + b"a" * 10
    assert cap.dropped == 53 - 20
    more = cap.take(b"z" * 1000 + b"the last line\n")
    assert more == b""
    assert cap.dropped == 53 - 20 + len(b"z" * 1000 + b"the last line\n")
    ending = cap.ending()
    assert ending.startswith(b"\n" + dropped_line(1047, 100))  # the head ended mid-line
    assert ending.endswith(b"z" * 6 + b"the last line\n")
    assert len(ending) == 1 + len(dropped_line(1047, 100)) + 20
    assert cap.written + 20 == 100  # the output in the log: never more than the cap


def test_the_line_says_what_was_dropped_and_how_to_change_it():
    assert dropped_line(123, 4096) == (
        b"=== minihpc: 123 bytes of output were dropped here: the log of each job is capped at 4096 bytes "
        b"per node (MINIHPC_JOB_LOG_MAX) ===\n")


def test_limit_zero_writes_everything():
    cap = Cap(0)
    assert cap.take(b"x" * 10_000_000) == b"x" * 10_000_000
    assert (cap.dropped, cap.ending()) == (0, b"")


def test_the_tail_is_a_megabyte_or_a_quarter_of_a_small_cap():
    assert joblog.tail_for(100 * 1024 * 1024) == joblog.TAIL == 1024 * 1024
    assert joblog.tail_for(4096) == 1024
    assert Cap(4096).head == 3072
    assert Cap(1).take(b"abc") == b"a"


def test_the_cap_is_a_whole_number_of_bytes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIHPC_STATE_DIR", str(tmp_path))
    assert load_settings(env={}).job_log_max == JOB_LOG_MAX == 100 * 1024 * 1024
    assert load_settings(env={"MINIHPC_JOB_LOG_MAX": "4194304"}).job_log_max == 4194304
    assert load_settings(env={"MINIHPC_JOB_LOG_MAX": "0"}).job_log_max == 0
    with pytest.raises(UsageError, match="job_log_max='1M' is not a whole number"):
        load_settings(env={"MINIHPC_JOB_LOG_MAX": "1M"})


def _feed(fd: int, total: int, block: int, last: bytes) -> threading.Thread:
    def write():
        with os.fdopen(fd, "wb") as w:
            sent = 0
            while sent < total:
                w.write(b"x" * min(block, total - sent))
                sent += block
            w.write(last)

    t = threading.Thread(target=write)
    t.start()
    return t


def _relay_into(out, limit: int, total: int, last: bytes):
    relay = joblog.start(out, limit, "job test")
    writer = _feed(os.dup(relay.input), total, 100_000, last)
    relay.close_input()
    writer.join(30)
    assert not writer.is_alive(), "the writer blocked: the relay stopped draining"
    return relay.join(10)


def test_five_megabytes_through_a_100_kb_cap(tmp_path):
    path = tmp_path / "job.log"
    with open(path, "ab", buffering=0) as out:
        out.write(b"=== header ===\n")
        summary = _relay_into(out, 100_000, 5_000_000, b"\nLAST LINE 42\n")
    data = path.read_bytes()
    line = dropped_line(summary.dropped, 100_000)
    assert summary.eof and summary.unwritten == 0
    assert len(data) <= len(b"=== header ===\n") + 100_000 + 1 + len(line)
    assert data.startswith(b"=== header ===\nxxx")
    assert line in data
    assert data.endswith(b"x" * 100 + b"\nLAST LINE 42\n")
    assert summary.dropped == 5_000_000 + len(b"\nLAST LINE 42\n") - 100_000


def test_without_a_cap_everything_reaches_the_log(tmp_path):
    path = tmp_path / "job.log"
    with open(path, "wb", buffering=0) as out:
        summary = _relay_into(out, 0, 3_000_000, b"end\n")
    assert path.stat().st_size == 3_000_004 == summary.written
    assert summary.dropped == 0


class FullDisk:
    def __init__(self):
        self.calls = 0

    def write(self, data):
        self.calls += 1
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_does_not_stop_the_draining(caplog):
    disk = FullDisk()
    with caplog.at_level(logging.WARNING, logger="minihpc.node.joblog"):
        summary = _relay_into(disk, 1_000_000, 5_000_000, b"end\n")
    assert summary.eof and summary.written == 0
    assert summary.unwritten > 0 and disk.calls > 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "No space left" in warnings[0].getMessage()


def test_a_log_closed_under_the_relay_is_no_crash(tmp_path):
    out = open(tmp_path / "job.log", "wb", buffering=0)  # noqa: SIM115
    out.close()
    summary = _relay_into(out, 0, 200_000, b"end\n")
    assert summary.eof and summary.unwritten == 200_004


def test_a_process_still_holding_the_pipe_does_not_hang_the_join(tmp_path, monkeypatch):
    monkeypatch.setattr(joblog, "POLL_INTERVAL", 0.05)
    path = tmp_path / "job.log"
    with open(path, "wb", buffering=0) as out:
        relay = joblog.start(out, 0, "job test")
        held = os.dup(relay.input)
        os.write(held, b"still here\n")
        summary = relay.join(0.2)
        os.close(held)
    assert not summary.eof
    assert path.read_bytes() == b"still here\n"
    assert not relay._thread.is_alive()
    with pytest.raises(OSError):  # the relay closed its end of the pipe
        os.fstat(relay._output)
