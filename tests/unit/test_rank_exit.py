"""What a rank does at its end, cheaply: whether it left a child (from the kernel's own list),
and which of torch's exit-time finalizers the warm launcher skips in the processes it forks."""

import subprocess
import sys
import textwrap

from minihpc.node import rank


def test_a_rank_knows_whether_it_has_a_child():
    assert rank._has_children() is False
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert rank._has_children() is True
    finally:
        child.kill()
        child.wait()
    assert rank._has_children() is False


def test_only_torchs_operator_unregistering_is_skipped_at_exit():
    code = textwrap.dedent("""
        import weakref
        import torch  # registers its operator libraries, each with a finalizer run at exit

        from minihpc.node.warm_server import EXIT_SKIPPED, skip_exit_unregistering

        class Job:
            pass

        kept = Job()
        mine = weakref.finalize(kept, print, "job's own finalizer")
        marked = skip_exit_unregistering()
        torchs = [f for f, info in weakref.finalize._registry.items()
                  if (info.func.__module__, info.func.__name__) == EXIT_SKIPPED]
        assert marked == len(torchs) > 0, (marked, len(torchs))
        assert not any(f.atexit for f in torchs)
        assert mine.atexit and mine.alive
        print("ok", marked)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-2000:]
    assert "job's own finalizer" in out.stdout  # run at exit, as before
