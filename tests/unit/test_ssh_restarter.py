"""The SSH/systemd restarter: the command it builds, what its failures say, how ``ssh:`` specs
are read, and restart() end to end against a fake ``ssh`` first on PATH."""

import os
import stat

import pytest

from minihpc.core.errors import UsageError
from minihpc.restart.spec import from_spec
from minihpc.restart.ssh import SshRestarter, failure, last_line, ssh_argv

CONFIG = "/etc/minihpc/ssh_config"
REMOTE = ["sudo", "-n", "systemctl", "restart", "minihpc-node.service"]

# -- the command ------------------------------------------------------------------------


def test_the_command_names_the_config_batch_mode_and_the_host_alias_after_double_dash():
    assert ssh_argv(CONFIG, "worker-1", "minihpc-node.service") == [
        "ssh", "-F", CONFIG, "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "--", "worker-1", *REMOTE]


def test_the_unit_can_be_another():
    assert ssh_argv(CONFIG, "gpu.node_2", "minihpc-agent@2.service")[-7:] == [
        "--", "gpu.node_2", "sudo", "-n", "systemctl", "restart", "minihpc-agent@2.service"]


@pytest.mark.parametrize("node, says", [
    ("", "node name is empty"),
    ("-oProxyCommand=touch /tmp/x", "starts with '-'"),
    ("-1", "starts with '-'"),
    ("worker-1; reboot", "has characters outside"),
    ("root@worker-1", "has characters outside"),
    ("worker 1", "has characters outside"),
    ("worker-1\n", "has characters outside"),
    ("wörker", "has characters outside"),
])
def test_a_node_name_that_could_inject_an_option_or_argument_is_refused(node, says):
    with pytest.raises(ValueError) as info:
        ssh_argv(CONFIG, node, "minihpc-node.service")
    message = str(info.value)
    assert says in message and "\n" not in message


@pytest.mark.parametrize("unit", ["", "-x", "minihpc-node.service; reboot", "a b", "$(id)"])
def test_a_unit_name_that_could_inject_shell_on_the_host_is_refused(unit):
    with pytest.raises(ValueError, match="systemd unit"):
        ssh_argv(CONFIG, "worker-1", unit)


# -- what a failure says ----------------------------------------------------------------


def test_exit_zero_is_no_failure():
    assert failure("worker-1", 0, "Warning: Permanently added 'worker-1' to known hosts.\n") is None


def test_exit_255_says_the_host_does_not_answer_ssh_with_the_last_stderr_line():
    stderr = "debug noise\nssh: connect to host 10.0.0.5 port 22: Connection refused\n\n  \n"
    assert failure("worker-1", 255, stderr) == (
        "node worker-1: its host does not answer SSH (ssh: connect to host 10.0.0.5 port 22: Connection refused)")


def test_exit_255_without_stderr_still_says_so():
    assert failure("worker-1", 255, "") == "node worker-1: its host does not answer SSH"


def test_another_exit_names_the_remote_command_its_status_and_what_it_said():
    stderr = "sudo: a password is required\n"
    assert failure("worker-1", 1, stderr) == (
        "node worker-1: 'sudo -n systemctl restart minihpc-node.service' over SSH exited 1 "
        "(sudo: a password is required)")
    assert "restart other.service' over SSH exited 5" in failure("worker-1", 5, "x", "other.service")


def test_a_long_stderr_line_is_cut_and_the_message_stays_one_line():
    message = failure("worker-1", 255, "first\n" + "x" * 5000 + "\r\n")
    assert "\n" not in message and "first" not in message
    assert message.endswith("(" + "x" * 200 + ")")
    assert last_line("a\n  b  \n\n") == "b"


# -- ssh:CONFIG_FILE --------------------------------------------------------------------


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "ssh_config"
    path.write_text("Host worker-1\n  HostName 10.0.0.5\n  User minihpc\n  StrictHostKeyChecking yes\n")
    return str(path)


def test_an_ssh_spec_with_a_readable_config_gives_an_ssh_restarter(config):
    restarter = from_spec(f"ssh:{config}", env={})
    assert isinstance(restarter, SshRestarter)
    assert (restarter.config_file, restarter.unit, restarter.timeout) == (config, "minihpc-node.service", 30.0)


def test_minihpc_restart_unit_overrides_the_unit(config):
    assert from_spec(f"ssh:{config}", env={"MINIHPC_RESTART_UNIT": "minihpc-agent.service"}).unit == "minihpc-agent.service"
    with pytest.raises(UsageError, match="MINIHPC_RESTART_UNIT: systemd unit 'x; reboot'"):
        from_spec(f"ssh:{config}", env={"MINIHPC_RESTART_UNIT": "x; reboot"})


def test_a_missing_config_file_is_refused_at_start_in_one_line_naming_it(tmp_path):
    missing = tmp_path / "nope" / "ssh_config"
    with pytest.raises(UsageError) as info:
        from_spec(f"ssh:{missing}", env={})
    message = str(info.value)
    assert message.startswith(f"SSH config file {missing} cannot be read (No such file or directory)")
    assert "\n" not in message


def test_a_config_that_is_a_directory_or_unreadable_is_refused(tmp_path, config):
    with pytest.raises(UsageError, match=f"SSH config file {tmp_path} cannot be read"):
        from_spec(f"ssh:{tmp_path}", env={})
    if os.geteuid() != 0:  # root reads any file
        os.chmod(config, 0)
        with pytest.raises(UsageError, match="cannot be read \\(Permission denied\\)"):
            from_spec(f"ssh:{config}", env={})


@pytest.mark.parametrize("spec", ["ssh:", "sshh:/etc/ssh_config", "systemd:/x"])
def test_a_bad_spec_lists_every_kind(spec):
    with pytest.raises(UsageError) as info:
        from_spec(spec, env={})
    assert str(info.value) == (f"invalid --restarter {spec!r}: "
                               "expected local:STATE_DIR, docker:URL, ssh:CONFIG_FILE or none")


# -- restart() against a fake ssh -------------------------------------------------------


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    """fake_ssh(code, stderr, sleep=None) puts an ``ssh`` first on PATH that records its argv,
    one per line, in the returned file, prints ``stderr`` and exits ``code``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv_file = tmp_path / "argv"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    def make(code=0, stderr="", sleep=None):
        (tmp_path / "stderr").write_text(stderr)
        script = bin_dir / "ssh"
        script.write_text("#!/bin/sh\n"
                          f"printf '%s\\n' \"$@\" > '{argv_file}'\n"
                          f"cat '{tmp_path / 'stderr'}' >&2\n"
                          + (f"exec sleep {sleep}\n" if sleep else "")
                          + f"exit {code}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        return argv_file

    return make


def test_restart_runs_ssh_with_exactly_that_argv_and_returns_on_exit_0(fake_ssh, config):
    argv_file = fake_ssh(0, "Warning: Permanently added 'worker-1'.\n")
    assert SshRestarter(config).restart("worker-1") is None
    assert argv_file.read_text().splitlines() == [
        "-F", config, "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "--", "worker-1", *REMOTE]


def test_restart_raises_does_not_answer_ssh_on_exit_255(fake_ssh, config):
    fake_ssh(255, "ssh: connect to host 10.0.0.5 port 22: Connection refused\n")
    with pytest.raises(RuntimeError) as info:
        SshRestarter(config).restart("worker-1")
    assert str(info.value) == (
        "node worker-1: its host does not answer SSH (ssh: connect to host 10.0.0.5 port 22: Connection refused)")


def test_restart_raises_the_remote_status_with_the_unit_it_restarted(fake_ssh, config):
    argv_file = fake_ssh(1, "sudo: a password is required\n")
    with pytest.raises(RuntimeError) as info:
        SshRestarter(config, unit="minihpc-agent.service").restart("worker-2")
    assert str(info.value) == ("node worker-2: 'sudo -n systemctl restart minihpc-agent.service' over SSH "
                               "exited 1 (sudo: a password is required)")
    assert argv_file.read_text().splitlines()[-1] == "minihpc-agent.service"


def test_restart_gives_up_after_its_timeout(fake_ssh, config):
    fake_ssh(0, "", sleep=10)
    with pytest.raises(RuntimeError) as info:
        SshRestarter(config, timeout=0.3).restart("worker-1")
    assert str(info.value) == "node worker-1: no answer over SSH within 0.3s"


def test_restart_says_when_the_ssh_client_is_not_installed(tmp_path, monkeypatch, config):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(RuntimeError) as info:
        SshRestarter(config).restart("worker-1")
    message = str(info.value)
    assert message.startswith("node worker-1: the ssh client is not installed") and "\n" not in message


def test_restart_refuses_a_bad_node_name_before_running_anything(fake_ssh, config):
    argv_file = fake_ssh(0)
    with pytest.raises(RuntimeError, match="^node name '-oProxyCommand=sh' starts with '-'"):
        SshRestarter(config).restart("-oProxyCommand=sh")
    assert not argv_file.exists()
