"""Kill the checkpoint writer at random moments until 40 kills have found a checkpoint to load
(at least 50 kills): the latest checkpoint always loads and verifies, and it is never older
than the last save that returned."""

import multiprocessing
import os
import random
import signal
import time

import pytest

from minihpc.job import checkpoint

pytestmark = pytest.mark.integration


def _writer(directory: str, done_file: str, ready_file: str) -> None:
    import torch

    open(ready_file, "w").close()  # started: the kill's random moment counts from here
    step = max(checkpoint.steps(directory), default=0)
    while True:
        step += 1
        checkpoint.save(directory, step, {"step": step, "weights": torch.full((50_000,), float(step))}, keep=2)
        with open(done_file + ".tmp", "w") as fh:  # the last save that returned
            fh.write(str(step))
        os.replace(done_file + ".tmp", done_file)


def test_killing_the_writer_during_saves_never_breaks_the_latest_checkpoint(tmp_path):
    # Writers fork from a fresh server that imported torch once: quick to start, and safe,
    # unlike a fork of this process, whose torch thread pools other tests may have started.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "minihpc.job.checkpoint", __name__])
    directory, done_file, ready_file = (str(tmp_path / name) for name in ("ckpt", "done", "ready"))
    rng = random.Random(7)
    loaded_steps, kills = [], 0
    # A writer's start is not timed (a fork from the server took 0.25 s once the server had
    # pytest loaded), so each kill comes at a random moment after the writer says it started.
    # On a loaded machine a kill often comes before the first save finishes; kill on until 40
    # kills have found a checkpoint, so the check never passes on a handful of loads.
    while kills < 50 or len(loaded_steps) < 40:
        assert kills < 200, f"only {len(loaded_steps)} of {kills} kills found a checkpoint"
        kills += 1
        if os.path.exists(ready_file):
            os.unlink(ready_file)
        proc = ctx.Process(target=_writer, args=(directory, done_file, ready_file))
        proc.start()
        deadline = time.monotonic() + 60
        while not os.path.exists(ready_file) and proc.is_alive() and time.monotonic() < deadline:
            time.sleep(0.002)
        assert os.path.exists(ready_file), f"the writer did not start (exit code {proc.exitcode})"
        time.sleep(rng.uniform(0.0, 0.2))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        found = checkpoint.load_latest(directory)
        if found is None:
            assert not os.path.exists(done_file)  # killed before any save finished
            continue
        assert checkpoint.verify(found.path)
        assert found.state["step"] == found.step
        assert float(found.state["weights"][0]) == found.step
        # A kill between a save's return and the writer's note of it leaves a checkpoint with
        # no note yet: the checkpoint may be newer than the note, never older.
        noted = int(open(done_file).read()) if os.path.exists(done_file) else 0
        assert found.step >= noted
        loaded_steps.append(found.step)
    assert len(loaded_steps) >= 40 and loaded_steps == sorted(loaded_steps)
    # A kill can leave a temporary file behind; it is never loaded, and a save clears the
    # ones old enough to belong to a writer that is gone.
    leftovers = [os.path.join(directory, p) for p in os.listdir(directory) if p.endswith(".tmp")]
    for path in leftovers:
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    checkpoint.save(directory, loaded_steps[-1] + 1000, {"step": 0})
    assert not [p for p in os.listdir(directory) if p.endswith(".tmp")]
