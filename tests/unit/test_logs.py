"""Reading a job's logs, which jobs themselves write: whole lines only until the job is over,
tails, and nothing read through a symlink or from a FIFO a job put in a log's place."""

import os

from minihpc.client.logs import NODE_NAME, chunks, read_from, size, tail_text, whole_lines


def test_only_whole_lines_are_sent_until_the_job_is_over():
    assert whole_lines(b"one\ntwo\nthr") == [b"one", b"two"]
    assert whole_lines(b"one\ntwo\nthr", final=True) == [b"one", b"two", b"thr"]
    assert whole_lines(b"partial") == []
    assert whole_lines(b"") == []


def test_tail_keeps_the_last_lines_and_never_a_cut_one(tmp_path):
    log = tmp_path / "n.log"
    log.write_text("a\nb\nc\n")
    assert tail_text(log, 2) == "b\nc\n"
    assert tail_text(log, None) == "a\nb\nc\n"
    assert tail_text(log, 0) == ""
    log.write_text("first-long-line\nsecond\n")
    assert tail_text(log, None, limit=10) == "second\n", "a line cut by the read limit is left out"
    assert tail_text(tmp_path / "missing.log", 5) == ""


def test_a_log_is_read_only_if_it_is_a_regular_file(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("password\n")
    link = tmp_path / "link.log"
    link.symlink_to(secret)
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    for path in (link, fifo, tmp_path / "missing.log", tmp_path):
        assert read_from(path, 0) == b"" and size(path) == 0, path
    assert tail_text(link, None) == ""


def test_a_large_log_comes_in_bounded_reads(tmp_path):
    log = tmp_path / "n.log"
    log.write_bytes(b"x" * 2500)
    assert read_from(log, 2000, limit=1000) == b"x" * 500
    assert [len(c) for c in chunks(log)] == [2500]


def test_node_names_cannot_leave_the_log_directory():
    assert NODE_NAME.fullmatch("worker-node-1") and NODE_NAME.fullmatch("gpu.node_2")
    for bad in ("..", "../etc", "a/b", "", ".hidden"):
        assert not NODE_NAME.fullmatch(bad), bad
