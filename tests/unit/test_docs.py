"""The documentation cannot drift from the code.

Every ``make TARGET`` quoted in README.md or docs/**/*.md (in a code span or a code block) is a
target of the Makefile; every option quoted after ``minihpc SUBCOMMAND``, ``minicluster
SUBCOMMAND``, Slurm's command names (``sbatch``, ``srun``, ``squeue``, ``scancel``, ``sinfo``,
``sacct``, ``scontrol``) or on an ``#SBATCH``/``#MINIHPC`` line is an option of the parser that
command builds (minihpc's own modules, as the commands build them), and so is the subcommand.
In a table cell, a span of bare options (`` `-b/--batch` ``) belongs to the command the cell
named before it. A table row whose status cell says ``refused`` is the exception: it quotes
options minihpc does not have, on purpose.

Also: the docs site builds with ``mkdocs build --strict``, README.md stays short, and the
committed OpenAPI document is the app's.
"""

from __future__ import annotations

import argparse
import importlib.util
import functools
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from minihpc.cli import slurm
from minihpc.cli.main import build_parser
from minihpc.client.options import HeaderParser
from minihpc.job import srun as job_srun
from minihpc.validate import minicluster

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250

COMMAND = re.compile(r"(?<!from )(?<!import )(?:^|(?<=[\s(/`\"']))"
                     r"(make|minihpc|minicluster|sbatch|srun|squeue|scancel|sinfo|sacct|scontrol)(?=\s|$)")
"""A command word where a command starts (not ``minihpc.cli``, ``minihpc:*``, ``from minihpc import``)."""
HEADER = re.compile(r"^\s*#(SBATCH|MINIHPC)\s")
SEPARATOR = re.compile(r"&&|\|\||;\s|\s&(?:\s|$)|\$\(|\s\|\s")
"""Where a shell command ends: what follows belongs to another command (a pipe's reader)."""
SYNOPSIS_SEPARATOR = re.compile(r"&&|\|\||;\s|\$\(")
"""In a usage synopsis (``[-N N] [-n TASKS | --ntasks-per-node P]``) a bar is an alternative."""
OPTION = re.compile(r"^--?[A-Za-z][\w-]*$")
TARGET = re.compile(r"^[a-z][a-z0-9_.-]*$")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def makefile_targets() -> set[str]:
    """The Makefile's rules: ``name: ...`` lines (not ``VAR := ...``, not recipe lines)."""
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][\w. -]*?)\s*:(?!=)", line)
        if m:
            targets.update(m.group(1).split())
    return targets


# --- the quoted code ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quote:
    """One piece of quoted code: a code span, or a line of a code block (continuations joined)."""

    where: str
    text: str
    context: str = ""
    """For a span of bare options in a table cell, the command the cell named before it."""


def _spans(text: str) -> list[str]:
    return [m.group(2) for m in re.finditer(r"(`+)(.+?)\1", text)]


def _named(span: str) -> str:
    """The command a span names, with its subcommands: ``scontrol show node`` of
    ``scontrol show node [NAME|LIST]``; empty if it names none."""
    m = COMMAND.search(span)
    if not m:
        return ""
    words = []
    for word in span[m.start():].split():
        if word.startswith(("-", "[")):
            break
        words.append(word)
    return " ".join(words)


def _table_row(row: str, where: str) -> list[Quote]:
    """A table row's spans, each cell apart; a span of bare options right after one that names a
    command (`` `scancel -s SIG`, `-b/--batch` ``) is that command's."""
    cells = re.split(r"(?<!\\)\|", row.strip().strip("|"))
    if any(cell.strip().lower().startswith("refused") for cell in cells):
        return []  # options minihpc refuses, quoted on purpose
    out = []
    for cell in cells:
        context, end = "", 0
        for m in re.finditer(r"(`+)(.+?)\1", cell):
            span = m.group(2).replace("\\|", "|")
            if not re.fullmatch(r"[\s,]*(?:and|or)?\s*", cell[end:m.start()]):
                context = ""
            context, end = _named(span) or context, m.end()
            out.append(Quote(where, span, context if span.startswith("-") else ""))
    return out


def _paragraph(lines: list[tuple[int, str]], name: str) -> list[Quote]:
    """The spans of a paragraph, which may run over a line break, each at the line it starts on."""
    text = " ".join(line for _, line in lines)
    starts = [0]
    for _, line in lines:
        starts.append(starts[-1] + len(line) + 1)
    out = []
    for m in re.finditer(r"(`+)(.+?)\1", text):
        number = lines[sum(1 for start in starts[1:] if start <= m.start())][0]
        out.append(Quote(f"{name}:{number}", m.group(2)))
    return out


def parse_quotes(markdown: str, name: str) -> list[Quote]:
    """Every code span and code block line of a Markdown text, with where it is."""
    out: list[Quote] = []
    fence: str | None = None
    pending, pending_at = "", 0
    paragraph: list[tuple[int, str]] = []
    for number, line in enumerate([*markdown.splitlines(), ""], 1):
        stripped = line.strip()
        marker = re.match(r"^(`{3,}|~{3,})", stripped)
        if fence is None and paragraph and (not stripped or marker or stripped.startswith(("|", "#"))):
            out += _paragraph(paragraph, name)
            paragraph = []
        if fence is not None:
            if marker and stripped.startswith(fence):
                fence = None
            elif HEADER.match(line):
                out.append(Quote(f"{name}:{number}", stripped))
            else:
                code = re.sub(r"(^|\s)#\s.*$", "", line).rstrip()  # a shell comment
                code = re.sub(r"^\s*\$\s", "", code)  # a console prompt
                if code.endswith("\\"):
                    pending, pending_at = pending + code[:-1] + " ", pending_at or number
                    continue
                out.append(Quote(f"{name}:{pending_at or number}", pending + code))
                pending, pending_at = "", 0
        elif marker:
            fence = marker.group(1)[:3]
        elif stripped.startswith("|"):
            out += _table_row(stripped, f"{name}:{number}")
        elif stripped:
            paragraph.append((number, stripped))
    return out


def quotes(path: Path) -> list[Quote]:
    return parse_quotes(path.read_text(), str(path.relative_to(ROOT)))


def commands(quote: Quote) -> list[tuple[str, list[str], bool]]:
    """(command, its words, whether they are a usage synopsis) for each command a quote holds."""
    text = quote.text
    header = HEADER.match(text)
    if header:
        return [("#" + header.group(1), text.split()[1:], False)]
    if quote.context:
        text = f"{quote.context} {text}"
    synopsis = "[-" in text
    found = []
    for m in COMMAND.finditer(text):
        rest = (SYNOPSIS_SEPARATOR if synopsis else SEPARATOR).split(text[m.end():], maxsplit=1)[0]
        try:
            words = shlex.split(rest)
        except ValueError:  # an unbalanced quote in a synopsis
            words = rest.split()
        found.append((m.group(1), words, synopsis))
    return found


def _clean(word: str) -> str:
    return word.strip("[](){}\"'`,.;:")


# --- the parsers ----------------------------------------------------------------------------------


def _subparsers(parser) -> dict[str, argparse.ArgumentParser]:
    return {name: child for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, child in action.choices.items()}


def _takes_command(parser) -> bool:
    """Whether the parser ends with a command and its arguments (sbatch's script, srun's command),
    whose own options are none of ours."""
    return any(a.nargs == argparse.REMAINDER for a in parser._actions)


class Merged:
    """Several parsers answering as one: srun is ``minihpc run`` outside a batch script and
    job.srun's own inside one; the docs describe both."""

    def __init__(self, *parsers: argparse.ArgumentParser):
        self._option_string_actions = {k: v for p in parsers for k, v in p._option_string_actions.items()}
        self._actions = [a for p in parsers for a in p._actions]


@functools.cache
def root_parser(command: str):
    """The parser a command word starts in, built by minihpc's own modules (only read here)."""
    if command == "minihpc":
        return build_parser()
    if command == "minicluster":
        return minicluster.build_parser()
    if command in ("#SBATCH", "#MINIHPC"):
        return HeaderParser(command)
    own = _subparsers(build_parser())[slurm.ALIASES[command]]
    return Merged(own, job_srun.parser()) if command == "srun" else own


def _action(chain: list, name: str) -> tuple[argparse.Action | None, bool]:
    """(the action of option ``name`` in the innermost parser that has it, whether its value
    is attached: ``-K1``, ``-N3``)."""
    for parser in reversed(chain):
        if name in parser._option_string_actions:
            return parser._option_string_actions[name], False
    if not name.startswith("--") and len(name) > 2:
        return _action(chain, name[:2])[0], True
    return None, False


def problems_of(command: str, words: list[str], synopsis: bool) -> list[str]:
    """What of ``command words`` minihpc's parsers do not have: options, subcommands."""
    chain = [root_parser(command)]
    path, out, i = command, [], 0
    while i < len(words):
        word = _clean(words[i])
        i += 1
        if not word or word in ("...", "--", "-"):
            continue
        if word.startswith("-"):
            takes_value = True
            for name in (w.split("=", 1)[0] for w in re.split(r"[/|]", word) if w.startswith("-")):
                if not OPTION.match(name):
                    continue
                action, attached = _action(chain, name)
                if action is None:
                    out.append(f"{path} has no option {name}")
                takes_value = takes_value and action is not None and not attached and action.nargs not in (0, "?")
            if takes_value and "=" not in word:
                i += 1  # its value
            continue
        subs = _subparsers(chain[-1])
        if subs:
            choices = [c for c in word.split("|") if c]
            if all(c in subs for c in choices):
                chain.append(subs[choices[0]])
                path += f" {choices[0]}"
                continue
            if re.fullmatch(r"[a-z][a-z0-9-]*", word):
                out.append(f"{path} has no subcommand {word} (it has: {', '.join(sorted(subs))})")
            return out  # a placeholder (SUBCOMMAND): nothing more to check
        if not synopsis and _takes_command(chain[-1]):
            return out  # the job's script or command: the rest are its own arguments
    return out


def drift(found: list[Quote], targets: set[str]) -> list[str]:
    """One line per quoted target, option or subcommand that does not exist."""
    out = []
    for quote in found:
        for command, words, synopsis in commands(quote):
            if command == "make":  # its target: the first word that is neither VAR=value nor a flag
                target = next((w for w in map(_clean, words) if "=" not in w and not w.startswith("-")), "")
                if TARGET.match(target) and target not in targets:
                    out.append(f"{quote.where}: `{quote.text}`: the Makefile has no target {target}")
            else:
                out += [f"{quote.where}: `{quote.text}`: {p}" for p in problems_of(command, words, synopsis)]
    return out


# --- the tests ------------------------------------------------------------------------------------


def test_every_quoted_target_and_option_exists():
    found = [q for path in doc_files() for q in quotes(path)]
    assert len(found) > 100  # the parser of the Markdown found the quotes
    problems = drift(found, makefile_targets())
    assert not problems, "the docs quote what does not exist:\n" + "\n".join(problems)


def test_the_checker_catches_what_it_must():
    """The checker itself: a renamed target, option or subcommand is caught; values, a script's
    own arguments and refused options are not taken for options."""
    def check(markdown: str) -> list[str]:
        return [line.split(": ", 2)[2] for line in drift(parse_quotes(markdown, "x.md"), {"up", "down"})]

    assert check("`minihpc submit -N 3 --no-such-flag jobs/hello.py`") == ["minihpc submit has no option --no-such-flag"]
    assert check("`minihpc submit -N 3 jobs/hello.py --epochs 4`") == []
    assert check("`sbatch --qos=high job.sh`") == ["sbatch has no option --qos"]
    assert check("`minihpc validate baseline compare --metrics m.json --bogus 1`") == \
        ["minihpc validate baseline compare has no option --bogus"]
    assert check("`minihpc nodez`") and check("`scontrol shw job 3`")
    assert check("```bash\nsrun -l --mpi=pmix -K1 python x.py --not-srun | head -n 1\n```") == []
    assert check("```bash\n#SBATCH --array=0-7%2   # eight\n#SBATCH --wrapx=1\n```") == ["#SBATCH has no option --wrapx"]
    assert check("`minihpc cancel [ID...] [-n NAME] [-s SIG [-b\\|-f\\|-z]]`") == ["minihpc cancel has no option -z"]
    assert check("| `sbatch --qos` | refused | one line |") == []
    assert check("| `scancel -s SIG`, `-q/--batch` | supported |") == ["scancel has no option -q"]
    assert check("| `scontrol show node [NAME]`, `-o/--oneliner` | supported |") == []
    assert check("| `sbatch -Q` | yes | held (`scontrol release`); `--test-only` checks |") == []
    assert check("`from minihpc import checkpoint`") == []
    assert check("A span over a line break: `minihpc nodes\n--drian NODE`.") == ["minihpc nodes has no option --drian"]
    assert check("`make up`, `make down && make WORKERS=3 dashboards ARGS='-x --y'`") == \
        ["the Makefile has no target dashboards"]
    assert check("```text\nthe cluster keeps running (make down stops it)\n```") == []


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES} (the rest: docs/)"


def _openapi_module():
    spec = importlib.util.spec_from_file_location("docs_openapi", ROOT / "docs" / "hooks" / "openapi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_openapi_document_is_the_apps():
    openapi = _openapi_module()
    committed = json.loads(openapi.OUT.read_text())
    assert committed == openapi.spec(), "docs/api/openapi.json is stale: run python docs/hooks/openapi.py"


def test_every_route_and_submission_field_is_described():
    """docs/api.md's route table names every route of the committed OpenAPI document, and its
    text every field POST /jobs takes (api.jobs), so a new one cannot go undescribed."""
    from minihpc.api.jobs import FIELDS, OTHER_FIELDS

    page = (ROOT / "docs" / "api.md").read_text()
    document = json.loads(_openapi_module().OUT.read_text())
    routes = [f"{method.upper()} {path}" for path, ops in document["paths"].items() for method in ops]
    assert [r for r in routes if not re.search(re.escape(r) + r"[`?\s]", page)] == []
    assert [f for f in [*FIELDS, *OTHER_FIELDS, "requeue"] if f"`{f}`" not in page] == []


def test_every_setting_is_documented():
    from minihpc.core.config import Settings

    page = (ROOT / "docs" / "operations" / "configuration.md").read_text()
    assert [f.name for f in fields(Settings) if f"`MINIHPC_{f.name.upper()}`" not in page] == []


def test_the_docs_site_builds_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs is not installed: pip install -r requirements-docs.txt")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()
