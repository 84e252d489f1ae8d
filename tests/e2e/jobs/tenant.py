"""Two users on one cluster (issue 33). ``tenant.py keep SECONDS``: the victim writes a
checkpoint file, stays RUNNING for SECONDS, and checks the file is still its own.
``tenant.py attack JOB``: the attacker tries job JOB's checkpoint folder, spooled script and
logs, then leaves a process
behind that ignores SIGTERM and re-forks every 0.2 s (the test checks none of it survives)."""
import os
import pwd
import signal
import sys
import time

print(f"tenant uid {os.getuid()} gid {os.getgid()} groups {os.getgroups()} home {os.environ.get('HOME')}",
      flush=True)
print(f"tenant name {pwd.getpwuid(os.getuid()).pw_name}", flush=True)  # the node knows the uid's name
mine = os.environ["MINIHPC_CHECKPOINT_DIR"]
print(f"checkpoint dir mode {oct(os.stat(mine).st_mode & 0o7777)} uid {os.stat(mine).st_uid}", flush=True)

if sys.argv[1] == "keep":
    secret = f"alice's weights {os.getpid()}"
    own = os.path.join(mine, f"ckpt-{os.environ['RANK']}.txt")  # one per rank: the folder is shared
    with open(own, "w") as fh:
        fh.write(secret)
    time.sleep(float(sys.argv[2]))
    with open(own) as fh:
        print("KEPT" if fh.read() == secret else "CHANGED", flush=True)
    sys.exit(0)

victim = sys.argv[2]
theirs = os.path.join(os.path.dirname(mine), f"job-{victim}")
# The layout is no secret: <shared>/models/job-N, <shared>/jobs/spool/job-N, <shared>/logs/job-N.
shared = os.path.dirname(os.path.dirname(mine))
spooled = os.path.join(shared, "jobs", "spool", f"job-{victim}")
logs = os.path.join(shared, "logs", f"job-{victim}")


def first_log():
    return open(os.path.join(logs, sorted(os.listdir(logs))[0])).read()


def a_log():
    """One of their nodes' logs, by the names nodes have (the folder cannot be listed)."""
    refused = FileNotFoundError(logs)
    for node in ("master-node", *(f"worker-node-{i}" for i in range(1, 9))):
        try:
            return open(os.path.join(logs, node + ".log")).read()
        except PermissionError as exc:
            refused = exc
        except FileNotFoundError:
            pass
    raise refused


for what, attempt in (("list their checkpoint", lambda: os.listdir(theirs)),
                      ("read their checkpoint", lambda: open(os.path.join(theirs, "ckpt-0.txt")).read()),
                      ("write their checkpoint", lambda: open(os.path.join(theirs, "ckpt-0.txt"), "w").write("bob was here")),
                      ("read their spooled script", lambda: open(os.path.join(spooled, "tenant.py")).read()),
                      ("list their logs", first_log),
                      ("read their log", a_log)):
    try:
        attempt()
        print(f"ATTACK {what}: SUCCEEDED", flush=True)
    except OSError as exc:
        print(f"ATTACK {what}: refused ({type(exc).__name__})", flush=True)

if os.fork() == 0:  # a daemon out of the rank's session that ignores SIGTERM and re-forks
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        if os.fork():
            os._exit(0)
        time.sleep(0.2)
print("left a re-forking daemon behind", flush=True)
