"""Slurm's node ranges, ``-N MIN-MAX``: parsed where given, started once MIN nodes are free, on
up to MAX, never on a node a job behind it needs."""

import pytest

from minihpc.cli.display import queue_rows, show_lines
from minihpc.client.options import HeaderParser, parse_header, request
from minihpc.core.errors import UsageError
from minihpc.core.models import Job, JobState, NodeStatus, Priority
from minihpc.core.parsing import parse_node_range
from minihpc.core.scheduler import plan

NOW = 1000.0


def nodes(n=3, busy=None):
    busy = busy or {}
    return [NodeStatus(f"n{i}", f"n{i}", alive=True, job=busy.get(f"n{i}")) for i in range(1, n + 1)]


def job(job_id, least=1, most=0, priority=Priority.NORMAL, limit=None):
    return Job(job_id, f"j{job_id}", "u", "s", "s", "x", nodes_requested=least, max_nodes=most,
               priority=priority, time_limit=limit, submitted_at=float(job_id))


def running(job_id, on, limit=None):
    j = job(job_id, len(on), limit=limit)
    j.state, j.nodes, j.started_at = JobState.RUNNING, list(on), NOW - 10
    return j


def test_a_range_is_parsed_as_slurm_writes_it_and_a_bad_one_is_refused_in_one_line():
    assert parse_node_range("3") == (3, 3) and parse_node_range("2-4") == (2, 4) and parse_node_range(5) == (5, 5)
    for text, why in (("4-2", "the most nodes \\(2\\) is less than the least \\(4\\)"), ("0", "at least 1"),
                      ("two", "expected a number of nodes or a range MIN-MAX"), ("2-", "expected a number"),
                      ("-3", "expected a number")):
        with pytest.raises(UsageError, match=why):
            parse_node_range(text)


def test_submit_and_header_lines_take_a_range_and_refuse_a_total_that_cannot_be_split():
    header = parse_header("#!/bin/bash\n#SBATCH -N 2-4\n#SBATCH --ntasks-per-node=2\nsrun x\n")
    given = HeaderParser("submit").parse_args([])
    asked = request(given, header, script="train.py", text="", args=[])
    assert (asked.nodes, asked.max_nodes, asked.tasks_per_node) == (2, 4, 2)
    fixed = request(HeaderParser("submit").parse_args(["-N", "3"]), parse_header(""),
                    script="train.py", text="", args=[])
    assert (fixed.nodes, fixed.max_nodes) == (3, 0)
    with pytest.raises(UsageError, match="--ntasks with a node range \\(-N 2-4\\): give it per node"):
        request(HeaderParser("submit").parse_args(["-N", "2-4", "-n", "8"]), parse_header(""),
                script="train.py", text="", args=[])
    with pytest.raises(UsageError, match="#SBATCH: argument -N/--nodes: invalid --nodes '3-1'"):
        parse_header("#SBATCH --nodes=3-1\n")


def test_a_range_starts_on_as_many_free_nodes_as_it_may_have_and_waits_below_its_least():
    assert plan([job(1, 2, 3)], nodes(3), [], {}, NOW).starts == [(1, ["n1", "n2", "n3"])]
    assert plan([job(1, 2, 5)], nodes(3), [], {}, NOW).starts == [(1, ["n1", "n2", "n3"])]
    busy = nodes(3, busy={"n3": 9})
    assert plan([job(1, 2, 3)], busy, [running(9, ["n3"])], {}, NOW).starts == [(1, ["n1", "n2"])]
    busy = nodes(3, busy={"n2": 9, "n3": 9})
    waits = plan([job(1, 2, 3)], busy, [running(9, ["n2", "n3"])], {}, NOW)
    assert waits.starts == [] and waits.reasons == {1: "Resources"}


def test_a_range_grows_only_onto_nodes_no_job_behind_it_starts_on_or_was_promised():
    # Job 2, behind the range, starts in the same pass: the range has what is left.
    p = plan([job(1, 1, 3, priority=Priority.HIGH), job(2, 1)], nodes(3), [], {}, NOW)
    assert sorted(p.starts) == [(1, ["n1", "n3"]), (2, ["n2"])]
    # n1 is busy until NOW+50 and job 1 (4 nodes) is promised all four then: a range of 30 s
    # grows onto the three idle nodes, one of 100 s cannot even start.
    busy = nodes(4, busy={"n1": 9})
    blocker = running(9, ["n1"], limit=60)
    top = job(1, 4, priority=Priority.HIGH)
    assert plan([top, job(2, 1, 3, limit=30)], busy, [blocker], {}, NOW).starts == [(2, ["n2", "n3", "n4"])]
    assert plan([top, job(2, 1, 3, limit=100)], busy, [blocker], {}, NOW).starts == []
    # A job behind it that waits on a node busy for good holds the others: the range keeps its least.
    forever = nodes(3, busy={"n3": 9})
    p = plan([job(1, 1, 2, priority=Priority.HIGH), job(2, 3)], forever, [running(9, ["n3"])], {}, NOW)
    assert p.starts == [(1, ["n1"])] and p.reasons == {2: "Resources"}


def test_squeue_and_show_print_the_range_and_the_size_it_got():
    waiting = job(1, 2, 4)
    row, = queue_rows([waiting], NOW)
    assert row[5] == "2-4"
    started = running(2, ["n1", "n2", "n3"])
    started.nodes_requested, started.max_nodes = 2, 4
    assert queue_rows([started], NOW)[0][5] == "3"
    lines = [line.split(" = ") for line in show_lines(started)]
    shown = {k.strip(): v for k, v in lines}
    assert (shown["NumNodes"], shown["NodeRange"]) == ("3", "2-4")
    assert "NodeRange" not in {k.strip() for k, _ in (line.split(" = ") for line in show_lines(job(3, 2)))}


def test_elastic_asks_for_a_range_and_show_says_it_and_its_resizes():
    asked = request(HeaderParser("submit").parse_args(["--elastic", "-N", "2-3"]), parse_header(""),
                    script="train.py", text="", args=[])
    assert (asked.nodes, asked.max_nodes, asked.elastic) == (2, 3, True)
    from_header = request(HeaderParser("submit").parse_args([]), parse_header("#MINIHPC --elastic\n#SBATCH -N 1-2\n"),
                          script="train.py", text="", args=[])
    assert from_header.elastic
    with pytest.raises(UsageError, match=r"--elastic needs a node range to change size within \(-N MIN-MAX, e.g. "
                                         r"-N 3-4\), got -N 3"):
        request(HeaderParser("submit").parse_args(["--elastic", "-N", "3"]), parse_header(""),
                script="train.py", text="", args=[])
    started = running(2, ["n1", "n2", "n3"])
    started.nodes_requested, started.max_nodes, started.elastic, started.attempts = 2, 4, True, 1
    started.resize(["n1", "n3"], NOW)
    shown = {k.strip(): v for k, v in (line.split(" = ") for line in show_lines(started))}
    assert (shown["NumNodes"], shown["NodeRange"], shown["Resizes"], shown["Attempts"]) == ("2", "2-4 (elastic)", "1",
                                                                                          "1")
