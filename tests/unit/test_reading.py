"""Reading is owned (client.reading, issue 33): another user's job keeps squeue's fields only."""

import dataclasses

import pytest

from minihpc.client import reading
from minihpc.client.access import Principal
from minihpc.core.errors import Forbidden
from minihpc.core.models import Job


def _job() -> Job:
    return Job(id=7, name="train", user="alice", script="/spool/job-7/train.py", script_source="/home/alice/train.py",
               script_sha256="ab" * 32, args=["--hf-token", "hf_secret"], workdir="/home/alice",
               submit_dir="/home/alice", output="out-%j.txt", environment={"WANDB_API_KEY": "k"}, nodes=["n1"])


def test_every_field_of_a_job_is_classified_so_a_new_one_is_a_decision():
    assert reading.PUBLIC | reading.PRIVATE == {f.name for f in dataclasses.fields(Job)}
    assert {"id", "name", "user", "state", "nodes", "reason", "submitted_at"} <= reading.PUBLIC


def test_the_owner_and_admins_read_all_and_others_see_squeues_fields():
    job = _job()
    assert reading.redacted(Principal("alice"), job) is job
    assert reading.redacted(Principal("root", admin=True), job) is job
    seen = reading.redacted(Principal("bob"), job)
    assert (seen.id, seen.name, seen.user, seen.nodes) == (7, "train", "alice", ["n1"])
    assert (seen.args, seen.environment, seen.script, seen.script_source, seen.workdir, seen.output) == \
           ([], {}, "", "", "", "")
    assert "hf_secret" not in str(seen.to_json()) and job.args == ["--hf-token", "hf_secret"]


def test_logs_and_reports_of_anothers_job_are_one_clear_refusal():
    reading.may_read(Principal("alice"), _job())
    with pytest.raises(Forbidden, match=r"^job 7 belongs to alice; its logs, args and reports are its owner's and "
                                        r"admins' \(bob is neither\)$"):
        reading.may_read(Principal("bob"), _job())
