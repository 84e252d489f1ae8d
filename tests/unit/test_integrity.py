"""Issue 11, "integrity and bounds": the spooled script is durable and read-only, a node runs it
only if its sha256 is the one recorded at submit, and --ntasks-per-node has a cap."""

import hashlib
import os
import shutil
import stat

import pytest

from minihpc.client.submit import Request, tasks_limit, validate, write_spooled
from minihpc.core.config import load_settings, published_settings
from minihpc.core.errors import UsageError
from minihpc.core.launch_spec import LaunchSpec, script_changed
from minihpc.machine import files

SCRIPT = "/shared/jobs/spool/job-7/train.py"
RECORDED = hashlib.sha256(b"print('hello')\n").hexdigest()


def spec(**kw) -> LaunchSpec:
    base = dict(job_id=7, attempt=1, name="train", node="worker-node-1", node_rank=0, nodes=["worker-node-1"],
                master_addr="127.0.0.1", tasks_per_node=1, script=SCRIPT, script_sha256=RECORDED)
    base.update(kw)
    return LaunchSpec(**base)


def test_the_script_that_was_submitted_runs():
    assert script_changed(spec(), RECORDED) is None


def test_a_changed_script_is_refused_with_both_digests():
    actual = hashlib.sha256(b"import os; os.system('evil')\n").hexdigest()
    reason = script_changed(spec(), actual)
    assert reason == f"script {SCRIPT} changed after submit: sha256 {actual[:12]} != recorded {RECORDED[:12]}"


def test_a_script_gone_since_submit_is_refused():
    assert script_changed(spec(), None) == f"script {SCRIPT} is gone since submit (recorded sha256 {RECORDED[:12]})"


def test_a_task_without_a_recorded_digest_is_not_judged():
    """A launch task queued before sha256s travelled with it (an upgrade mid-queue)."""
    assert script_changed(spec(script_sha256=""), None) is None


def test_the_digest_travels_with_the_launch_task():
    payload = spec().to_payload()
    assert payload["script_sha256"] == RECORDED
    assert LaunchSpec.from_payload(payload) == spec()


def test_a_file_digest_is_its_bytes_and_none_when_it_cannot_be_read(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(b"print('hello')\n")
    assert files.sha256(path) == RECORDED
    assert files.sha256(tmp_path / "missing.py") is None
    assert files.sha256(tmp_path) is None  # a directory is not a script


def test_the_spooled_copy_is_read_only_whole_and_still_deletable(tmp_path):
    path = tmp_path / "spool" / "job-7" / "train.py"
    write_spooled(str(path), b"print('hello')\n")
    assert path.read_bytes() == b"print('hello')\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert [p.name for p in path.parent.iterdir()] == ["train.py"]  # no temporary file left behind
    shutil.rmtree(tmp_path / "spool" / "job-7")  # what deleting the job does
    assert not path.parent.exists()


def test_spooling_again_replaces_a_read_only_leftover(tmp_path):
    """A job id seen before (a cluster whose Redis was wiped): the old copy does not block it."""
    path = tmp_path / "job-1" / "train.py"
    write_spooled(str(path), b"old\n")
    write_spooled(str(path), b"new\n")
    assert path.read_bytes() == b"new\n" and stat.S_IMODE(path.stat().st_mode) == 0o444


def test_the_spool_is_fsynced_before_the_job_is_recorded(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    path = tmp_path / "spool" / "job-3" / "train.py"
    write_spooled(str(path), b"x = 1\n")
    # The file's bytes (still under its temporary name), then its directory, then the spool.
    assert os.path.dirname(synced[0]) == str(path.parent) and synced[0].endswith(".tmp")
    assert synced[1:] == [str(path.parent), str(path.parent.parent)]


# -- the cap on --ntasks-per-node -------------------------------------------------------------


def test_the_limit_is_the_largest_nodes_cpus_when_no_setting_says():
    assert tasks_limit({}, [2, 8, 4]) == (8, "the CPUs of the largest node")
    assert tasks_limit({"max_tasks_per_node": "0"}, [2, 0]) == (2, "the CPUs of the largest node")


def test_the_setting_wins_over_the_cpus_either_way():
    assert tasks_limit({"max_tasks_per_node": "1"}, [8]) == (1, "MINIHPC_MAX_TASKS_PER_NODE")
    assert tasks_limit({"max_tasks_per_node": "16"}, [2]) == (16, "MINIHPC_MAX_TASKS_PER_NODE")


def test_no_limit_without_nodes_or_setting():
    assert tasks_limit({}, []) is None
    assert tasks_limit({"max_tasks_per_node": "junk"}, [0]) is None


def test_a_request_over_the_limit_is_refused_with_the_value_and_the_limit():
    with pytest.raises(UsageError) as err:
        validate(Request(script="x.py", tasks_per_node=3), 3, (2, "the CPUs of the largest node"))
    assert str(err.value) == "--ntasks-per-node 3 is over the limit of 2 tasks per node (the CPUs of the largest node)"
    with pytest.raises(UsageError, match=r"over the limit of 1 task per node \(MINIHPC_MAX_TASKS_PER_NODE\)$"):
        validate(Request(script="x.py", tasks_per_node=2), 3, (1, "MINIHPC_MAX_TASKS_PER_NODE"))


def test_a_request_at_the_limit_or_without_one_passes():
    validate(Request(script="x.py", tasks_per_node=2), 3, (2, "the CPUs of the largest node"))
    validate(Request(script="x.py", tasks_per_node=64), 3, None)


def test_the_setting_is_a_whole_number_the_master_publishes():
    assert published_settings(load_settings(env={}))["max_tasks_per_node"] == "0"
    assert published_settings(load_settings(env={"MINIHPC_MAX_TASKS_PER_NODE": "4"}))["max_tasks_per_node"] == "4"
    with pytest.raises(UsageError, match="not a whole number"):
        load_settings(env={"MINIHPC_MAX_TASKS_PER_NODE": "2.5"})
    with pytest.raises(UsageError, match="at least 0"):
        load_settings(env={"MINIHPC_MAX_TASKS_PER_NODE": "-1"})
