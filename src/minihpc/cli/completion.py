"""``minihpc completion bash|zsh``: a shell completion script made from the CLI's own parser.

The script is generated from the argparse tree every time, so it can never drift from the
commands: each level of subcommands (``token create``, ``validate baseline save``) with its
options, the options that take a value (skipped over while walking the line; completed from
their choices, else as file names) and positional choices. The Slurm aliases complete as the
subcommand they run: ``sinfo --dr<TAB>`` gives ``--drain``. Enable it in a shell with
``eval "$(minihpc completion bash)"`` (or ``zsh``).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field

from minihpc.core.config import Settings

SHELLS = ("bash", "zsh")


@dataclass(frozen=True)
class Level:
    """One command level: ``""`` (the top), ``"submit"``, ``"token create"``."""

    path: str
    commands: list[tuple[str, str]] = field(default_factory=list)
    """(subcommand, help)."""
    options: list[tuple[str, str]] = field(default_factory=list)
    """(option string, help)."""
    valued: list[str] = field(default_factory=list)
    """Option strings that take a value (the next word is not a subcommand)."""
    choices: dict[str, list[str]] = field(default_factory=dict)
    """Option string -> the values it takes; ``""`` -> the positionals' choices."""


def _help(action: argparse.Action | None) -> str:
    text = (action.help if action is not None else None) or ""
    text = re.sub(r"%\((\w+)\)s", lambda m: str(getattr(action, m.group(1), "")), text).replace("%%", "%")
    return " ".join(text.split())


def levels(parser: argparse.ArgumentParser, path: str = "") -> list[Level]:
    """Every command level under ``parser``, the top first."""
    level, below = Level(path), []
    for action in parser._actions:  # argparse has no public walk of its tree
        if action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a for a in action._choices_actions}
            for name, child in action.choices.items():
                if name in helps and helps[name].help == argparse.SUPPRESS:
                    continue
                level.commands.append((name, _help(helps.get(name))))
                below += levels(child, f"{path} {name}".strip())
        elif action.option_strings:
            level.options.extend((o, _help(action)) for o in action.option_strings)
            if action.nargs != 0:
                level.valued.extend(action.option_strings)
            for o in action.option_strings if action.choices else ():
                level.choices[o] = [str(c) for c in action.choices]
        elif action.choices:
            level.choices.setdefault("", []).extend(str(c) for c in action.choices)
    return [level, *below]


def _q(text: str) -> str:
    """``text`` as one single-quoted word for bash and zsh."""
    return "'" + text.replace("'", "'\\''") + "'"


def _spec(all_levels: list[Level]) -> str:
    """The shell function that sets, for a level, its subcommands, options, valued options
    and positional choices (``subs``, ``opts``, ``valued``, ``picks``: not ``commands`` or
    ``options``, which zsh keeps for itself)."""
    cases = "\n".join(
        f"        {_q(lv.path)}) subs={_q(' '.join(n for n, _ in lv.commands))}"
        f" opts={_q(' '.join(o for o, _ in lv.options))} valued={_q(' ' + ' '.join(lv.valued) + ' ')}"
        f" picks={_q(' '.join(lv.choices.get('', [])))} ;;"
        for lv in all_levels
    )
    values = "\n".join(
        f"        {_q(lv.path + '|' + option)}) echo {_q(' '.join(vals))} ;;"
        for lv in all_levels for option, vals in lv.choices.items() if option
    )
    return (
        "_minihpc_spec() {\n    subs='' opts='' valued=' ' picks=''\n    case $1 in\n"
        f"{cases}\n    esac\n}}\n\n"
        "_minihpc_values() {\n    case \"$1|$2\" in\n"
        f"{values}\n    esac\n}}\n"
    )


def _alias_cases(aliases: dict[str, str]) -> str:
    return "\n".join(f"        {alias}) at={_q(command)} ;;" for alias, command in aliases.items())


_WALK = """    _minihpc_spec "$at"
    for ((i = @FIRST@; i < @CWORD@; i++)); do
        word=${@WORDS@[i]}
        if ((skip)); then
            skip=0
        elif [[ $word == -* && $valued == *" $word "* ]]; then
            skip=1
        elif [[ -n $word && " $subs " == *" $word "* ]]; then
            at=${at:+$at }$word
            _minihpc_spec "$at"
        fi
    done
"""
"""Walk the words before the cursor down the command levels (shared by bash and zsh)."""

BASH = """# minihpc completion for bash: eval "$(minihpc completion bash)"
@SPEC@
_minihpc() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local at='' word i skip=0 subs opts valued picks
    case ${COMP_WORDS[0]##*/} in
@ALIASES@
    esac
@WALK@    if ((skip)); then
        COMPREPLY=($(compgen -W "$(_minihpc_values "$at" "$prev")" -- "$cur"))
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$subs $picks" -- "$cur"))
    fi
}

# -o default: file names where minihpc offers nothing (a job script, a --config file).
complete -o default -F _minihpc @NAMES@
"""

ZSH = """#compdef @NAMES@
# minihpc completion for zsh: eval "$(minihpc completion zsh)"
@SPEC@
_minihpc_help() {
    case "$1|$2" in
@HELP@
    esac
}

_minihpc() {
    local at='' word i skip=0 subs opts valued picks
    local -a described vals
    case ${words[1]:t} in
@ALIASES@
    esac
@WALK@    if ((skip)); then
        vals=(${(z)"$(_minihpc_values "$at" "${words[CURRENT-1]}")"})
        if (($#vals)); then compadd -a vals; else _files; fi
    elif [[ $PREFIX == -* ]]; then
        described=(${(f)"$(_minihpc_help "$at" options)"})
        _describe -t options option described
    elif [[ -n $subs$picks ]]; then
        described=(${(f)"$(_minihpc_help "$at" commands)"})
        _describe -t commands command described
    else
        _files
    fi
}

if ! (($+functions[compdef])); then
    autoload -Uz compinit && compinit
fi
compdef _minihpc @NAMES@
"""


def _zsh_help(all_levels: list[Level]) -> str:
    """``name:description`` lines per level, for zsh's ``_describe``."""
    def entries(pairs) -> str:
        return " ".join(_q(f"{name.replace(':', chr(92) + ':')}:{text}" if text else name) for name, text in pairs)

    lines = []
    for lv in all_levels:
        commands = [*lv.commands, *((c, "") for c in lv.choices.get("", []))]
        lines.append(f"        {_q(lv.path + '|commands')}) print -rl -- {entries(commands)} ;;")
        lines.append(f"        {_q(lv.path + '|options')}) print -rl -- {entries(lv.options)} ;;")
    return "\n".join(lines)


def script(shell: str, parser: argparse.ArgumentParser, aliases: dict[str, str]) -> str:
    """The completion script for ``shell`` (bash or zsh) of ``parser``'s tree, registered for
    ``minihpc`` and every alias (which starts at the subcommand it runs)."""
    all_levels = levels(parser)
    text = BASH if shell == "bash" else ZSH
    words, first, cword = ("COMP_WORDS", "1", "COMP_CWORD") if shell == "bash" else ("words", "2", "CURRENT")
    walk = _WALK.replace("@WORDS@", words).replace("@FIRST@", first).replace("@CWORD@", cword)
    return (text.replace("@SPEC@", _spec(all_levels)).replace("@WALK@", walk)
            .replace("@ALIASES@", _alias_cases(aliases)).replace("@HELP@", _zsh_help(all_levels) if shell == "zsh" else "")
            .replace("@NAMES@", " ".join([parser.prog, *aliases])))


def cmd_completion(args, settings: Settings) -> int:
    # Imported here: both import cli.main, which imports this module.
    from minihpc.cli.main import build_parser
    from minihpc.cli.slurm import ALIASES

    sys.stdout.write(script(args.shell, build_parser(), ALIASES))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("completion", help="print a bash or zsh completion script: eval \"$(minihpc completion bash)\"")
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=cmd_completion)
