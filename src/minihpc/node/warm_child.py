"""A child of the warm launcher becoming one job's torchrun: what a cold start gets from exec,
given here by hand, in the order Popen's child applies it, then torchrun itself.

New session; the signal dispositions and mask a new interpreter has; the job's output on
stdout and stderr, /dev/null on stdin and nothing else open; the job's working directory; the
job's user (its group only, all three ids, so no capability is left); the job's environment,
sys.path and argv, shown in /proc as a cold start's would be. Then it tells the agent it has
started -- or why it could not, as Popen's exec error would -- closes that socket (job code
never holds a line to the launcher) and runs torchrun, ending with its exit code; or, for a
share of one rank (minihpc.core.warm.runs_direct), that rank itself, as torchrun's forked rank
would run it (minihpc.node.rank), ending with the script's status.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import traceback

from minihpc.core.launch_spec import RANK_MODULE, TORCHRUN_MODULE
from minihpc.core.warm import child_path, shadowed
from minihpc.machine import proctitle
from minihpc.node import gang, rank

_PR_SET_DUMPABLE = 4
_BASE_PATH = [p for p in sys.path
              if p not in {os.path.abspath(e) for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e}]
"""The interpreter's own path, as the warm launcher has it less its PYTHONPATH: a job's comes first."""
_LAUNCHER_PATH = set(sys.path)
"""Where the launcher imported from (its PYTHONPATH included): a job's path entry among these
brings the very copies the launcher has."""
_IGNORED_BY_PYTHON = ("SIGPIPE", "SIGXFSZ")  # what a new interpreter ignores


MAX_REQUEST = 1 << 20


def run(out: int, answers: socket.socket) -> None:
    code = 1
    try:
        data = answers.recv(MAX_REQUEST)  # the job, from the agent: never seen by the launcher
        if not data:
            os._exit(255)
        request = json.loads(data)
        try:
            setup(request, out, answers.fileno())
        except OSError as exc:
            answers.send(json.dumps({"error": exc.strerror or str(exc), "errno": exc.errno,
                                     "filename": exc.filename}).encode())
            os._exit(255)
        imported = _IMPORTED if _IMPORTED is not None else _imported()
        why = shadowed(imported, {e: _provides(e, imported) for e in sys.path if e not in _LAUNCHER_PATH})
        if why:  # the agent starts it cold instead
            answers.send(json.dumps({"cold": why}).encode())
            os._exit(0)
        answers.send(json.dumps({"started": True, "pid": os.getpid()}).encode())
        answers.close()
        if request.get("rank"):  # the share's one rank, run here: no torchrun (core.warm.runs_direct)
            os.environ.pop("MINIHPC_RESULT_FILE", None)  # the agent reads this process's own status
            code = run_rank(request["rank"][0], list(request["rank"][1:]))
        else:
            from minihpc.node import torchrun

            code = torchrun.main(list(request["argv"]))
    except SystemExit as exc:
        code = rank.exit_code(exc)
    except KeyboardInterrupt:  # as an interpreter ends on an uncaught one: by SIGINT
        rank.flush_output()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - as an interpreter would: traceback, status 1
        traceback.print_exc()
    finally:
        rank.flush_output()
        os._exit(code)


def run_rank(script: str, args: list[str]) -> int:
    """The share's one rank, here: after its job's gang formed, and, on node rank 0, until
    every node's rank has ended (its store is the job's; minihpc.node.gang). The script's
    status; its ``os._exit(...)`` unwinds to here (minihpc.node.rank.forked), so that node
    rank 0 still waits for the others."""
    node, nodes = int(os.environ["GROUP_RANK"]), int(os.environ["GROUP_WORLD_SIZE"])
    store = None
    if nodes > 1:
        store = gang.form(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), node, nodes)
    code = 1
    try:
        rank.forked(script, *args)
        code = 0
    except SystemExit as exc:
        code = rank.exit_code(exc)
    finally:
        if store is not None:
            gang.leave(store, node, nodes, code == 0)
    return code


def setup(request: dict, out: int, answers: int) -> None:
    os.setsid()
    _default_signals()
    _streams(out, answers)
    cwd = request.get("cwd") or os.getcwd()
    os.chdir(cwd)
    if request.get("uid") is not None:
        _become(int(request["uid"]), int(request["gid"]))
    env = {str(k): str(v) for k, v in request["env"].items()}
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = child_path(os.getcwd(), env.get("PYTHONPATH", ""), _BASE_PATH)
    module, argv = (RANK_MODULE, request["rank"]) if request.get("rank") else (TORCHRUN_MODULE, request["argv"])
    sys.argv = [sys.modules[module].__file__, *argv]
    proctitle.become([sys.executable, "-m", module, *argv], env)  # a rank run here shows as one spawned by torchrun
    dynamo = sys.modules.get("torch._dynamo.config")
    if dynamo is not None and hasattr(dynamo, "debug_dir_root"):  # taken from the cwd at import
        dynamo.debug_dir_root = os.path.join(os.getcwd(), "torch_compile_debug")
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()  # a new interpreter seeds it from the OS; random reseeds itself on fork


def _imported() -> set[str]:
    """Top-level modules imported here that do not come with Python."""
    return {name.partition(".")[0] for name in sys.modules} - set(sys.stdlib_module_names) - {"__main__"}


_IMPORTED: frozenset[str] | None = None
""":func:`_imported` as of the launcher's last import, taken once there (it imports nothing
while it serves, so every child forked after sees the same): a few ms of every job start."""


def remember_imports() -> None:
    """Called by the launcher once it has imported all it will (see _IMPORTED)."""
    global _IMPORTED
    _IMPORTED = frozenset(_imported())


def _provides(entry: str, wanted: set[str]) -> set[str]:
    """Which of ``wanted`` a path entry provides: ``x.py``, or a regular package ``x/__init__.py``."""
    try:
        names = set(os.listdir(entry))
    except OSError:
        return set()
    found = {n[:-3] for n in names if n.endswith(".py")} & wanted
    return found | {n for n in names & wanted if os.path.isfile(os.path.join(entry, n, "__init__.py"))}


def _default_signals() -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else ""
        want = signal.SIG_IGN if name in _IGNORED_BY_PYTHON else signal.SIG_DFL
        if sig == signal.SIGINT:
            want = signal.default_int_handler
        try:
            if signal.getsignal(sig) != want:
                signal.signal(sig, want)
        except (OSError, ValueError):
            pass


def _streams(out: int, answers: int) -> None:
    """The job's output on 1 and 2, /dev/null on 0, and nothing else open but ``answers``
    (what the imports opened in the launcher included)."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.closerange(3, answers)
    os.closerange(answers + 1, os.sysconf("SC_OPEN_MAX"))
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(write_through=True)  # PYTHONUNBUFFERED, as the cold path runs


def _become(uid: int, gid: int) -> None:
    """The job's user, with its group only, as Popen(user=, group=, extra_groups=[])."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    try:  # the uid change made it undumpable, which exec would undo: ps, py-spy and /proc work
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
