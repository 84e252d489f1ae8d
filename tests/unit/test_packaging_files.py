"""What pyproject.toml declares and the pinned files agree: ranges with upper bounds, a node's
requirements.txt without the test tools, a lock whose pins are constraints.txt's and carry
hashes, and a CLI that names the extra a command lacks (tests/integration/test_packaging.py
installs the real wheel)."""

import argparse
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from minihpc.cli.main import main
from minihpc.core.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRA_DEPS = PROJECT["optional-dependencies"]
NODE_EXTRAS = ("node", "api", "report", "vision")
"""What a node installs besides the base: requirements.txt names exactly these."""
OLD_PYTHON_ONLY = {"async-timeout"}
"""In requirements.txt for redis-py on Python < 3.11.3 (its own marker): the wheelhouse must hold it."""


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(*extras: str) -> set[str]:
    deps = [d for extra in extras for d in EXTRA_DEPS[extra]] if extras else PROJECT["dependencies"]
    return {norm(Requirement(d).name) for d in deps}


def listed(path: str) -> set[str]:
    """The distribution names a pip requirements file lists."""
    lines = (line.split("#", 1)[0].strip() for line in (ROOT / path).read_text().splitlines())
    return {norm(Requirement(line).name) for line in lines if line and not line.startswith("-")}


def pins(text: str) -> dict[str, str]:
    return {norm(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9][^\s=]*)==(\S+)", text, re.M)}


def test_every_declared_range_has_an_upper_bound():
    unbounded = [d for deps in [PROJECT["dependencies"], *EXTRA_DEPS.values()] for d in deps
                 if not any(s.operator in ("<", "<=", "==", "~=", "===") for s in Requirement(d).specifier)]
    assert not unbounded, f"give these an upper bound (the next major may break us): {unbounded}"


def test_the_bare_install_has_no_torch_and_no_web_framework():
    assert declared() == {"redis", "hiredis", "rq"}


def test_requirements_txt_is_a_nodes_extras_and_the_test_tools_are_apart():
    node = declared() | declared(*NODE_EXTRAS)
    test_tools = declared("test") - node
    assert listed("requirements.txt") - OLD_PYTHON_ONLY == node
    assert listed("requirements-test.txt") == test_tools
    assert not listed("requirements.txt") & {"pytest", "httpx", "selenium"}, "the node image would get test tools"


def test_the_lock_pins_with_hashes_exactly_what_constraints_txt_pins():
    lock = (ROOT / "requirements.lock").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", lock.split("\n", 2)[2])
    unhashed = [e.split()[0] for e in entries if "--hash=sha256:" not in e]
    assert not unhashed, f"pinned without a hash: {unhashed}"
    locked = pins(lock)
    assert locked == pins((ROOT / "constraints.txt").read_text()), "run make lock: constraints.txt is the lock's pins"
    assert (listed("requirements.txt") | listed("requirements-test.txt")) <= set(locked)


def closure(requirements: list[str]) -> set[str]:
    """The installed distributions REQUIREMENTS bring, with everything they depend on."""
    seen, todo = set(), [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if norm(req.name) in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(norm(req.name))
        todo += [Requirement(d) for d in metadata.distribution(req.name).requires or []]
    return seen


def test_each_module_a_command_may_miss_comes_with_the_extra_it_names():
    providers = metadata.packages_distributions()
    for module, extra in EXTRAS.items():
        assert {norm(d) for d in providers[module]} & closure(EXTRA_DEPS[extra]), f"minihpc[{extra}] brings no {module}"


def _parser_whose_api_lacks(module: str) -> argparse.ArgumentParser:
    def cmd_api(args, settings):
        raise ModuleNotFoundError(f"No module named '{module}'", name=module)

    parser = argparse.ArgumentParser(prog="minihpc")
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--config")
    parser.add_argument("--redis-url")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("api").set_defaults(func=cmd_api)
    return parser


def test_a_command_whose_extra_is_missing_says_which_in_one_line(capsys):
    assert main(["api"], parser=_parser_whose_api_lacks("uvicorn")) == 1
    assert capsys.readouterr().err == "minihpc api: needs minihpc[api] (pip install 'minihpc[api]')\n"


def test_a_module_no_extra_brings_is_still_a_bug_with_its_traceback():
    try:
        main(["api"], parser=_parser_whose_api_lacks("no_such_module"))
    except ModuleNotFoundError as exc:
        assert exc.name == "no_such_module"
    else:
        raise AssertionError("a daemon keeps the traceback of a module no extra brings")


def test_python_m_minihpc_is_the_minihpc_command():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-m", "minihpc", "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert (out.returncode, out.stdout) == (0, "minihpc 0.1.0\n"), out.stderr


def test_the_licence_is_mit_as_pyproject_says():
    assert PROJECT["license"] == {"text": "MIT"}
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 the minihpc authors" in text
