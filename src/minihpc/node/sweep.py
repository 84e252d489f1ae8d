"""Nothing of a job outlives its share on a node (issue 33): whatever its user still runs
below the agent is ended, however it hid, and its temporary files go with it.

The agent of a node whose jobs run as another user is a child subreaper
(machine.processes.become_subreaper), so a process a job detaches -- double forked, ``setsid``,
re-forking every 0.2 s -- is re-parented to the agent, never to init: every process of the job is in the agent's tree. A node runs one job at a time,
so once the share is over, each process of the job's uid in that tree is the job's, and is
killed, sweep after sweep, until none is left: a re-forking process's new child is found by the
next sweep, and a stopped one gets SIGKILL all the same. Other agents' trees (local mode, where
one user's jobs may run on several nodes of one machine) are not touched.

The job user's files in /tmp, /var/tmp and /dev/shm go too, once no process of that uid is left
on the machine at all (local mode: the same user's job on another node keeps its own).
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


def end(uid: int, grace: float, sweep_for: float = SWEEP_FOR) -> int:
    """End every process of ``uid`` below this one: SIGTERM and ``grace`` seconds first (a
    daemon may flush), then SIGKILL sweeps until none is left. How many there were."""
    _reap_mine(uid)  # what detached and ended by itself meanwhile
    first = strays(uid)
    if not first:
        return 0
    terminate(first, grace)
    ended = {p.pid for p in first}
    deadline = time.monotonic() + sweep_for
    while True:
        _reap_mine(uid)
        left = strays(uid)
        if not left:
            return len(ended)
        if time.monotonic() > deadline:
            log.error("uid %d: %d process(es) still alive after %.0f s of sweeps", uid, len(left), sweep_for)
            return len(ended)
        for proc in left:
            ended.add(proc.pid)
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass


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


def anywhere(uid: int) -> bool:
    """Whether any live process of ``uid`` runs on this machine."""
    for proc in psutil.process_iter(["uids", "status"]):
        uids, status = proc.info.get("uids"), proc.info.get("status")
        if uids is not None and uids.real == uid and status != psutil.STATUS_ZOMBIE:
            return True
    return False


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
