"""The Redis ACL file minihpc writes: what each role may do, and no secret in the file."""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from minihpc.state import acl, keys

PASSWORDS = {role: f"pw-{role}" for role in acl.ROLES}


def _users(text: str) -> dict[str, list[str]]:
    return {line.split()[1]: line.split()[2:] for line in text.splitlines()}


def test_every_role_loses_the_dangerous_commands_after_gaining_its_own():
    for role in acl.ROLES:
        r = acl.rules(role)
        assert "-@dangerous" in r
        assert all(f"-{c}" in r for c in ("flushall", "flushdb", "config", "debug", "module", "shutdown", "acl"))
        # Rules apply in order: nothing added back after the denials but what rq needs.
        assert r.index("-@dangerous") > max((i for i, x in enumerate(r) if x.startswith("+@")), default=-1)


def test_a_node_may_touch_every_minihpc_key_but_the_api_tokens():
    r = acl.rules("node")
    patterns = [p[1:] for p in r if p.startswith("~")]
    assert "minihpc:tokens" not in patterns and "minihpc:*" not in patterns
    for template in (keys.JOB, keys.JOB_RESULTS, keys.NODE_ALIVE, keys.JOBS_PENDING, keys.MASTER_ALIVE, keys.EVENTS):
        assert template.replace("{0}", "*").replace("{1}", "*") in patterns
    assert "rq:*" in patterns


def test_the_exporter_reads_only_and_the_cli_reads_rq_only():
    exporter = acl.rules("exporter")
    assert "+@all" not in exporter and "+@write" not in exporter
    assert all(p.startswith("%R~") for p in exporter if "~" in p)
    assert "%R~rq:*" in acl.rules("cli") and "~rq:*" not in acl.rules("cli")


def test_the_file_has_digests_not_passwords_and_the_default_user_off():
    text = acl.acl_file(PASSWORDS)
    users = _users(text)
    assert set(users) == {"default", *acl.ROLES}
    assert users["default"][0] == "off" and "resetpass" in users["default"]
    for role, password in PASSWORDS.items():
        assert password not in text
        assert f"#{hashlib.sha256(password.encode()).hexdigest()}" in users[role]
        assert users[role][:2] == ["reset", "on"]


def test_a_missing_password_is_named():
    with pytest.raises(ValueError, match="no Redis password for the role.s. node, exporter"):
        acl.acl_file(dict(PASSWORDS, node="", exporter=""))
    with pytest.raises(ValueError, match="unknown Redis role 'admin'"):
        acl.rules("admin")


def test_the_module_prints_the_file_from_the_environment_with_the_stdlib_only():
    env = {acl.password_variable(role): pw for role, pw in PASSWORDS.items()}
    src = Path(acl.__file__).parents[2]
    out = subprocess.run([sys.executable, "-S", "-m", "minihpc.state.acl"], env={**env, "PYTHONPATH": str(src)},
                         capture_output=True, text=True, check=True).stdout
    assert out == acl.acl_file(PASSWORDS)
    bad = subprocess.run([sys.executable, "-S", "-m", "minihpc.state.acl"], env={"PYTHONPATH": str(src)},
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("minihpc: no Redis password for the role(s) master, node, cli, api, exporter")


def test_urls_name_the_role():
    assert acl.url("node", "p", "redis", 6379) == "redis://node:p@redis:6379/0"
