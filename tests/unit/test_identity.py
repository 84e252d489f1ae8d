"""Who a job's ranks run as (minihpc.node.identity): never root, never a user the agent
cannot become."""

import os
import pwd

import pytest

from minihpc.core.errors import UsageError
from minihpc.node import identity

NOBODY = pwd.getpwnam("nobody")


def test_no_job_user_means_the_agents_own():
    assert identity.resolve("", agent_uid=0) is None


def test_a_root_agent_runs_ranks_as_the_job_user_with_its_group_only():
    who = identity.resolve("nobody", agent_uid=0)
    assert (who.uid, who.gid) == (NOBODY.pw_uid, NOBODY.pw_gid)
    assert who.popen_kwargs() == {"user": NOBODY.pw_uid, "group": NOBODY.pw_gid, "extra_groups": []}
    assert identity.resolve(str(NOBODY.pw_uid), agent_uid=0) == who


@pytest.mark.parametrize("user, words", [
    ("no-such-user-here", "no such user"),
    ("root", "is root"),
    ("0", "is root"),
])
def test_a_job_user_that_cannot_be_used_is_one_clear_line(user, words):
    with pytest.raises(UsageError, match=words):
        identity.resolve(user, agent_uid=0)


def test_an_unprivileged_agent_cannot_run_jobs_as_another_user():
    with pytest.raises(UsageError, match="needs the node agent to run as root"):
        identity.resolve("nobody", agent_uid=NOBODY.pw_uid + 1)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_job_gets_its_checkpoint_folder_and_logs_stay_the_cluster_users(tmp_path):
    who = identity.resolve("nobody", agent_uid=0)
    ckpt = tmp_path / "job-1"
    ckpt.mkdir()
    identity.give(str(ckpt), who)
    assert ckpt.stat().st_uid == NOBODY.pw_uid
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(logs, NOBODY.pw_uid, NOBODY.pw_gid)  # the cluster user's log folder
    job_logs = logs / "job-1"
    job_logs.mkdir()
    identity.like_parent(str(job_logs))
    assert (job_logs.stat().st_uid, job_logs.stat().st_gid) == (NOBODY.pw_uid, NOBODY.pw_gid)


def test_the_job_user_comes_from_the_environment_as_text():
    from minihpc.core.config import load_settings

    assert load_settings(env={"MINIHPC_JOB_USER": "job", "MINIHPC_REDIS_URL": "redis://x"}).job_user == "job"
    assert load_settings(env={"MINIHPC_REDIS_URL": "redis://x"}).job_user == ""
