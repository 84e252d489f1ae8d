"""The suite's forked CLI calls (tests/integration/warm_cli.py) answer as `python -m minihpc.cli`
does: the same stdout, stderr and exit status, the caller's environment, working directory and
stdin, and a timeout that kills the call."""

import os
import subprocess
import sys

import pytest

from tests.integration import warm_cli


def started(args, env, input=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minihpc.cli", *map(str, args)], env=env, input=input, cwd=cwd,
                          capture_output=True, text=True, timeout=60,
                          stdin=None if input is not None else subprocess.DEVNULL)


@pytest.mark.parametrize("args", [
    ["--version"],
    ["submit", "--no-such-option"],  # argparse's usage and exit 2
    ["queue"],  # no cluster at this address: one line, exit 1
    ["show", "not-a-job"],
    ["scontrol", "show", "hostnames", "node[1-3],login"],
])
def test_a_forked_call_prints_and_exits_as_a_started_one(args, tmp_path):
    env = dict(os.environ, MINIHPC_STATE_DIR=str(tmp_path / "none"), MINIHPC_REDIS_URL="redis://127.0.0.1:1/0")
    forked, real = warm_cli.run(args, env=env), started(args, env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)


def test_a_forked_call_has_the_callers_environment_directory_and_stdin(tmp_path, monkeypatch):
    script = "#!/bin/bash\necho hi\n"
    env = dict(os.environ, MINIHPC_REDIS_URL="redis://127.0.0.1:1/0", SLURM_JOB_NODELIST="a[1-2]")
    monkeypatch.chdir(tmp_path)
    forked = warm_cli.run(["scontrol", "show", "hostnames"], env=env)
    assert (forked.returncode, forked.stdout) == (0, "a1\na2\n")
    # submit reads its script before it asks for the cluster: an empty stdin, or a script not in
    # the working directory, would be refused before "cannot reach Redis"
    forked, real = warm_cli.run(["submit", "-"], env=env, input=script), started(["submit", "-"], env, input=script)
    assert (forked.returncode, forked.stderr) == (real.returncode, real.stderr)
    assert "cannot reach Redis" in forked.stderr
    assert "is empty" in warm_cli.run(["submit", "-"], env=env).stderr  # no input: /dev/null
    (tmp_path / "job.sh").write_text(script)
    forked, real = warm_cli.run(["submit", "job.sh"], env=env), started(["submit", "job.sh"], env, cwd=tmp_path)
    assert (forked.returncode, forked.stderr) == (real.returncode, real.stderr)
    assert "cannot reach Redis" in forked.stderr


def test_a_call_past_its_timeout_is_killed(redis_port):
    env = dict(os.environ, MINIHPC_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0")
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        warm_cli.run(["queue", "--watch", "--interval", "0.2"], env=env, timeout=1)
    assert caught.value.timeout == 1
