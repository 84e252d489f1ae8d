"""Files a job may have written or replaced, read by the agent as root: never blocking, never
following a link, never more than asked (minihpc.machine.files.read_job_file), as the agent
reads a share's progress record and its launcher's result file."""

import json
import os

import pytest

from minihpc.machine import files
from minihpc.node import reports
from minihpc.node.share import RESULT_MAX, _read_result

pytestmark = pytest.mark.timeout(10)  # a FIFO read that blocked would hang here, not fail


def test_a_regular_file_is_read_up_to_one_byte_past_the_limit(tmp_path):
    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"abc")
    big.write_bytes(b"x" * 300_000)
    assert files.read_job_file(small, 10) == b"abc"
    assert len(files.read_job_file(big, 100_000)) == 100_001
    assert files.read_job_file(tmp_path / "gone", 10) is None


def test_a_fifo_a_symlink_or_a_folder_in_its_place_reads_as_nothing_at_once(tmp_path):
    fifo = tmp_path / "progress"
    os.mkfifo(fifo)  # no writer: a blocking open would wait for one for ever
    secret = tmp_path / "secret"
    secret.write_text("root's")
    link = tmp_path / "result.json"
    link.symlink_to(secret)
    assert files.read_job_file(fifo, 100) is None
    assert files.read_job_file(link, 100) is None
    assert files.read_job_file(tmp_path, 100) is None
    assert reports.read_record(str(fifo)) is None


def test_a_result_file_replaced_by_a_fifo_or_too_large_gives_the_launchers_return_code(tmp_path):
    path = tmp_path / "minihpc-1.json"
    os.mkfifo(path)
    result = _read_result(str(path), -9, rank=0)  # the launcher was killed; the job made a FIFO
    assert (result.exit_code, result.signal, result.rank) == (137, "SIGKILL", 0)
    assert not path.exists()  # removed, whatever it was
    path.write_text(json.dumps({"exit_code": 3, "signal": None, "rank": 1, "pad": "x" * RESULT_MAX}))
    assert _read_result(str(path), 0).exit_code == 0  # too large to be the launcher's: its return code
    path.write_text(json.dumps({"exit_code": 3, "signal": None, "rank": 1}))
    result = _read_result(str(path), 1)
    assert (result.exit_code, result.rank) == (3, 1)  # the launcher's own account


def test_a_rank_run_without_torchrun_is_dated_when_it_ended_not_when_its_node_had_swept_up(tmp_path):
    # A killed rank's peers fail a moment after it; the job's cause is the failure seen first.
    result = _read_result(str(tmp_path / "none.json"), -9, rank=0, ended_at=1000.5)
    assert (result.exit_code, result.signal, result.at) == (137, "SIGKILL", 1000.5)
    assert _read_result(str(tmp_path / "none.json"), 0, rank=0, ended_at=1000.5).at is None  # no failure, no date


def test_the_srun_socket_is_made_private_and_a_link_swapped_in_for_it_is_never_followed(tmp_path, monkeypatch):
    """The job owns the folder of its srun socket: were the socket replaced by a link between
    bind() and the agent's chown and chmod, root would change the link's target."""
    import socket
    import stat

    from minihpc.core.launch_spec import LaunchSpec
    from minihpc.node.identity import Identity
    from minihpc.node.jobdir import JobDir
    from minihpc.node.stepserver import StepServer

    target = tmp_path / "root-file"
    target.write_text("root's")
    target.chmod(0o644)
    before = os.stat(target)
    real_bind = socket.socket.bind

    def bind_then_swap(sock, path):  # the job wins the race the moment the socket exists
        real_bind(sock, path)
        os.unlink(path)
        os.symlink(target, path)

    monkeypatch.setattr(socket.socket, "bind", bind_then_swap)
    spec = LaunchSpec(job_id=1, attempt=1, name="j", node="n", node_rank=0, nodes=["n"], master_addr="h",
                      tasks_per_node=1, script="/s")
    who = Identity("job", 4242, 4242, "/nonexistent") if os.geteuid() == 0 else None
    server = StepServer(spec, None, JobDir(str(tmp_path)), who, 0.1)
    server.sock.close()
    after = os.stat(target)
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == \
        (before.st_uid, before.st_gid, stat.S_IMODE(before.st_mode))
    monkeypatch.setattr(socket.socket, "bind", real_bind)
    (tmp_path / "honest").mkdir()
    honest = StepServer(spec, None, JobDir(str(tmp_path / "honest")), who, 0.1)
    mode = os.lstat(tmp_path / "honest" / "srun.sock")
    assert stat.S_ISSOCK(mode.st_mode) and stat.S_IMODE(mode.st_mode) == 0o600
    if who is not None:
        assert (mode.st_uid, mode.st_gid) == (4242, 4242)
    honest.sock.close()
