"""sinfo's layout as pure functions (core.sinfo_layout, core.sinfo_format): nodes grouped by
partition and state, sinfo's default, -N, -s and -l formats, the ``-o`` language with its
widths, the -n/-t/-p filters, and which name prints Slurm's layout by default."""

import pytest

from minihpc.cli import slurm
from minihpc.cli.main import build_parser
from minihpc.core.errors import UsageError
from minihpc.core.models import NodeStatus
from minihpc.core.node_formats import hostlist, slurm_state
from minihpc.core.partitions import Partitions, parse
from minihpc.core.sinfo_format import parse_format, sinfo_lines
from minihpc.core.sinfo_layout import default_format, node_filter, parse_states, records

GIB = 1 << 30


def node(name, alive=True, job=None, drain=None, cpus=4, mem=8, gpus=0):
    return NodeStatus(name, "127.0.0.1", alive, job=job, drain_reason=drain, cpus=cpus, memory_bytes=mem * GIB, gpus=gpus)


IDLE3 = [node("master-node"), node("worker-node-1"), node("worker-node-2")]
MIXED = [node("master-node"), node("worker-node-1", job=7), node("worker-node-2", drain="disk"),
         node("worker-node-3", alive=False), node("worker-node-10")]


def sinfo(nodes, partitions=None, fmt=None, **kw):
    partitions = partitions or Partitions()
    by_node = kw.get("by_node", False)
    return sinfo_lines(fmt or default_format(False, by_node, False), nodes, partitions, **kw)


# -- the default layout ---------------------------------------------------------------------------

def test_the_local_clusters_three_idle_nodes_are_one_line():
    assert sinfo(IDLE3) == [
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST",
        "main*        up   infinite      3   idle master-node,worker-node-[1-2]",
    ]


def test_one_line_per_state_in_slurms_order_drained_and_down_first():
    assert sinfo(MIXED)[1:] == [
        "main*        up   infinite      1  down* worker-node-3",
        "main*        up   infinite      1  drain worker-node-2",
        "main*        up   infinite      1  alloc worker-node-1",
        "main*        up   infinite      2   idle master-node,worker-node-10",
    ]


def test_a_node_is_listed_under_each_of_its_partitions_in_configured_order():
    parts = parse("gpu=worker-node-[2-3];debug=worker-node-[1-2]", default="debug")
    nodes = [node("worker-node-1"), node("worker-node-2", drain="fan"), node("worker-node-3")]
    assert sinfo(nodes, parts) == [
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST",
        "gpu          up   infinite      1  drain worker-node-2",
        "gpu          up   infinite      1   idle worker-node-3",
        "debug*       up   infinite      1  drain worker-node-2",
        "debug*       up   infinite      1   idle worker-node-1",
    ]


def test_a_long_partition_name_widens_the_column_and_an_empty_one_shows_n_a():
    parts = parse("a-very-long-name=worker-node-1;empty=nowhere-1")
    out = sinfo([node("master-node"), node("worker-node-1")], parts)
    assert out == [
        "PARTITION        AVAIL  TIMELIMIT  NODES  STATE NODELIST",
        "main*               up   infinite      2   idle master-node,worker-node-1",
        "a-very-long-name    up   infinite      1   idle worker-node-1",
        "empty               up   infinite      0    n/a ",
    ]


def test_the_states_sinfo_prints():
    states = {n.name: slurm_state(n) for n in [*MIXED, node("busy", job=1, drain="x"), node("gone", alive=False, drain="y")]}
    assert {k: (s.compact, s.long, s.complete) for k, s in states.items()} == {
        "master-node": ("idle", "idle", "IDLE"),
        "worker-node-1": ("alloc", "allocated", "ALLOCATED"),
        "worker-node-2": ("drain", "drained", "IDLE+DRAIN"),
        "worker-node-3": ("down*", "down*", "DOWN+NOT_RESPONDING"),
        "worker-node-10": ("idle", "idle", "IDLE"),
        "busy": ("drng", "draining", "ALLOCATED+DRAIN"),
        "gone": ("drain*", "drained*", "DOWN+DRAIN+NOT_RESPONDING"),
    }


def test_hostlists_are_compressed_in_natural_order():
    assert hostlist([node("worker-node-10"), node("worker-node-2"), node("master-node"), node("worker-node-1")]) \
        == "master-node,worker-node-[1-2,10]"


# -- -N, -s, -l -------------------------------------------------------------------------------------

def test_node_oriented_listing():
    assert sinfo(MIXED[:3], by_node=True) == [
        "NODELIST       NODES PARTITION STATE ",
        "master-node        1 main*     idle  ",
        "worker-node-1      1 main*     alloc ",
        "worker-node-2      1 main*     drain ",
    ]


def test_summarize_counts_allocated_idle_other_total():
    out = sinfo_lines(default_format(True, False, False), MIXED, Partitions())
    assert out == ["PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T)  NODELIST",
                   "main*        up   infinite          1/2/2/5  master-node,worker-node-[1-3,10]"]


def test_long_forms_print_only_what_minihpc_knows():
    part = sinfo_lines(default_format(False, False, True), IDLE3, Partitions())
    assert part[0].split() == ["PARTITION", "AVAIL", "TIMELIMIT", "JOB_SIZE", "ROOT", "OVERSUBS", "GROUPS", "NODES",
                               "STATE", "NODELIST"]
    assert part[1].split() == ["main*", "up", "infinite", "1-infinite", "no", "EXCLUSIV", "all", "3", "idle",
                               "master-node,worker-node-[1-2]"]
    by_node = sinfo_lines(default_format(False, True, True), MIXED[2:4], Partitions(), by_node=True)
    assert by_node[0].split() == ["NODELIST", "NODES", "PARTITION", "STATE", "CPUS", "MEMORY", "AVAIL_FE", "REASON"]
    assert by_node[1].split() == ["worker-node-2", "1", "main*", "drained", "4", "8192", "(null)", "disk"]
    assert by_node[2].split()[:7] == ["worker-node-3", "1", "main*", "down*", "4", "8192", "(null)"]
    assert by_node[2].endswith("Not responding      ")


# -- -o --------------------------------------------------------------------------------------------

def test_format_fields_widths_and_justification():
    assert sinfo(IDLE3, fmt="%N %t", header=False) == ["master-node,worker-node-[1-2] idle"]
    assert sinfo(IDLE3, fmt="%.10P|%-8t|%5D") == [" PARTITION|STATE   |NODES", "     main*|idle    |3    "]
    assert sinfo(IDLE3, fmt="[%4P]") == ["[PART]", "[mai*]"]  # the default's * survives the cut
    assert sinfo(IDLE3, fmt="%R %a %l %c %m %G %f %E %C %F %A %D", header=False) == [
        "main up infinite 4 8192 (null) (null) none 0/12/0/12 0/3/0/3 0/3 3"]


def test_format_groups_only_by_what_it_prints():
    nodes = [node("a1", cpus=4), node("a2", cpus=8, gpus=2), node("a3", job=3)]
    assert sinfo(nodes, fmt="%P %c %D", header=False) == ["main* 4+ 3"]  # no %t: one line for every state
    assert sinfo(nodes, fmt="%P %G %D %t", header=False) == ["main* (null) 1 alloc", "main* (null) 1 idle",
                                                             "main* gpu:2 1 idle"]
    parts = parse("x=a[1-2];y=a[2-3]", default="x")
    assert sinfo(nodes, parts, fmt="%D %t", header=False) == ["2 idle", "1 alloc"]  # no %P: a2 counted once


def test_format_refuses_what_minihpc_cannot_fill_and_unknown_letters():
    with pytest.raises(UsageError, match=r"%z \(S:C:T\) is not known to minihpc"):
        parse_format("%N %z")
    with pytest.raises(UsageError, match="format field %q"):
        parse_format("%N %q")
    with pytest.raises(UsageError, match="no %-field"):
        parse_format("hello")
    prefix, columns = parse_format(">%.9P%%%#N<")
    assert prefix == ">" and [(c.field, c.width, c.right, c.suffix, c.auto) for c in columns] == [
        ("P", 9, True, "%", False), ("N", 0, False, "<", True)]


def test_features_print_and_split_lines():
    if "features" not in Partitions.__dataclass_fields__:
        pytest.skip("partitions carry no node features in this tree")
    parts = parse("", "main", "worker-node-[1-2]=ib,big")
    assert sinfo(IDLE3, parts, fmt="%f|%b|%N", header=False) == ["(null)|(null)|master-node",
                                                                  "big,ib|big,ib|worker-node-[1-2]"]
    assert sinfo(IDLE3, parts, fmt="%D", header=False) == ["3"]


# -- -p, -n, -t ----------------------------------------------------------------------------------

def test_filters_by_partition_nodes_and_states():
    parts = parse("debug=worker-node-[1-2]")
    assert sinfo(MIXED, parts, only=["debug"], header=False) == [
        "debug        up   infinite      1  drain worker-node-2", "debug        up   infinite      1  alloc worker-node-1"]
    assert sinfo(MIXED, wanted=node_filter("worker-node-[1-2]", None), fmt="%N", header=False) \
        == ["worker-node-[1-2]"]  # no %t: their states do not split them
    assert sinfo(MIXED, wanted=node_filter(None, "IDLE,down"), fmt="%t %N", header=False) \
        == ["down* worker-node-3", "idle master-node,worker-node-10"]
    assert sinfo(MIXED, wanted=node_filter(None, "mix"), header=False) == ["main*        up   infinite      0    n/a "]
    assert sinfo(MIXED, wanted=node_filter(None, "all"), fmt="%D", header=False) == ["5"]


def test_drain_states_match_as_sinfo_matches_them():
    nodes = [node("a1", drain="x"), node("a2", drain="y", job=4), node("a3", job=5), node("a4")]

    def names(states):
        return [n.name for r in records(nodes, Partitions(), "N", wanted=node_filter(None, states)) for n in r.nodes]

    assert names("drain") == ["a1", "a2"]
    assert names("drained") == ["a1"] and names("drng") == ["a2"] and names("draining") == ["a2"]
    assert names("alloc") == ["a2", "a3"]  # a draining node is still allocated
    assert names("idle") == ["a4"]  # a drained node is not idle
    with pytest.raises(UsageError, match="Bad state string: 'busy'"):
        parse_states("idle,busy")


# -- which name prints Slurm's layout ----------------------------------------------------------------

def test_sinfo_is_told_from_minihpc_nodes_by_the_name_it_runs_under():
    assert slurm.aliased_parser("sinfo").parse_args(["nodes", "-h"]).slurm == "sinfo"
    args = build_parser().parse_args(["nodes", "-h", "-p", "debug", "-n", "w[1-2]", "-t", "idle", "-o", "%N", "-s"])
    assert getattr(args, "slurm", None) is None
    assert (args.noheader, args.partition, args.nodes, args.states, args.format, args.summarize) == (
        True, "debug", "w[1-2]", "idle", "%N", True)
