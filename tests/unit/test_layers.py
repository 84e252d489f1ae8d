"""The house rules of src/minihpc: layers import only downward, every module path written as a
string resolves, and no module or function grows past what a reader can hold."""

import ast
import importlib
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "minihpc"

LAYERS = {
    "core": set(),
    "machine": set(),
    "job": {"machine", "core"},  # core is pure and dependency-free: srun and the local torchrun parse with it
    "state": {"core"},
    "restart": {"state", "machine", "core"},
    "metrics": {"state", "machine", "core", "job"},
    "master": {"restart", "metrics", "state", "machine", "core"},
    "node": {"metrics", "state", "machine", "core", "job"},
    "client": {"state", "machine", "core"},
    "ops": {"client", "restart", "metrics", "state", "machine", "core", "job"},
    "validate": {"client", "ops", "state", "machine", "core", "job"},
    "api": {"client", "ops", "state", "core"},
    "cli": {"api", "client", "ops", "validate", "master", "node", "restart", "metrics", "state", "machine", "core", "job"},
}
"""Each layer and the layers it may import (besides itself and the top-level ``minihpc``)."""

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def layer_of(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else None


def imported_layers(path: Path, source: str) -> set[tuple[str, int]]:
    """(layer, line) for every ``minihpc.<layer>`` the module imports, at any depth."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names] if node.module == "minihpc" else [node.module]
        elif isinstance(node, ast.ImportFrom) and node.level:
            pytest.fail(f"{path.relative_to(ROOT)}:{node.lineno}: relative import; write minihpc.<layer>... so layers show")
        for name in names:
            parts = name.split(".")
            if parts[0] == "minihpc" and len(parts) > 1 and parts[1] in LAYERS:
                found.add((parts[1], node.lineno))
    return found


def violations(path: Path, source: str | None = None) -> list[str]:
    layer = layer_of(path)
    if layer is None:
        return []
    allowed = LAYERS[layer] | {layer}
    return [f"{path.relative_to(ROOT)}:{line}: {layer} imports {other} (may import: {', '.join(sorted(LAYERS[layer])) or 'nothing of ours'})"
            for other, line in sorted(imported_layers(path, source or path.read_text())) if other not in allowed]


def test_every_subpackage_is_a_known_layer():
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages - set(LAYERS) == set(), "add the new package to LAYERS with what it may import"


def test_layers_import_only_downward():
    problems = [v for path in modules() for v in violations(path)]
    assert not problems, "\n".join(problems)


def test_the_layer_check_catches_an_upward_import():
    models = PACKAGE / "core" / "models.py"
    source = models.read_text() + "\nfrom minihpc.cli import main\n"
    line = source.count("\n") - 1
    assert violations(models, source) == [f"src/minihpc/core/models.py:{line + 1}: core imports cli (may import: nothing of ours)"]


def _python_module_strings() -> set[str]:
    """Every ``-m minihpc...`` a program, Dockerfile, Makefile or Compose file starts."""
    found = set()
    files = [*modules(), *ROOT.glob("scripts/*"), *ROOT.glob("scripts/images/*"), ROOT / "Dockerfile", ROOT / "Makefile",
             ROOT / "docker-compose.yml", *ROOT.glob("config/*.yml")]
    for path in files:
        if path.is_file():
            text = path.read_text(errors="replace")
            found |= set(re.findall(r'-m["\',\s]+(minihpc(?:\.[a-z_]+)+)', text))
    return found


def test_every_module_path_written_as_a_string_resolves():
    from minihpc.core import launch_spec

    strings = _python_module_strings()
    assert "minihpc.cli" in strings and "minihpc.node.entrypoint" in strings
    for name in strings | {launch_spec.TORCHRUN_MODULE, launch_spec.RANK_MODULE}:
        assert importlib.util.find_spec(name) is not None, f"no module {name}"
        if importlib.util.find_spec(name).submodule_search_locations:  # a package runs its __main__
            assert importlib.util.find_spec(f"{name}.__main__") is not None, f"{name} has no __main__"
    module, _, attribute = launch_spec.LAUNCH_TASK.rpartition(".")
    assert callable(getattr(importlib.import_module(module), attribute)), launch_spec.LAUNCH_TASK
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for target in scripts.values():
        module, _, attribute = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attribute)), target


def test_job_scripts_keep_importing_the_sdk_from_minihpc():
    from minihpc import checkpoint, preempt, progress

    assert (checkpoint.__name__, preempt.__name__, progress.__name__) == (
        "minihpc.job.checkpoint", "minihpc.job.preempt", "minihpc.job.progress")


def test_no_module_or_function_is_too_long():
    """In the package, the scripts and the example jobs: everything outside tests."""
    problems = []
    for path in [*modules(), *ROOT.glob("scripts/*.py"), *ROOT.glob("jobs/*.py")]:
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES:
            problems.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}() has {length} lines "
                                    f"(at most {MAX_FUNCTION_LINES})")
    assert not problems, "\n".join(problems)
