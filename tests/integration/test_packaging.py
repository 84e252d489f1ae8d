"""The package installs what it imports: minihpc's wheel, built here from the source tree, goes
into fresh venvs from the machine's wheelhouse only (no PyPI) -- bare, then with its node and api
extras -- and each install keeps its promise: its commands start, every module it promises
imports, and the bare one has no torch. uv makes the venvs; its cache (the one `make venv`
fills) hard-links the packages in, so torch costs seconds, not an unpack of gigabytes."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]

BARE_PROMISE = ("minihpc.cli", "minihpc.client", "minihpc.core", "minihpc.state")
"""The packages ``pip install minihpc`` promises, every module of them: the CLI, the client and
the layers under it."""

IMPORT_ALL = """
import importlib, pkgutil, sys
failed = []
for package in sys.argv[1:]:
    names = [package]
    if hasattr(importlib.import_module(package), "__path__"):
        names += [m.name for m in pkgutil.walk_packages(sys.modules[package].__path__, package + ".")]
    for name in names:
        if name.rpartition(".")[2] == "__main__":  # running it is the command, tried on its own
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""
"""Import every module of the packages named; print each that fails, with why."""


def run(*argv, check=True, timeout=300) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=timeout, cwd="/")
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} exited {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    path = Path(run("bash", ROOT / "scripts/wheelhouse.sh", "--path").stdout.strip())
    if not any(path.glob("*.whl")):
        pytest.skip(f"no wheelhouse at {path} (make venv fills it)")
    stamp = (path / ".minihpc-stamp").read_text().strip() if (path / ".minihpc-stamp").exists() else ""
    if stamp != run("bash", ROOT / "scripts/wheelhouse.sh", "--stamp").stdout.strip():
        pytest.skip(f"the wheelhouse at {path} holds other pins than requirements*.txt's (make venv refills it)")
    return path


@pytest.fixture(scope="module")
def uv() -> Path:
    found = Path(sys.executable).with_name("uv")
    if not found.exists():
        pytest.skip(f"no uv beside {sys.executable} (requirements-build.txt installs it)")
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, uv, wheelhouse) -> Path:
    """minihpc's wheel, built from a copy of the tree (the build's own files stay out of it)."""
    tree = tmp_path_factory.mktemp("tree")
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree)
    run(uv, "build", "--quiet", "--wheel", "--no-index", "--find-links", wheelhouse, "--out-dir", tree / "dist", tree)
    (built,) = (tree / "dist").glob("minihpc-*.whl")
    return built


def venv(path: Path, uv: Path, wheelhouse: Path, requirement: str) -> Path:
    """A fresh venv at PATH with REQUIREMENT installed from the wheelhouse alone; its bin/."""
    run(uv, "venv", "--quiet", "--python", sys.executable, path)
    run(uv, "pip", "install", "--quiet", "--python", path / "bin/python", "--no-index", "--find-links", wheelhouse,
        "-c", ROOT / "constraints.txt", requirement)
    return path / "bin"


@pytest.fixture(scope="module")
def bare(tmp_path_factory, uv, wheelhouse, wheel) -> Path:
    return venv(tmp_path_factory.mktemp("bare") / "venv", uv, wheelhouse, str(wheel))


@pytest.fixture(scope="module")
def node_api(tmp_path_factory, uv, wheelhouse, wheel) -> Path:
    return venv(tmp_path_factory.mktemp("node-api") / "venv", uv, wheelhouse, f"minihpc[node,api] @ {wheel.as_uri()}")


def test_the_bare_wheel_is_the_cli_and_client_without_torch(bare):
    for script in SCRIPTS:
        assert run(bare / script, "--help").stdout.startswith(f"usage: {script} "), script
    assert run(bare / "python", "-m", "minihpc", "--help").stdout.startswith("usage: minihpc ")
    no_torch = run(bare / "python", "-c", "import torch", check=False)
    assert no_torch.returncode != 0 and "No module named 'torch'" in no_torch.stderr
    promised = run(bare / "python", "-c", IMPORT_ALL, *BARE_PROMISE, check=False)
    assert promised.returncode == 0, f"the bare install promises these and cannot import them:\n{promised.stdout}"
    licence = run(bare / "python", "-c", "from importlib import metadata; print(*metadata.files('minihpc'))").stdout
    assert "LICENSE" in licence


def test_a_command_whose_extra_is_missing_names_it_in_one_line(bare):
    for argv, extra in ((["api"], "api"), (["report", "1"], "report"), (["agent", "--name", "n1"], "node")):
        out = run(bare / "minihpc", *argv, check=False)
        assert (out.returncode, out.stderr) == (1, f"minihpc {argv[0]}: needs minihpc[{extra}] "
                                                   f"(pip install 'minihpc[{extra}]')\n"), out.stderr


def test_node_and_api_extras_import_every_module_and_serve_report_and_api(node_api):
    imported = run(node_api / "python", "-c", IMPORT_ALL, "minihpc", check=False)
    assert imported.returncode == 0, f"minihpc[node,api] cannot import:\n{imported.stdout}"
    for command in ("report", "api"):
        assert run(node_api / "minihpc", command, "--help").stdout.startswith(f"usage: minihpc {command} ")
