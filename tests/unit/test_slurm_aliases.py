"""Slurm's command names as aliases (sbatch, squeue, scancel, sinfo, sacct, scontrol): each runs
its minihpc subcommand under its own name; pyproject, the node image
(scripts/images/node-base.Dockerfile) and the Ansible role install the same ones; and ``sinfo -R`` lists drained and
DOWN nodes with their reasons."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from minihpc.cli import slurm
from minihpc.cli.display import timestamp
from minihpc.cli.main import build_parser
from minihpc.cli.nodes import reason_rows, reasons
from minihpc.core.models import NodeStatus

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, COLUMNS="100")  # argparse wraps help to the terminal's width


def run(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env or ENV, timeout=60)


def subcommands() -> set[str]:
    """The aliases' subcommands minihpc has (scontrol comes with its own change)."""
    parser = build_parser()
    return {name for name in slurm.ALIASES.values() if slurm._subcommand(parser, name) is not None}


@pytest.mark.parametrize("alias", sorted(slurm.ALIASES))
def test_each_alias_runs_its_subcommand_under_its_own_name(alias):
    command = slurm.ALIASES[alias]
    if command not in subcommands():
        pytest.skip(f"minihpc has no {command} subcommand yet")
    mine = run("-m", "minihpc.cli.slurm", alias, "--help")
    theirs = run("-m", "minihpc.cli", command, "--help")
    assert mine.returncode == 0, mine.stderr
    assert mine.stdout.startswith(f"usage: {alias} ") and "minihpc" not in mine.stdout.split("\n\n")[0]
    # The same options and help: everything after the usage block, which wraps by the name's length.
    assert mine.stdout.split("\n\n", 1)[1] == theirs.stdout.split("\n\n", 1)[1]


def test_a_usage_mistake_names_the_alias_and_exits_1_as_slurm_does():
    bad = run("-m", "minihpc.cli.slurm", "sbatch", "--no-such-option", "job.py")
    assert (bad.returncode, bad.stderr) == (1, "sbatch: error: unrecognized arguments: --no-such-option\n")
    missing = run("-m", "minihpc.cli.slurm", "sinfo", "--drain")
    assert (missing.returncode, missing.stderr) == (1, "sinfo: error: argument --drain: expected at least one argument\n")
    ours = run("-m", "minihpc.cli", "submit", "--no-such-option", "job.py")  # minihpc's own name: argparse's 2
    assert (ours.returncode, ours.stderr) == (2, "minihpc: error: unrecognized arguments: --no-such-option\n")


def test_global_options_first_go_before_the_subcommand():
    parser = slurm.aliased_parser("sbatch")
    argv = ["--debug", "--redis-url", "redis://x:1", "--config=c.toml", "-N", "2", "job.py", "--debug"]
    assert slurm._leading_globals(parser, "sbatch", argv) == (
        ["--debug", "--redis-url", "redis://x:1", "--config=c.toml"], ["-N", "2", "job.py", "--debug"])
    assert slurm._leading_globals(parser, "sbatch", ["--help"]) == ([], ["--help"])
    # Through main(): the Redis URL given to squeue is the one it tries.
    out = run("-m", "minihpc.cli.slurm", "squeue", "--redis-url", "redis://127.0.0.1:1")
    assert out.returncode == 1 and "cannot reach Redis at redis://127.0.0.1:1" in out.stderr
    assert run("-m", "minihpc.cli.slurm", "sacct", "--version").stdout.startswith("minihpc ")


def test_the_dispatcher_refuses_a_name_that_is_no_alias():
    out = run("-m", "minihpc.cli.slurm", "salloc", "-N", "2")
    assert out.returncode == 2 and out.stderr.startswith("usage: python -m minihpc.cli.slurm {sbatch,")


def test_pyproject_installs_every_alias():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    aliases = {name: target for name, target in scripts.items() if target.startswith("minihpc.cli.slurm:")}
    assert aliases == {alias: f"minihpc.cli.slurm:{alias}" for alias in slurm.ALIASES}


def dockerfile_instruction(needle: str) -> str:
    """The node base image's instruction (continuation lines joined) that contains ``needle``."""
    text = re.sub(r"\\\n", " ", (ROOT / "scripts/images/node-base.Dockerfile").read_text())
    found = [line for line in text.splitlines() if needle in line and not line.lstrip().startswith("#")]
    assert len(found) == 1, found
    return found[0]


def test_the_dockerfile_makes_the_same_aliases_and_they_run(tmp_path):
    """The image has no installed package, so its wrappers are written by a RUN: run that RUN
    here into a scratch bin/ and call each wrapper as the image would."""
    run_line = dockerfile_instruction("minihpc.cli.slurm")
    assert run_line.startswith("RUN ")
    assert set(re.search(r"for alias in ([^;]+);", run_line).group(1).split()) == set(slurm.ALIASES)
    made = subprocess.run(["sh", "-c", run_line[4:].replace("/opt/venv/bin", str(tmp_path))], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(slurm.ALIASES)
    env = dict(ENV, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", PYTHONPATH=str(ROOT / "src"))
    for alias in ("sbatch", "sinfo"):
        out = subprocess.run([tmp_path / alias, "--help"], capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0 and out.stdout.startswith(f"usage: {alias} "), out.stderr


def test_the_ansible_role_links_the_same_aliases_to_one_wrapper_that_runs_its_name(tmp_path):
    """The role templates /usr/local/bin/minihpc and links Slurm's names to it: rendered here
    (with this venv and checkout), each link runs the command it is called as."""
    import jinja2
    import yaml

    role = ROOT / "ansible/roles/minihpc"
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text())
    assert set(defaults["minihpc_slurm_commands"]) == set(slurm.ALIASES)
    template = jinja2.Template((role / "templates/command.sh.j2").read_text(), undefined=jinja2.StrictUndefined)
    script = template.render(ansible_managed="test", minihpc_slurm_commands=defaults["minihpc_slurm_commands"],
                             minihpc_user="minihpc", minihpc_cli_group=defaults["minihpc_cli_group"],
                             minihpc_config_dir=tmp_path / "etc", minihpc_install_dir=ROOT,
                             minihpc_venv=Path(sys.executable).parent.parent)
    # As root it would first become the daemons' user (the Ansible suite runs it so, with sudo).
    script = script.replace('if [ "$(id -u)" = 0 ]; then', "if false; then", 1)
    (tmp_path / "minihpc").write_text(script)
    (tmp_path / "minihpc").chmod(0o755)
    for alias in slurm.ALIASES:
        (tmp_path / alias).symlink_to("minihpc")
    for name in ("minihpc", "sbatch", "sinfo", "scontrol"):
        out = subprocess.run([tmp_path / name, "--help"], capture_output=True, text=True, env=ENV, timeout=60)
        assert out.returncode == 0 and out.stdout.startswith(f"usage: {name} "), (name, out.stdout[:200], out.stderr)


# -- sinfo -R -------------------------------------------------------------------------------

T = 1_700_000_000.0


def node(name, alive=True, drain=None, job=None, beat=T):
    return NodeStatus(name=name, addr=name, alive=alive, job=job, drain_reason=drain, last_heartbeat=beat)


def test_reasons_list_drained_and_down_nodes_with_their_incident_times():
    nodes = [node("master-node"), node("worker-node-1", drain="disk"), node("worker-node-2", drain="disk", job=7),
             node("worker-node-3", alive=False, beat=T - 50), node("worker-node-4", alive=False, beat=T - 90),
             node("worker-node-5", drain="flapping")]
    incidents = [  # newest first, as the store gives them
        {"at": T + 3, "kind": "down", "node": "worker-node-3"},
        {"at": T + 2.2, "kind": "drained", "node": "worker-node-2", "reason": "disk"},
        {"at": T + 2.1, "kind": "drained", "node": "worker-node-1", "reason": "disk", "user": "alice"},
        {"at": T + 1, "kind": "resumed", "node": "worker-node-5"},
        {"at": T, "kind": "drained", "node": "worker-node-5", "reason": "flapping"},  # an earlier drain
    ]
    items = reasons(nodes, incidents)
    assert [(i["node"], i["state"], i["reason"], i["user"], i["since"]) for i in items] == [
        ("worker-node-1", "drain", "disk", "alice", T + 2.1),
        ("worker-node-2", "alloc", "disk", None, T + 2.2),  # draining: its job ends normally
        ("worker-node-3", "down", "Not responding", None, T + 3),
        ("worker-node-4", "down", "Not responding", None, T - 90),  # no incident: its last heartbeat
        ("worker-node-5", "drain", "flapping", None, None),  # its drain's incident has left the log
    ]
    assert reason_rows(items) == [
        ["disk", "alice", timestamp(T + 2.1), "worker-node-1"],
        ["disk", "Unknown", timestamp(T + 2.2), "worker-node-2"],
        ["Not responding", "Unknown", timestamp(T + 3), "worker-node-3"],
        ["Not responding", "Unknown", timestamp(T - 90), "worker-node-4"],
        ["flapping", "Unknown", "Unknown", "worker-node-5"],
    ]


def test_nodes_drained_together_share_one_row():
    nodes = [node("worker-node-1", drain="rack 2"), node("worker-node-2", drain="rack 2"), node("worker-node-3")]
    incidents = [{"at": T + 0.4, "kind": "drained", "node": "worker-node-2"},
                 {"at": T + 0.3, "kind": "drained", "node": "worker-node-1"}]
    assert reason_rows(reasons(nodes, incidents)) == [["rack 2", "Unknown", timestamp(T), "worker-node-[1-2]"]]
    assert reasons([node("worker-node-1")], []) == []


def test_sinfo_R_and_N_parse():
    args = build_parser().parse_args(["nodes", "-R", "-N"])
    assert args.list_reasons and args.Node


def test_the_aliases_know_the_job_srun_socket_variable_without_importing_it():
    from minihpc.cli import slurm
    from minihpc.job import srun

    assert slurm.SOCKET_ENV == srun.SOCKET_ENV
