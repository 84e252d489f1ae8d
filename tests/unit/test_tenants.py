"""Whose uid a job runs as when each job runs as its own user (core.tenants, issue 33)."""

import pytest

from minihpc.core import tenants
from minihpc.core.errors import UsageError

SERVICE = {0, 10001}


def test_a_user_with_an_ordinary_account_on_the_node_runs_as_it():
    account = tenants.choose("alice", (1001, 1001, "/home/alice"), 200_000, SERVICE)
    assert (account.uid, account.gid, account.home, account.allocated) == (1001, 1001, "/home/alice", False)


@pytest.mark.parametrize("host", [(0, 0, "/root"), (1, 1, "/usr/sbin"), (999, 999, "/var/lib/x"),
                                  (10001, 10001, "/var/lib/minihpc"), (1005, 0, "/home/x")],
                         ids=["root", "daemon", "system", "service", "root-group"])
def test_root_system_and_service_accounts_are_never_a_jobs_user(host):
    account = tenants.choose("root", host, 200_003, SERVICE)
    assert (account.uid, account.gid, account.allocated) == (200_003, 200_003, True)
    assert account.home == f"{tenants.HOME_ROOT}/200003"


def test_a_user_without_an_account_runs_as_the_uid_the_cluster_gave_it():
    assert tenants.choose("bob", None, 200_001, SERVICE).uid == 200_001


@pytest.mark.parametrize("given", [None, 0, 10002, 199_999])
def test_without_a_cluster_uid_a_user_without_an_account_is_one_clear_line(given):
    with pytest.raises(UsageError, match=r"^the job's user 'bob' has no ordinary account on this node"):
        tenants.choose("bob", None, given, SERVICE)


def test_cluster_uids_count_up_from_the_base():
    assert [tenants.allocated(n) for n in (1, 2, 3)] == [200_000, 200_001, 200_002]
    with pytest.raises(ValueError):
        tenants.allocated(0)


@pytest.mark.parametrize("user, taken, name", [("alice", False, "alice"), ("minihpc", True, "u200001"),
                                               ("Bob.Smith", False, "u200001"), ("x" * 40, False, "u200001")])
def test_a_cluster_uid_is_named_on_a_node_by_its_user_unless_the_name_is_taken_or_invalid(user, taken, name):
    assert tenants.account_name(user, 200_001, taken) == name


def test_a_local_cluster_says_whose_uid_its_jobs_run_under():
    from minihpc.ops.local import who_runs_jobs

    assert who_runs_jobs("", 1000) == "jobs run as you, as any program you start would: one user's cluster"
    assert who_runs_jobs("", 0).startswith("jobs run as root")
    assert who_runs_jobs("%u", 0).startswith("jobs run as their owners (MINIHPC_JOB_USER=%u)")
    assert who_runs_jobs("job", 0) == "every job runs as job (MINIHPC_JOB_USER)"


def test_a_folder_closed_to_other_users_on_the_way_is_named():
    import shutil
    import tempfile
    from pathlib import Path

    from minihpc.machine.files import closed_to_others

    top = Path(tempfile.mkdtemp())  # in /tmp: pytest's own folder is closed to others
    try:
        inner = top / "open" / "venv"
        inner.mkdir(parents=True)
        for folder in (top, top / "open", inner):
            folder.chmod(0o755)
        assert closed_to_others(inner) is None
        (top / "open").chmod(0o710)  # its group may pass, others not
        assert closed_to_others(inner) == str(top / "open")
        (top / "open").chmod(0o711)  # passing through is enough: no listing needed
        assert closed_to_others(inner) is None
        assert closed_to_others(top / "missing") == str(top / "missing")
    finally:
        shutil.rmtree(top)


def test_the_spool_folder_of_a_job_is_its_scripts_own():
    from minihpc.core.launch_spec import spool_folder

    class Spec:
        job_id = 7
        script = "/shared/jobs/spool/job-7/train.py"

    assert spool_folder(Spec) == "/shared/jobs/spool/job-7"
    Spec.script = "/home/alice/train.py"
    assert spool_folder(Spec) is None
