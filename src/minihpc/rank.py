"""Runs one rank's script: ``python -m minihpc.rank SCRIPT [ARGS...]`` (torchrun's entry point).

It adds Slurm's per-rank variables (SLURM_PROCID, SLURM_LOCALID) from torchrun's, runs the
script as ``__main__``, and then ends the process with ``os._exit`` after running the atexit
handlers and flushing output. Skipping the interpreter's final teardown avoids a known gloo
abort ("terminate called without an active exception", SIGABRT) that otherwise kills about
one rank in fifteen *after* a successful ``destroy_process_group()``. The exit status is the
script's own: 0, its ``sys.exit`` code, or 1 on an uncaught exception (traceback printed).
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import traceback


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main() -> None:
    if len(sys.argv) < 2:
        print("usage: python -m minihpc.rank SCRIPT [ARGS...]", file=sys.stderr)
        os._exit(2)
    script = sys.argv[1]
    os.environ["SLURM_PROCID"] = os.environ.get("RANK", "0")
    os.environ["SLURM_LOCALID"] = os.environ.get("LOCAL_RANK", "0")
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:  # noqa: BLE001 - report like the interpreter would
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


if __name__ == "__main__":
    main()
