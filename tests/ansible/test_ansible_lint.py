"""`make ansible-check`: the playbooks parse, and ansible-lint passes with its production profile
(fully qualified modules, quoted modes, task names as sentences, handlers, no risky shell)."""

import subprocess

from tests.ansible.hosts import ROOT


def test_the_playbooks_pass_ansible_lint_with_the_production_profile():
    proc = subprocess.run(["make", "--no-print-directory", "ansible-check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Profile 'production' was required, and it passed" in out, out[-2000:]
