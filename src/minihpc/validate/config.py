"""``--config FILE`` for the validate commands: a TOML or YAML (``.yaml``, ``.yml``) file
that may set any flag of the command. Precedence: a flag given on the command line > the
file > the command's documented default.

Keys are flag names, with dashes or underscores (``batch-size`` or ``batch_size``), or the
parameter-server spec's keys (``learning_rate``, ``num_epochs``, ``model:``, ``dataset:`` ...;
see :mod:`minihpc.validate.psconfig`); a table named after the subcommand (``[run]``,
``[fault-test]``, ``[baseline-compare]``; ``[validate]`` or ``[compare]``) overrides the
top-level keys for that subcommand only. Any other key or table is refused, all of them named
in one line: a typo must not pass silently. Values must have the flag's type.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from minihpc.core.errors import UsageError
from minihpc.validate import psconfig

COMMANDS = ("run", "compare", "validate", "fault-test", "baseline-save", "baseline-compare")
"""Tables a file may hold for one subcommand (``validate`` is the spec's name of ``compare``)."""
ALTERNATIVES = (("steps", "epochs"),)
"""Flags that say the same thing two ways: one source may set only one of them, and the one a
higher source sets wins over the other from a lower source."""


def _parse(path: Path) -> dict:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"config {path} is not readable ({exc})") from None
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise UsageError(f"config {path} is YAML but PyYAML is not installed; use TOML") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise UsageError(f"config {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"config {path} is not valid TOML: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"config {path} must be a table of flag = value")
    return data


def _own(command: str, table: str) -> bool:
    return table == command or {table, command} == {"validate", "compare"}


def load(path: str | Path, command: str) -> dict:
    """The flag values ``path`` sets for ``command``, keys with underscores; ``_names`` maps
    each to the key the file wrote, ``_unknown`` lists keys that are no flag anywhere."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"config {path} does not exist")
    data = _parse(path)
    tables = {k.replace("_", "-"): v for k, v in data.items() if isinstance(v, dict) and k.replace("_", "-") in COMMANDS}
    top = {k: v for k, v in data.items() if not (isinstance(v, dict) and k.replace("_", "-") in COMMANDS)}
    values, names, unknown = psconfig.translate(top)
    for table, inner in tables.items():
        if _own(command, table):
            more, more_names, more_unknown = psconfig.translate(inner)
            values.update(more)
            names.update({k: f"[{table}] {v}" for k, v in more_names.items()})
            unknown += [f"[{table}] {k}" for k in more_unknown]
    values["_tables"], values["_names"], values["_unknown"] = set(tables), names, unknown
    values["_path"] = str(path)
    return values


def coerce(key: str, value, default):
    """``value`` as the type of the flag whose default is ``default``; UsageError naming the
    key otherwise. A list for a comma-separated flag (``hidden``, ``seeds``) is joined."""
    if isinstance(value, (dict, list)) and not (isinstance(value, list) and isinstance(default, str)):
        raise UsageError(f"{key} is a {type(value).__name__}; expected a single value")
    if default is None or value is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise UsageError(f"{key} is {value!r}; expected true or false")
    if isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and (isinstance(default, float) or float(value).is_integer()):
            return type(default)(value)
        raise UsageError(f"{key} is {value!r}; expected {'an integer' if isinstance(default, int) else 'a number'}")
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return value if isinstance(value, str) else str(value)


def _alternatives(explicit: dict, from_file: dict, names: dict, where: str) -> dict:
    """``from_file`` less what a flag given overrides; UsageError where one source sets two
    alternatives."""
    from_file = dict(from_file)
    for group in ALTERNATIVES:
        given = [k for k in group if explicit.get(k) is not None]
        in_file = [k for k in group if from_file.get(k) is not None]
        if len(given) > 1:
            raise UsageError(f"{' and '.join('--' + k for k in given)} both given; give one")
        if len(in_file) > 1:
            raise UsageError(f"{where} sets both {' and '.join(names.get(k, k) for k in in_file)}; give one")
        if given:
            for k in group:
                from_file.pop(k, None)
    return from_file


def resolve(explicit: dict, from_file: dict, defaults: dict, types: dict | None = None) -> dict:
    """Every flag's value: explicit (not None) > file > default. A file key that is no flag
    of the command is a UsageError naming every such key (a typo must not pass silently); a
    value must have the type of the flag's default, or ``types[flag]`` where that is None."""
    from_file = dict(from_file)
    from_file.pop("_tables", None)
    names, unknown = from_file.pop("_names", {}), list(from_file.pop("_unknown", []))
    where = f"config {from_file.pop('_path')}" if "_path" in from_file else "config"
    unknown = sorted(unknown + [names.get(k, k) for k in set(from_file) - set(defaults)])
    if unknown:
        one = len(unknown) == 1
        raise UsageError(f"{where} sets {', '.join(unknown)}, which {'is not a flag' if one else 'are not flags'} "
                         f"of this command (flags: {', '.join(sorted(defaults))}; the parameter-server config's keys "
                         "are read too, see minihpc.validate.psconfig)")
    try:
        like = {k: defaults[k] if defaults[k] is not None or k not in (types or {}) else types[k]()
                for k in from_file}
        from_file = {k: coerce(names.get(k, k), v, like[k]) for k, v in from_file.items()}
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    from_file = _alternatives(explicit, from_file, names, where)
    out = dict(defaults)
    out.update(from_file)
    out.update({k: v for k, v in explicit.items() if v is not None and k in defaults})
    return out
