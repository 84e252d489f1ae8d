"""``minihpc completion bash|zsh``: the script, loaded in a real shell, completes subcommands,
options and their choices of the CLI's parser, for ``minihpc`` and every Slurm alias."""

import os
import shlex
import shutil
import subprocess
import sys

import pytest

from minihpc.cli.completion import levels
from minihpc.cli.main import build_parser
from minihpc.cli.slurm import ALIASES


def completion_script(shell: str) -> str:
    out = subprocess.run([sys.executable, "-m", "minihpc.cli", "completion", shell],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory):
    path = tmp_path_factory.mktemp("completion") / "minihpc.bash"
    path.write_text(completion_script("bash"))
    return path


def bash(script, body: str) -> str:
    """Run ``body`` in a plain bash that sourced the completion script; its stdout."""
    prelude = (f"source {shlex.quote(str(script))}\n"
               't() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _minihpc; '
               'echo "${COMPREPLY[*]}"; }\n')
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", prelude + body], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr, out.stderr
    return out.stdout


def complete(script, *words: str) -> list[str]:
    """What bash offers for the command line ``words`` (the last one being completed)."""
    return bash(script, "t " + " ".join(shlex.quote(w) for w in words)).split()


def test_bash_registers_minihpc_and_every_alias(bash_script):
    names = ["minihpc", *ALIASES]
    lines = bash(bash_script, f"complete -p {' '.join(names)}").splitlines()
    # -o default: file names where minihpc offers nothing (the job script of sbatch).
    assert lines == [f"complete -o default -F _minihpc {name}" for name in names]


@pytest.mark.parametrize("words, offered", [
    (["minihpc", "que"], ["queue"]),
    (["minihpc", "--config", "x.toml", "que"], ["queue"]),  # an option's value is not a subcommand
    (["minihpc", "token", "cr"], ["create"]),
    (["minihpc", "validate", "baseline", "s"], ["save"]),
    (["minihpc", "submit", "--priority", "h"], ["high"]),
    (["minihpc", "completion", ""], ["bash", "zsh"]),
    (["minihpc", "submit", "job.py"], []),  # bash's default (file names) takes over
    (["minihpc", "nodes", "--drain", ""], []),
    (["sbatch", "--pri"], ["--priority"]),
    (["/usr/local/bin/sinfo", "--list"], ["--list-reasons"]),
])
def test_bash_completes(bash_script, words, offered):
    assert complete(bash_script, *words) == offered


def test_bash_completes_every_subcommand_at_every_level(bash_script):
    """Built from the parser: every subcommand there is completes from its first letters."""
    cases = [(lv.path, name) for lv in levels(build_parser()) for name, _ in lv.commands]
    assert len(cases) > 20
    body = "\n".join(f"t minihpc {lv_path} {shlex.quote(name[:2])}" for lv_path, name in cases)
    for (path, name), line in zip(cases, bash(bash_script, body).splitlines(), strict=True):
        assert name in line.split(), f"minihpc {path} {name[:2]}<TAB> offered {line!r}"


def test_the_alias_starts_at_its_subcommand(bash_script):
    options = {lv.path: [o for o, _ in lv.options] for lv in levels(build_parser())}
    for alias, command in ALIASES.items():
        assert complete(bash_script, alias, "-") == complete(bash_script, "minihpc", command, "-") == options[command]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completes_in_an_interactive_shell(tmp_path):
    """A real interactive zsh on a pseudo-terminal (zsh/zpty): type, press TAB, read the line."""
    (tmp_path / ".zshrc").write_text(f"PS1='> '\n{completion_script('zsh')}")
    driver = r"""
zmodload zsh/zpty
zpty -b z 'zsh -d -i'
type() { zpty -w -n z $'\x15'"$1"$'\t'; zpty -r z out "*$2*" && print -r -- "ok: $2"; }
type 'minihpc que' 'minihpc queue'
type 'minihpc token cr' 'minihpc token create'
type 'sinfo --list' 'sinfo --list-reasons'
type 'sbatch --prio' 'sbatch --priority'
zpty -d z
"""
    env = dict(os.environ, ZDOTDIR=str(tmp_path), TERM="xterm", HOME=str(tmp_path))
    out = subprocess.run(["zsh", "-f", "-c", driver], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.splitlines() == ["ok: minihpc queue", "ok: minihpc token create",
                                       "ok: sinfo --list-reasons", "ok: sbatch --priority"], out.stderr
