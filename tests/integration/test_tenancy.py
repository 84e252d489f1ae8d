"""Each job as its own user (issue 33), with real processes and a real Redis: a user's uid
is given once and kept; whatever a job leaves below the agent is ended however it hides, and
its temporary files go; a directory handed to a job is its user's alone."""

import os
import stat
import subprocess
import sys
import textwrap
import threading

import pytest

from minihpc.core import tenants
from minihpc.node import identity

pytestmark = pytest.mark.integration
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run processes as another uid")


def test_each_user_gets_a_uid_once_and_the_same_one_after(store):
    got: dict[str, list[int]] = {"alice": [], "bob": []}

    def ask(user):
        got[user].append(store.user_uid(user))

    threads = [threading.Thread(target=ask, args=(u,)) for u in ("alice", "bob") * 8]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got["alice"])) == 1 and len(set(got["bob"])) == 1, got
    # First asks at once may use up sequence numbers (each HSETNX that lost one): never a uid
    # twice, and none past the sequence the 16 asks could have drawn.
    assert got["alice"][0] != got["bob"][0]
    assert {got["alice"][0], got["bob"][0]} <= {tenants.allocated(n) for n in range(1, len(threads) + 1)}
    assert max(got["alice"][0], got["bob"][0]) <= tenants.allocated(16)
    assert store.user_uid("alice") == got["alice"][0]
    assert store.user_uids() == {"alice": got["alice"][0], "bob": got["bob"][0]}


SCENARIO = """
import os, signal, sys, time
from minihpc.machine.processes import become_subreaper
from minihpc.node import sweep
uid, whole_uid = int(sys.argv[1]), sys.argv[2] == "whole"
assert become_subreaper()
for name in ("/tmp/minihpc-test-left-%d" % uid, "/dev/shm/minihpc-test-left-%d" % uid):
    open(name, "w").close()
    os.chown(name, uid, uid)
if os.fork() == 0:  # the job: as the uid, a daemon that ignores SIGTERM, leaves its session and re-forks
    os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            if os.fork():
                os._exit(0)
            time.sleep(0.05)
    os._exit(0)
os.wait()
time.sleep(0.5)
print("before", max(len(sweep.strays(uid)) for _ in range(5)), flush=True)  # a listing can miss one
start = time.monotonic()
ended = sweep.end(uid, grace=0.3, whole_uid=whole_uid)
print("ended", ended, "in", round(time.monotonic() - start, 2), "left", len(sweep.strays(uid)), flush=True)
time.sleep(0.3)
print("later", len(sweep.strays(uid)), "anywhere", sweep.anywhere(uid), flush=True)
print("cleaned", sweep.clean_temp(uid), flush=True)
print("files", os.path.exists("/tmp/minihpc-test-left-%d" % uid), os.path.exists("/dev/shm/minihpc-test-left-%d" % uid))
"""


@root_only
@pytest.mark.parametrize("scope", ["whole", "mine"])
def test_a_re_forking_daemon_that_ignores_sigterm_is_ended_and_its_temporary_files_go(scope):
    """``whole``: a node of its own (kill(-1) as the uid); ``mine``: local mode's agents, which
    share the machine, kill only what is below them, again until none is left."""
    uid = 299_999 if scope == "whole" else 299_997
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(SCENARIO), str(uid), scope], capture_output=True,
                         text=True, timeout=60)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert int(lines["before"]) >= 1
    assert lines["ended"].split()[0] != "0" and lines["ended"].endswith("left 0"), out.stdout
    assert lines["later"] == "0 anywhere False", out.stdout
    assert lines["cleaned"] == "2" and lines["files"] == "False False", out.stdout


@root_only
def test_a_job_directory_is_its_users_alone_and_a_planted_symlink_hands_nothing_over(tmp_path):
    who = identity.Identity("alice", 299_998, 299_998, "/nonexistent")
    folder = tmp_path / "job-7"
    folder.mkdir()
    identity.give(str(folder), who)
    st = folder.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (299_998, 299_998, 0o700)

    target = tmp_path / "precious"
    target.mkdir()
    link = tmp_path / "job-8"
    link.symlink_to(target)
    with pytest.raises(OSError):
        identity.give(str(link), who)
    assert target.stat().st_uid == os.geteuid()
