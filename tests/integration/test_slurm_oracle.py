"""Differential tests against real Slurm: the same batch scripts run through Debian's Slurm
(slurm-wlm 22.05 as a one-host cluster, scripts/slurm-oracle.sh) with ``sbatch --wait -o FILE``
and through minihpc's local cluster (the shared fixture; its job logs), and what each saw is
compared: the SLURM_* variables (names and value forms), srun's task numbering, ``scontrol show
hostnames``, exit codes.

Real Slurm has one host here, so every job is ``-N 1``. Slurm starts once for the module; every
case's job goes to both systems at once (fixture ``runs``) and the tests compare the outputs.
What minihpc does not do like Slurm is written down: variables in an allowlist checked both ways,
behaviour in an ``xfail(strict=True)`` test whose reason names the difference -- so a fix, or a
regression, shows. Real Slurm needs root (slurmd starts jobs as their users).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port, wait_until

pytestmark = pytest.mark.integration

ORACLE = Path(__file__).parents[2] / "scripts" / "slurm-oracle.sh"
SBATCH, SCONTROL = "/usr/bin/sbatch", "/usr/bin/scontrol"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
"""Real Slurm's jobs get this PATH (sbatch exports the submitter's): no venv, whose sbatch and
scontrol are minihpc's."""
TIMEOUT = 120

# --- the cases: one batch script each, run by both systems ------------------------------------

TAGGED = re.compile(r"^@([\w.-]+)@ ?(.*)$")
"""What the scripts print: ``@TAG@ text``, one line per write (sed -u), so lines of tasks that
share an output file cannot tear; everything else in the output is ignored."""

ENV_SCRIPT = r"""#!/bin/bash
env | grep -E '^SLURMD?_' | sort | sed -u 's/^/@batch@ /'
scontrol show hostnames | sed -u 's/^/@hostnames@ /'
scontrol show hostnames 'node[01-03,7],login' | sed -u 's/^/@hostnames-list@ /'
srun -n 2 bash -c 'env | grep -E "^SLURMD?_" | sort | sed -u "s/^/@n2.$SLURM_PROCID@ /"'
srun bash -c 'env | grep -E "^SLURMD?_" | sort | sed -u "s/^/@default.$SLURM_PROCID@ /"'
srun -n 1 bash -c 'env | grep -E "^SLURMD?_" | sort | sed -u "s/^/@n1.$SLURM_PROCID@ /"'
"""

EXITS_SCRIPT = r"""#!/bin/bash
step() {  # step TAG SRUN-ARGS...: srun, then its exit status and its stderr, tagged
    local tag=$1 err rc
    shift
    err=$(mktemp)
    srun "$@" 2>"$err"
    rc=$?
    echo "@$tag.rc@ $rc"
    sed -u "s/^/@$tag.err@ /" "$err"
    rm -f "$err"
}
step fail -n 2 bash -c 'exit $((SLURM_PROCID == 1 ? 3 : 0))'
step survivor -n 2 bash -c 'if [ $SLURM_PROCID = 1 ]; then exit 3; fi; sleep 1; echo "@survivor@ $SLURM_PROCID"'
step highest -n 2 bash -c 'if [ $SLURM_PROCID = 1 ]; then sleep 0.5; exit 5; fi; exit 4'
step killed -n 2 bash -c 'if [ $SLURM_PROCID = 1 ]; then kill -9 $$; fi; sleep 1'
step K1 -K1 -n 1 true
step kill-on-bad-exit --kill-on-bad-exit=1 -n 1 true
step wait -W 5 -n 1 true
srun -n 2 bash -c 'exit $((SLURM_PROCID == 1 ? 3 : 0))'
"""

EXIT7_SCRIPT = r"""#!/bin/bash
echo "@submit-dir@ $SLURM_SUBMIT_DIR"
echo "@pwd@ $(pwd)"
srun bash -c 'echo "@task-pwd@ $(pwd)"'
exit 7
"""

IO_SCRIPT = r"""#!/bin/bash
srun python3 - <<'PY'
import os
print(f"@heredoc@ task {os.environ['SLURM_PROCID']} of {os.environ['SLURM_NTASKS']}", flush=True)
PY
echo "@captured@ $(srun printenv SLURM_PROCID | sort | tr '\n' ' ')"
echo "piped in" | srun -n 2 cat | sed -u 's/^/@pipe@ /'
srun -n 2 --input=1 bash -c 'echo "@input@ $SLURM_PROCID:$(cat)"' <<< "only one"
srun -l bash -c 'echo labelled' | sort | sed -u 's/^/@label@ /'
srun -n 2 bash -c 'echo "err $SLURM_PROCID" >&2' 2>&1 >/dev/null | sort | sed -u 's/^/@stderr@ /'
srun -n 2 -o "io-%t.$SLURM_JOB_ID" bash -c 'echo "file $SLURM_PROCID"'
cat "io-0.$SLURM_JOB_ID" "io-1.$SLURM_JOB_ID" | sed -u 's/^/@ofile@ /'
timeout 10 srun -n 2 yes | head -n 1 | sed -u 's/^/@yes@ /'
echo "@yes.rc@ ${PIPESTATUS[0]}"
"""


@dataclass(frozen=True)
class Case:
    script: str
    options: tuple[str, ...]


CASES = {
    "env": Case(ENV_SCRIPT, ("-N", "1", "--ntasks-per-node", "2")),
    "exits": Case(EXITS_SCRIPT, ("-N", "1", "--ntasks-per-node", "2")),
    "exit7": Case(EXIT7_SCRIPT, ("-N", "1", "--ntasks-per-node", "1", "-D", "{work}/sub")),
    "io": Case(IO_SCRIPT, ("-N", "1", "--ntasks-per-node", "2")),
}

# --- what minihpc is known to lack or add --------------------------------------------------------

BATCH_LACKS = {
    "SLURM_CLUSTER_NAME", "SLURM_WORKING_CLUSTER",  # no clusters (partitions: -p, MINIHPC_PARTITIONS)
    "SLURM_JOB_GID", "SLURM_PRIO_PROCESS", "SLURM_SUBMIT_HOST", "SLURM_TASK_PID", "SLURM_NODE_ALIASES",
    "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN",
    # minihpc sets it only when the job runs as a mapped user (node.batch); Slurm always does.
    "SLURM_JOB_UID",
    # The oracle's own slurm.conf, exported from sbatch's environment: not a difference.
    "SLURM_CONF",
}
"""SLURM_* variables real Slurm gives a batch script (``man sbatch``, OUTPUT ENVIRONMENT
VARIABLES) that minihpc's lacks."""

TASK_LACKS = BATCH_LACKS | {
    "SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0", "SLURM_LAUNCH_NODE_IPADDR", "SLURM_SRUN_COMM_HOST",
    "SLURM_SRUN_COMM_PORT", "SLURM_STEP_LAUNCHER_PORT", "SLURM_UMASK",
}
"""... and an srun task (``man srun``, OUTPUT ENVIRONMENT VARIABLES)."""

MINIHPC_ADDS = {"SLURM_RESTART_COUNT"}
"""What minihpc sets that Slurm does not here: Slurm sets SLURM_RESTART_COUNT only once a job
has been requeued (``man sbatch``); minihpc always does, 0 on the first attempt."""

# --- value forms ----------------------------------------------------------------------------------

INT = r"\d+"
COUNTS = r"\d+(\(x\d+\))?(,\d+(\(x\d+\))?)*"  # 2, 2(x3), 2(x2),1
HOST = r"[\w.-]+"
HOSTLIST = r"[\w.-]+(\[[\d,-]+\][\w.-]*)?(,[\w.-]+(\[[\d,-]+\][\w.-]*)?)*"
IDS = r"\d+(,\d+)*"
WORD = r"\S+"
PATH = r"/\S*"

SAME, ITS_HOST, ITS_JOB, FORM = "same", "its host", "its job id", "form"
"""How two values of one variable compare, beyond both having its form: equal; each its own
system's host (the allocation is one node); each its own job id; the form alone."""

FORMS: dict[str, tuple[str, str]] = {
    "SLURMD_NODENAME": (HOST, ITS_HOST),
    "SLURM_CLUSTER_NAME": (WORD, FORM),
    "SLURM_CONF": (PATH, FORM),
    "SLURM_CPUS_ON_NODE": (INT, SAME),
    "SLURM_DISTRIBUTION": (WORD, SAME),
    "SLURM_GTIDS": (IDS, SAME),
    "SLURM_JOBID": (INT, ITS_JOB),
    "SLURM_JOB_CPUS_PER_NODE": (COUNTS, SAME),
    "SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0": (COUNTS, SAME),
    "SLURM_JOB_GID": (INT, SAME),
    "SLURM_JOB_ID": (INT, ITS_JOB),
    "SLURM_JOB_NAME": (WORD, SAME),
    "SLURM_JOB_NODELIST": (HOSTLIST, ITS_HOST),
    "SLURM_JOB_NUM_NODES": (INT, SAME),
    "SLURM_JOB_PARTITION": (WORD, FORM),
    "SLURM_JOB_UID": (INT, SAME),
    "SLURM_JOB_USER": (WORD, SAME),
    "SLURM_LAUNCH_NODE_IPADDR": (r"[\d.:a-f]+", FORM),
    "SLURM_LOCALID": (INT, SAME),
    "SLURM_NNODES": (INT, SAME),
    "SLURM_NODEID": (INT, SAME),
    "SLURM_NODELIST": (HOSTLIST, ITS_HOST),
    "SLURM_NODE_ALIASES": (WORD, FORM),
    "SLURM_NPROCS": (INT, SAME),
    "SLURM_NTASKS": (INT, SAME),
    "SLURM_NTASKS_PER_NODE": (INT, SAME),
    "SLURM_PRIO_PROCESS": (INT, FORM),
    "SLURM_PROCID": (INT, SAME),
    "SLURM_RESTART_COUNT": (INT, SAME),
    "SLURM_SRUN_COMM_HOST": (WORD, FORM),
    "SLURM_SRUN_COMM_PORT": (INT, FORM),
    "SLURM_STEPID": (INT, SAME),
    "SLURM_STEP_ID": (INT, SAME),
    "SLURM_STEP_LAUNCHER_PORT": (INT, FORM),
    "SLURM_STEP_NODELIST": (HOSTLIST, ITS_HOST),
    "SLURM_STEP_NUM_NODES": (INT, SAME),
    "SLURM_STEP_NUM_TASKS": (INT, SAME),
    "SLURM_STEP_TASKS_PER_NODE": (COUNTS, SAME),
    "SLURM_SUBMIT_DIR": (PATH, SAME),
    "SLURM_SUBMIT_HOST": (HOST, FORM),
    "SLURM_TASKS_PER_NODE": (COUNTS, SAME),
    "SLURM_TASK_PID": (INT, FORM),
    "SLURM_TOPOLOGY_ADDR": (HOST, ITS_HOST),
    "SLURM_TOPOLOGY_ADDR_PATTERN": (WORD, SAME),
    "SLURM_UMASK": (r"0[0-7]{3}", SAME),
    "SLURM_WORKING_CLUSTER": (WORD, FORM),
}
"""Every SLURM_* variable either system sets here: its value's form, and how the two compare."""

# --- running both ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One system's run of a case."""

    system: str
    job_id: int
    host: str  # the allocation's one node
    exit_code: int | None  # sbatch --wait's status; minihpc's job exit code
    exit_field: str  # ``scontrol show job``'s ExitCode=, "3:0"
    state: str
    output: str

    def tagged(self, tag: str) -> list[str]:
        return [m[2] for m in map(TAGGED.match, self.output.splitlines()) if m and m[1] == tag]

    def env(self, tag: str) -> dict[str, str]:
        lines = self.tagged(tag)
        assert lines, f"{self.system} job {self.job_id} printed no @{tag}@ lines:\n{self.output}"
        return dict(line.split("=", 1) for line in lines)

    def one(self, tag: str) -> str:
        lines = self.tagged(tag)
        assert len(lines) == 1, f"{self.system} job {self.job_id}: @{tag}@ lines {lines}:\n{self.output}"
        return lines[0]

    def errors(self, tag: str) -> list[str]:
        """srun's ``srun: error:`` lines of step TAG, the host written ``HOST``."""
        return [re.sub(rf"^srun: error: {re.escape(self.host)}:", "srun: error: HOST:", line)
                for line in self.tagged(f"{tag}.err") if line.startswith("srun: error:")]


@dataclass(frozen=True)
class Pair:
    slurm: Side
    minihpc: Side


@dataclass(frozen=True)
class Slurm:
    env: dict[str, str]
    host: str

    def run(self, *args, check=True) -> subprocess.CompletedProcess:
        proc = subprocess.run([*map(str, args)], env=self.env, capture_output=True, text=True, timeout=TIMEOUT)
        assert not check or proc.returncode == 0, f"{args} exited {proc.returncode}: {proc.stderr}"
        return proc


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """Real Slurm, from scripts/slurm-oracle.sh, for this module; stopped at its end."""
    if os.geteuid() != 0:
        pytest.fail("real Slurm's slurmd must run as root (it starts jobs as their users); run: "
                    "sudo .venv/bin/python -m pytest tests/integration/test_slurm_oracle.py", pytrace=False)
    folder = tmp_path_factory.mktemp("slurm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["PATH"] = SYSTEM_PATH
    settings = {"SLURM_ORACLE_CTLD_PORT": str(free_port()), "SLURM_ORACLE_SLURMD_PORT": str(free_port()),
                "SLURM_ORACLE_CPUS": "8"}  # every case's job at once
    start = subprocess.run(["bash", ORACLE, "start", folder], env={**env, **settings}, capture_output=True, text=True,
                           timeout=600)
    if start.returncode != 0:
        lines = start.stderr.strip().splitlines() or [f"{ORACLE} start exited {start.returncode}"]
        pytest.fail(next((line for line in lines if line.startswith(("slurm-oracle.sh:", "the Slurm oracle test:"))),
                         lines[-1]), pytrace=False)
    [conf] = re.findall(r"^SLURM_CONF=(.+)$", start.stdout, re.M)
    yield Slurm({**env, "SLURM_CONF": conf}, socket.gethostname().split(".")[0])
    subprocess.run(["bash", ORACLE, "stop", folder], env=env, capture_output=True, timeout=60)


def _exit_field(text: str) -> tuple[str, str]:
    return re.search(r"\bJobState=(\S+)", text)[1], re.search(r"\bExitCode=(\S+)", text)[1]


def _run_slurm(slurm: Slurm, name: str, case: Case, work: Path) -> Side:
    out = work / f"{name}.slurm.out"
    options = [o.format(work=work) for o in case.options]
    proc = subprocess.run([SBATCH, "--wait", "--parsable", *options, "-o", out, work / f"oracle_{name}.sh"],
                          env=slurm.env, cwd=work, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.stdout.strip(), f"Slurm's sbatch {name} exited {proc.returncode}: {proc.stderr}"
    job_id = int(proc.stdout.split(";")[0])
    # Read at once: MinJobAge (slurm-oracle.sh) keeps an ended job only seconds.
    state, field = _exit_field(slurm.run(SCONTROL, "show", "job", job_id).stdout)
    return Side("Slurm", job_id, slurm.host, proc.returncode, field, state, out.read_text())


def _submit_minihpc(cluster, name: str, case: Case, work: Path) -> int:
    options = [o.format(work=work) for o in case.options]
    proc = subprocess.run([sys.executable, "-m", "minihpc.cli", "submit", "--parsable", *options,
                           work / f"oracle_{name}.sh"], env=cluster.env, cwd=work, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, f"minihpc submit {name}: {proc.stderr}"
    return int(proc.stdout)


def _collect_minihpc(cluster, job_id: int) -> Side:
    info = cluster.wait(job_id, timeout=TIMEOUT)
    state, field = _exit_field(cluster.cli("scontrol", "show", "job", job_id).stdout)
    return Side("minihpc", job_id, info["nodes"][0], info["exit_code"], field, state,
                cluster.cli("logs", job_id).stdout)


@pytest.fixture(scope="module")
def runs(slurm, cluster, tmp_path_factory) -> dict[str, Pair]:
    """Every case, run by real Slurm and by minihpc at the same time."""
    work = tmp_path_factory.mktemp("oracle")
    (work / "sub").mkdir()
    for name, case in CASES.items():
        (work / f"oracle_{name}.sh").write_text(case.script)
    wait_until(cluster.idle, timeout=30, message="an idle minihpc cluster")
    with ThreadPoolExecutor(len(CASES)) as pool:
        real = {name: pool.submit(_run_slurm, slurm, name, case, work) for name, case in CASES.items()}
        ids = {name: _submit_minihpc(cluster, name, case, work) for name, case in CASES.items()}
        ours = {name: _collect_minihpc(cluster, job_id) for name, job_id in ids.items()}
        return {name: Pair(real[name].result(), ours[name]) for name in CASES}


# --- the comparisons ------------------------------------------------------------------------------


def _differences(slurm: Side, slurm_env: dict, ours: Side, our_env: dict) -> list[str]:
    """Each variable both set whose values do not compare as FORMS says, as one line."""
    out = []
    for name in sorted(set(slurm_env) & set(our_env)):
        if name not in FORMS:
            out.append(f"{name}: not in FORMS; say what form its value has (Slurm {slurm_env[name]!r})")
            continue
        form, how = FORMS[name]
        s, m = slurm_env[name], our_env[name]
        if not re.fullmatch(form, s):
            out.append(f"{name}: Slurm's value {s!r} is not of the form {form}; FORMS is wrong")
        if not re.fullmatch(form, m):
            out.append(f"{name}: minihpc's value {m!r} is not of the form {form} (Slurm's: {s!r})")
        elif how == SAME and s != m:
            out.append(f"{name}: Slurm {s!r}, minihpc {m!r}")
        elif how == ITS_HOST and (s, m) != (slurm.host, ours.host):
            out.append(f"{name}: Slurm {s!r} (its node {slurm.host!r}), minihpc {m!r} (its node {ours.host!r})")
        elif how == ITS_JOB and (s, m) != (str(slurm.job_id), str(ours.job_id)):
            out.append(f"{name}: Slurm {s!r} (job {slurm.job_id}), minihpc {m!r} (job {ours.job_id})")
    return out


def _names(slurm_env: dict, our_env: dict, lacks: set[str]) -> list[str]:
    """What is wrong with the allowlists: a variable minihpc stopped setting, or now sets."""
    lacking = set(slurm_env) - set(our_env)
    adds = set(our_env) - set(slurm_env)
    out = [f"{n}: Slurm sets it ({slurm_env[n]!r}), minihpc no longer does (a regression)"
           for n in sorted(lacking - lacks)]
    out += [f"{n}: minihpc now sets it ({our_env[n]!r}): take it off the allowlist" for n in sorted(lacks - lacking)]
    out += [f"{n}: minihpc sets it ({our_env[n]!r}), Slurm does not" for n in sorted(adds - MINIHPC_ADDS)]
    out += [f"{n}: minihpc no longer sets it: take it off MINIHPC_ADDS" for n in sorted(MINIHPC_ADDS - adds)]
    return out


def test_the_batch_script_sees_slurms_variables_in_slurms_forms(runs):
    """man sbatch, OUTPUT ENVIRONMENT VARIABLES: the names the batch script sees (less
    BATCH_LACKS), each value in Slurm's form -- SLURM_JOB_NODELIST a hostlist,
    SLURM_TASKS_PER_NODE like ``2`` or ``2(x3)``, SLURM_JOB_ID an integer -- and, on the same
    one-node layout, the same value."""
    pair = runs["env"]
    s, m = pair.slurm.env("batch"), pair.minihpc.env("batch")
    problems = _names(s, m, BATCH_LACKS) + _differences(pair.slurm, s, pair.minihpc, m)
    assert not problems, "the batch script's SLURM_* variables differ from Slurm's:\n" + "\n".join(problems)


def test_srun_tasks_see_slurms_variables_in_slurms_forms(runs):
    """man srun, OUTPUT ENVIRONMENT VARIABLES: each task of ``srun -n 2`` sees Slurm's names
    (less TASK_LACKS), with Slurm's value forms (SLURM_STEP_NODELIST a hostlist,
    SLURM_STEP_TASKS_PER_NODE, SLURM_GTIDS a list of task ids)."""
    pair = runs["env"]
    problems = []
    for procid in (0, 1):
        s, m = pair.slurm.env(f"n2.{procid}"), pair.minihpc.env(f"n2.{procid}")
        found = _names(s, m, TASK_LACKS) + _differences(pair.slurm, s, pair.minihpc, m)
        problems += [f"task {procid}: {p}" for p in found]
    assert not problems, "srun's tasks' SLURM_* variables differ from Slurm's:\n" + "\n".join(problems)


NUMBERING = ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_STEP_ID", "SLURM_GTIDS",
             "SLURM_STEP_TASKS_PER_NODE")


@pytest.mark.parametrize("step, tasks", [("n2", 2), ("default", 2), ("n1", 1)])
def test_srun_numbers_tasks_as_slurm_does(runs, step, tasks):
    """man srun, -n/--ntasks (default: the allocation's tasks, here --ntasks-per-node=2 on one
    node) and -m/--distribution (block), OUTPUT ENVIRONMENT VARIABLES: SLURM_PROCID,
    SLURM_LOCALID, SLURM_NODEID per task, the step's SLURM_NTASKS and SLURM_STEP_ID."""
    pair = runs["env"]

    def numbering(side: Side) -> list[dict]:
        return [{k: side.env(f"{step}.{p}").get(k) for k in NUMBERING} for p in range(tasks)]

    assert not pair.slurm.tagged(f"{step}.{tasks}"), f"Slurm ran more than {tasks} tasks"
    assert not pair.minihpc.tagged(f"{step}.{tasks}"), f"minihpc ran more than {tasks} tasks"
    assert numbering(pair.minihpc) == numbering(pair.slurm), f"srun step {step!r}: minihpc's numbering, then Slurm's"


def test_scontrol_show_hostnames_prints_one_name_a_line(runs):
    """man scontrol, show hostnames: without a list, $SLURM_JOB_NODELIST's hosts, one a line;
    with one, its expansion (``node[01-03,7]`` keeps the zero padding)."""
    pair = runs["env"]
    for side in (pair.slurm, pair.minihpc):
        assert side.tagged("hostnames") == [side.host], f"{side.system}: {side.tagged('hostnames')}"
    expected = ["node01", "node02", "node03", "node7", "login"]
    assert pair.slurm.tagged("hostnames-list") == expected
    assert pair.minihpc.tagged("hostnames-list") == expected


PADDED = pytest.mark.xfail(strict=True, reason="minihpc differs from Slurm: zero-padded names are not compressed "
                                               "(Slurm: node[01-03,07]; minihpc: node01,node02,node03,node07)")
UNSORTED = pytest.mark.xfail(strict=True, reason="minihpc differs from Slurm: show hostlist sorts and dedups "
                                                 "(man scontrol: it does neither; tux2,tux1,tux2 = tux[2,1-2])")


@pytest.mark.parametrize("names", [
    "node1,node2,node3", "n8,n9,n10", "master-node,worker-node-1,worker-node-2", "a1,a2,b1", "n0,n1", "node1",
    pytest.param("node01,node02,node03,node07,login", marks=PADDED),
    pytest.param("n09,n10", marks=PADDED),
    pytest.param("tux2,tux1,tux2", marks=UNSORTED),
])
def test_scontrol_show_hostlist_compresses_as_slurm_does(slurm, cluster, names):
    """man scontrol, show hostlist: the hostlist expression of a list of names -- the form of
    SLURM_JOB_NODELIST (man sbatch, OUTPUT ENVIRONMENT VARIABLES)."""
    theirs = slurm.run(SCONTROL, "show", "hostlist", names).stdout
    ours = cluster.cli("scontrol", "show", "hostlist", names).stdout
    assert ours == theirs, f"scontrol show hostlist {names}: minihpc {ours!r}, Slurm {theirs!r}"


def test_a_task_failing_in_the_last_srun_is_the_jobs_exit_code(runs):
    """man sbatch, -W/--wait: sbatch exits with the job's exit code, the batch script's -- here
    its last command's, an srun whose task 1 exited 3; man srun, RETURN VALUE; the failed task
    is reported as ``srun: error: HOST: task 1: Exited with exit code 3``."""
    pair = runs["exits"]
    assert (pair.slurm.exit_code, pair.slurm.exit_field, pair.slurm.state) == (3, "3:0", "FAILED")
    assert (pair.minihpc.exit_code, pair.minihpc.exit_field, pair.minihpc.state) == (3, "3:0", "FAILED"), \
        pair.minihpc.output
    assert pair.slurm.one("fail.rc") == pair.minihpc.one("fail.rc") == "3"
    failed = ["srun: error: HOST: task 1: Exited with exit code 3"]
    assert pair.minihpc.errors("fail") == pair.slurm.errors("fail") == failed


def test_exit_7_is_the_jobs_exit_code(runs):
    """man sbatch, -W/--wait: ``exit 7`` in the batch script makes sbatch --wait exit 7 and
    ``scontrol show job`` say ExitCode=7:0."""
    pair = runs["exit7"]
    assert (pair.slurm.exit_code, pair.slurm.exit_field, pair.slurm.state) == (7, "7:0", "FAILED")
    assert (pair.minihpc.exit_code, pair.minihpc.exit_field, pair.minihpc.state) == (7, "7:0", "FAILED"), \
        pair.minihpc.output


def test_chdir_is_the_scripts_and_its_tasks_working_directory(runs):
    """man sbatch, -D/--chdir: the batch script runs in that directory; man srun, -D/--chdir
    (default: the current directory) -- its tasks too."""
    pair = runs["exit7"]
    for side in (pair.slurm, pair.minihpc):
        assert (side.one("pwd"), side.one("task-pwd")) == (pair.slurm.one("pwd"),) * 2, side.output
    assert pair.slurm.one("pwd").endswith("/sub")


def test_a_signalled_task_makes_srun_exit_128_plus_the_signal(runs):
    """man srun, RETURN VALUE: "the highest signal (with the high-order bit set in an 8-bit
    integer -- e.g. 128 + signal)": a task killed by SIGKILL makes srun exit 137."""
    pair = runs["exits"]
    assert pair.slurm.one("killed.rc") == pair.minihpc.one("killed.rc") == "137"


# --- differences: fixed ones assert Slurm's behaviour; the xfail(strict) ones are minihpc's by
# design (gang semantics) or not done yet, and turn red when that changes -------------------------


def test_submit_dir_is_where_sbatch_ran(runs):
    """man sbatch, OUTPUT ENVIRONMENT VARIABLES: SLURM_SUBMIT_DIR, "the directory from which
    sbatch was invoked" -- not -D/--chdir's."""
    pair = runs["exit7"]
    assert pair.minihpc.one("submit-dir") == pair.slurm.one("submit-dir"), \
        f"SLURM_SUBMIT_DIR with -D: Slurm {pair.slurm.one('submit-dir')!r}, minihpc {pair.minihpc.one('submit-dir')!r}"


@pytest.mark.xfail(strict=True, reason="by design (issue 12: gang semantics for srun steps): a failed task kills "
                                       "the step's other tasks even without -K (Slurm's KillOnBadExit defaults to 0)")
def test_without_kill_on_bad_exit_the_other_tasks_run_on(runs):
    """man srun, -K/--kill-on-bad-exit: without it (and KillOnBadExit=0, the default) a task
    exiting non-zero does not end the step: task 0 finishes and prints; srun still exits 3."""
    pair = runs["exits"]
    assert pair.slurm.tagged("survivor") == ["0"] and pair.slurm.one("survivor.rc") == "3"
    assert pair.minihpc.tagged("survivor") == ["0"], "minihpc killed task 0 when task 1 exited 3 (no -K given)"


@pytest.mark.xfail(strict=True, reason="by design (gang semantics): srun exits with the first failed task's "
                                       "code, the one that ended the step, not the highest (the killed tasks' 143)")
def test_srun_exits_with_the_highest_task_exit_code(runs):
    """man srun, RETURN VALUE: "srun will return the highest exit code of all tasks run":
    tasks exiting 4 (at once) and 5 (half a second later) make srun exit 5."""
    pair = runs["exits"]
    assert pair.slurm.one("highest.rc") == "5"
    assert pair.minihpc.one("highest.rc") == "5", f"minihpc's srun exited {pair.minihpc.one('highest.rc')}"


def test_a_signalled_task_is_reported_as_slurm_reports_it(runs):
    """man srun, RETURN VALUE: a task that ended by a signal; srun names it with strsignal()'s
    words: ``srun: error: HOST: task 1: Killed``."""
    pair = runs["exits"]
    assert pair.slurm.errors("killed") == ["srun: error: HOST: task 1: Killed"]
    assert pair.minihpc.errors("killed") == pair.slurm.errors("killed")


@pytest.mark.parametrize("step", ["K1", "kill-on-bad-exit", "wait"])
def test_srun_accepts_slurms_option_syntax(runs, step):
    """man srun, -K/--kill-on-bad-exit[=0|1] ("-K1" and not "-K 1") and -W/--wait=<seconds>:
    ``srun -K1 -n 1 true``, ``srun --kill-on-bad-exit=1 -n 1 true``, ``srun -W 5 -n 1 true``
    each run ``true`` and exit 0."""
    pair = runs["exits"]
    assert pair.slurm.one(f"{step}.rc") == "0"
    assert pair.minihpc.one(f"{step}.rc") == "0", pair.minihpc.tagged(f"{step}.err")


ARRAY_SCRIPT = r"""#!/bin/bash
env | grep -E '^SLURM_ARRAY_' | sort | sed -u 's/^/@array@ /'
echo "@err@ to stderr" >&2
"""


def _names_and_env(folder: Path, array_id: int) -> dict[str, list[str]]:
    """Each file's name and its lines, with the array's id written A, a task's own id as its
    offset from it (J+1), the node's name HOST: what two systems can share. Names are
    ``x~j~N~t~A_a~u~%.out`` and ``A_a.err``."""

    def job(text: str) -> str:
        return "A" if text == str(array_id) else f"J+{int(text) - array_id}"

    out = {}
    for path in sorted(folder.iterdir()):
        if path.suffix == ".err":
            a, _, rest = path.name.partition("_")
            name = f"{job(a)}_{rest}"
        else:
            x, j, _host, t, aa, u, pct = path.name.split("~")
            a, _, index = aa.partition("_")
            name = "~".join([x, job(j), "HOST", t, f"{job(a)}_{index}", u, pct])
        lines = [re.sub(r"^(@array@ SLURM_ARRAY_JOB_ID=)(\d+)$", lambda m: m[1] + job(m[2]), line)
                 for line in path.read_text().splitlines()]
        out[name] = sorted(lines)
    return out


def test_array_tasks_and_output_file_names_match_slurms(slurm, cluster, tmp_path):
    """man sbatch, --array (``1,3``: two tasks; real Slurm gives the last the array's job id and
    the first the next id -- not as the man page's example shows) and OUTPUT ENVIRONMENT VARIABLES
    (SLURM_ARRAY_JOB_ID, _TASK_ID, _TASK_COUNT, _TASK_MIN, _TASK_MAX, _TASK_STEP); -o/-e
    "filename pattern": %x %j %N %3t (zero-padded) %A %a %u %%, one file per task, stderr
    apart with -e."""
    (tmp_path / "oracle_array.sh").write_text(ARRAY_SCRIPT)
    results = {}
    for system in ("slurm", "minihpc"):
        out = tmp_path / system
        out.mkdir()
        options = ["--array=1,3", "-N", "1", "-o", f"{out}/%x~%j~%N~%3t~%A_%a~%u~%%.out", "-e", f"{out}/%A_%a.err",
                   tmp_path / "oracle_array.sh"]
        if system == "slurm":
            proc = slurm.run(SBATCH, "--wait", "--parsable", *options)
            array_id = int(proc.stdout.split(";")[0])
        else:
            array_id = int(cluster.cli("submit", "--parsable", *options).stdout)
            cluster.cli("wait", array_id, "--timeout", TIMEOUT, check=False, timeout=TIMEOUT + 30)
            infos = json.loads(cluster.cli("show", array_id, "--json").stdout)  # an array: every task
            assert [(i["id"], i["array_job_id"], i["array_task_id"], i["state"]) for i in infos] == [
                (array_id + 1, array_id, 1, "COMPLETED"), (array_id, array_id, 3, "COMPLETED")]
        results[system] = _names_and_env(out, array_id)
    assert results["minihpc"] == results["slurm"], f"minihpc's files, then Slurm's:\n{results}"


SIGPIPE = pytest.mark.xfail(strict=True, reason=(
    "by design: Slurm's srun ignores SIGPIPE and runs on once its reader went (`srun yes | head -n 1` ran until "
    "`timeout 10` ended it: 124); minihpc's srun ends with SIGPIPE as a Unix filter does (141), its tasks killed"))


@pytest.mark.parametrize("tag", ["heredoc", "captured", "pipe", "input", "label", "stderr", "ofile", "yes",
                                 pytest.param("yes.rc", marks=SIGPIPE)])
def test_sruns_io_is_slurms(runs, tag):
    """man srun, IO Redirection: a heredoc on srun's stdin reaches every task; the tasks' output
    comes back through srun (``$(srun ...)``, pipes, ``2>&1 >/dev/null``); ``--input=1`` gives
    stdin to task 1 alone; ``-l`` labels lines; ``-o io-%t`` writes a file per task; a reader
    that goes ends srun (and its tasks) with SIGPIPE. Lines compared in sorted order: tasks
    write side by side."""
    pair = runs["io"]
    ours, theirs = sorted(pair.minihpc.tagged(tag)), sorted(pair.slurm.tagged(tag))
    assert theirs, f"Slurm printed no @{tag}@ lines:\n{pair.slurm.output}"
    assert ours == theirs, f"@{tag}@: minihpc {ours}, Slurm {theirs}\n{pair.minihpc.output}"
