"""Slurm host lists both ways: ``expand_hostlist`` (``scontrol show hostnames``) and
``compress_hostlist`` (``scontrol show hostlist``), and the client's ``hostnames`` that reads
$SLURM_JOB_NODELIST inside a job."""

import pytest

from minihpc.client.control import hostlist, hostnames
from minihpc.core.errors import UsageError
from minihpc.core.parsing import HOSTLIST_MAX, compress_hostlist, expand_hostlist


@pytest.mark.parametrize(
    "text,names",
    [
        ("worker-node-[1-3],master-node", ["worker-node-1", "worker-node-2", "worker-node-3", "master-node"]),
        ("n[01-03]", ["n01", "n02", "n03"]),  # the lower bound's zero padding is kept
        ("n[08-11]", ["n08", "n09", "n10", "n11"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        ("a[1,3-4]b", ["a1b", "a3b", "a4b"]),  # a suffix after the brackets
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),  # several groups: their product
        ("single", ["single"]),
        ("n[5]", ["n5"]),
        ("a, b\tc", ["a", "b", "c"]),  # commas and whitespace outside brackets separate
        ("a,,b,", ["a", "b"]),  # empty items are skipped, as scontrol does
        ("n[1-2],n1", ["n1", "n2", "n1"]),  # in order, with repeats, as scontrol prints them
        ("", []),
    ],
)
def test_expand_hostlist_as_scontrol_show_hostnames(text, names):
    """scontrol(1), show hostnames: "takes an optional hostlist expression as input and writes
    a list of individual host names to standard output (one per line)"."""
    assert expand_hostlist(text) == names


@pytest.mark.parametrize(
    "text,says",
    [
        ("n[1-3", "'[' without ']'"),
        ("n1]", "']' without '['"),
        ("n[[1-2]]", "nested '['"),
        ("n[3-1]", "ends before it starts"),
        ("n[a-b]", "bad range 'a-b'"),
        ("n[]", "bad range ''"),
        ("n[1-2-3]", "bad range '1-2-3'"),
        ("n[0-70000]", f"more than {HOSTLIST_MAX} hosts"),
        ("a[0-999]b[0-999]", f"more than {HOSTLIST_MAX} hosts"),
    ],
)
def test_a_bad_hostlist_is_one_line_naming_it(text, says):
    with pytest.raises(UsageError, match="host list") as info:
        expand_hostlist(text)
    assert says in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "names",
    [
        ["master-node", "worker-node-1", "worker-node-2"],
        ["n1", "n3", "n4", "n5"],
        ["n7"],
        ["worker-node-1", "worker-node-2", "master-node"],
        ["n01", "n02"],  # compress leaves zero-padded names as they are; they still round-trip
        [],
    ],
)
def test_expand_undoes_compress(names):
    """scontrol(1): show hostlist "takes a list of host names and prints the hostlist
    expression for them (the inverse of hostnames)"."""
    assert expand_hostlist(compress_hostlist(names)) == names


def test_hostnames_reads_slurm_job_nodelist_without_a_cluster():
    """scontrol(1): show hostnames "By default, the SLURM_JOB_NODELIST environment variable is
    used" -- inside a job, where there is no Redis to ask."""
    env = {"SLURM_JOB_NODELIST": "master-node,worker-node-[1-2]"}
    assert hostnames(None, env) == ["master-node", "worker-node-1", "worker-node-2"]
    assert hostnames("x[1-2]", env) == ["x1", "x2"]  # a list given wins
    with pytest.raises(UsageError, match=r"\$SLURM_JOB_NODELIST is not set"):
        hostnames(None, {})
    with pytest.raises(UsageError, match="names no host"):
        hostnames(",", env)


def test_hostlist_compresses_host_lists():
    assert hostlist(["worker-node-2,worker-node-1", "master-node"]) == "worker-node-[1-2],master-node"
