"""``--config FILE`` for the validate commands: a TOML or YAML (``.yaml``, ``.yml``) file
that may set any flag of the command. Precedence: a flag given on the command line > the
file > the command's documented default.

Keys are flag names, with dashes or underscores (``batch-size`` or ``batch_size``); a table
named after the subcommand (``[run]``, ``[fault-test]``, ``[baseline-compare]``) overrides the
top-level keys for that subcommand only.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from minihpc.core.errors import UsageError


def _parse(path: Path) -> dict:
    text = path.read_text()
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


def load(path: str | Path, command: str) -> dict:
    """The flag values ``path`` sets for ``command``, keys with underscores."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"config {path} does not exist")
    data = _parse(path)
    tables = {k.replace("_", "-") for k, v in data.items() if isinstance(v, dict)}
    values = {k.replace("-", "_"): v for k, v in data.items() if not isinstance(v, dict)}
    own = next((v for k, v in data.items() if isinstance(v, dict) and k.replace("_", "-") == command), {})
    values.update({k.replace("-", "_"): v for k, v in own.items()})
    values["_tables"] = tables
    return values


def resolve(explicit: dict, from_file: dict, defaults: dict) -> dict:
    """Every flag's value: explicit (not None) > file > default. A file key that is no flag
    of the command is a UsageError (a typo must not pass silently)."""
    from_file = dict(from_file)
    from_file.pop("_tables", None)
    unknown = sorted(set(from_file) - set(defaults))
    if unknown:
        raise UsageError(f"config sets {', '.join(unknown)}, which is not a flag of this command "
                         f"(flags: {', '.join(sorted(defaults))})")
    out = dict(defaults)
    out.update(from_file)
    out.update({k: v for k, v in explicit.items() if v is not None and k in defaults})
    return out
