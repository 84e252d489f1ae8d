"""Nothing of a job outlives its share on a node (issue 33): whatever its user still runs is
ended, however it hid, and its temporary files go with it.

The agent of a node whose jobs run as another user is a child subreaper
(machine.processes.become_subreaper), so a process a job detaches -- double forked, ``setsid``,
re-forking every 0.2 s -- is re-parented to the agent, never to init, and is found for a
SIGTERM and a moment's grace. Then every process of the job's uid gets SIGKILL at once: a
child of the agent becomes that uid and calls kill(-1), which no re-forking process outruns (a
listing of /proc followed by kills does not: a process that forks faster than the listing is
read always has a child it missed). A node runs one job at a time and owns its process space
(a container, a host), so every process of that uid is the job's. Local mode's agents share
one machine (MINIHPC_NODE_OWNS_HOST=0): there only the processes below the agent are killed,
again and again until none is left (the agent is their subreaper, so none can leave its tree),
and the user's other jobs and logins are left alone.

The job user's files in /tmp, /var/tmp and /dev/shm go too, once no process of that uid is left
on the machine at all.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time

import psutil

from minihpc.machine.processes import terminate

log = logging.getLogger(__name__)

TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
"""Where a job may leave files that outlive it on its node."""

SWEEP_FOR = 5.0
"""Seconds the sweeps may take: more means something forks faster than it is killed."""


def strays(uid: int) -> list[psutil.Process]:
    """The live processes (zombies aside) of ``uid`` below this one."""
    try:
        below = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for proc in below:
        try:
            if proc.uids().real == uid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            pass
    return found


def end(uid: int, grace: float, sweep_for: float = SWEEP_FOR, whole_uid: bool = True) -> int:
    """End every process of ``uid``: SIGTERM and ``grace`` seconds first for those found below
    this agent (a daemon may flush), then SIGKILL to every process of the uid at once
    (:func:`_kill_every_process_of`), again until none is seen twice in a row -- a listing of
    /proc is no snapshot, and can miss a child forked while it read. Without ``whole_uid``
    (a machine shared with other nodes) only those below this agent get the SIGKILLs. How many
    were found."""
    _reap_mine(uid)  # what detached and ended by itself meanwhile
    first = strays(uid)
    if first:
        terminate(first, grace)
    found = {p.pid for p in first}
    deadline = time.monotonic() + sweep_for
    quiet = 0
    listing = of_uid if whole_uid else (lambda u: [p.pid for p in strays(u)])
    reached = False  # a kill(-1) signalled someone: at least one, should every listing miss it
    while quiet < 2:
        if whole_uid:
            found.update(of_uid(uid))  # counted for the job's log; kill(-1) does not say how many
            reached = _kill_every_process_of(uid) or reached
        else:
            _kill_each(strays(uid), found)
        _reap_mine(uid)
        left = listing(uid)
        found.update(left)
        quiet = 0 if left else quiet + 1
        if quiet == 0 and time.monotonic() > deadline:
            log.error("uid %d: process(es) still alive after %.0f s of kills", uid, sweep_for)
            break
        time.sleep(QUIET_GAP)
    # A process that re-forks all the time is a new pid at each listing, which may miss it
    # every time; the kill(-1) that ended it still counts it.
    return len(found) or int(reached)


def _kill_each(procs: list[psutil.Process], found: set[int]) -> None:
    for proc in procs:
        found.add(proc.pid)
        try:
            proc.kill()
        except psutil.Error:
            pass


QUIET_GAP = 0.02
"""Seconds between the kills and listings that end a sweep."""


def _kill_every_process_of(uid: int) -> bool:
    """SIGKILL every process of ``uid`` at once, from a child that becomes ``uid`` and calls
    kill(-1): the kernel signals them all in one pass, and a fork under way when it comes fails
    (a fatal signal is pending), so no re-forking process outruns it. It reaches the uid's
    processes outside this agent's tree too: on a node of its own (a container, a host) those
    are only the job's; in local mode with one job user for several nodes, another node's job
    of that user would go as well (docs/security.md). Whether it signalled any process."""
    if uid == 0:
        return False
    pid = os.fork()
    if pid == 0:  # the child: nothing but system calls, then out (0: it signalled some)
        code = 2
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
            code = 0
        except ProcessLookupError:  # none to signal
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _reap_mine(uid: int) -> None:
    """Collect the killed processes of ``uid`` re-parented to this one (a subreaper), so they
    are not left as zombies; only those zombies are waited for, so no status is taken from a
    Popen of the agent's own (the warm launcher's, say)."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        try:
            if child.status() == psutil.STATUS_ZOMBIE and child.uids().real == uid:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError, OSError):
            pass


def of_uid(uid: int) -> list[int]:
    """The live processes (zombies aside) of ``uid`` on this machine, by pid."""
    found = []
    for proc in psutil.process_iter(["uids", "status"]):
        uids, status = proc.info.get("uids"), proc.info.get("status")
        if uids is not None and uids.real == uid and status != psutil.STATUS_ZOMBIE:
            found.append(proc.pid)
    return found


def anywhere(uid: int) -> bool:
    """Whether any live process of ``uid`` runs on this machine."""
    return bool(of_uid(uid))


def clean_temp(uid: int, dirs: tuple[str, ...] = TEMP_DIRS) -> int:
    """Remove what ``uid`` owns at the top of each of ``dirs`` (whole trees; a symlink itself,
    never what it names), unless a process of that uid still runs here. How many entries."""
    if uid == 0 or anywhere(uid):
        return 0
    removed = 0
    for top in dirs:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
                removed += 1
            except OSError:
                pass
    return removed
