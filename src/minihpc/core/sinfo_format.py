"""What sinfo's ``-o/--format`` prints, as pure functions: the format's fields, each record's
values and sinfo's column widths.

sinfo(1) ``-o "%[[.]size]type[suffix]"``: text before the first ``%`` is printed first, text
after a field follows it; ``.`` right-justifies, a size pads and cuts (the NODELIST header is
never cut). ``-`` (``%-10P``) is taken as the default, left-justified (sinfo itself reads it
as a field of its own); ``%%`` is a literal ``%``. ``#`` as the size (``%#P``) sizes the
column to its longest value, at least 9, as sinfo's own default formats do. A field sinfo has
but minihpc cannot fill (its nodes' sockets, disk, weight, load...) is refused with one line
naming it: a script must not read a made-up value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from minihpc.core.errors import UsageError
from minihpc.core.models import NodeStatus
from minihpc.core.node_formats import allocated_cpus, gres, hostlist, memory_mib, reason, slurm_state
from minihpc.core.partitions import Partitions
from minihpc.core.sinfo_layout import Record, records

MIN_AUTO_WIDTH = 9
"""sinfo's least width for a sized PARTITION or NODELIST column."""


def _range(values: list[int]) -> str:
    """sinfo's value of a record's nodes: ``4``, or ``4+`` when some have more."""
    if not values:
        return "0"
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}+"


def _partition(r: Record) -> str:
    return r.partition + ("*" if r.default else "")


def _state(r: Record, long: bool) -> str:
    if not r.nodes:
        return "n/a"
    state = slurm_state(r.nodes[0])
    return state.long if long else state.compact


def _counts(r: Record) -> tuple[int, int, int, int]:
    """Nodes allocated, idle, other (drained or DOWN), total: sinfo's %F."""
    alloc = sum(1 for n in r.nodes if n.alive and n.job is not None)
    idle = sum(1 for n in r.nodes if n.alive and n.job is None and n.drain_reason is None)
    return alloc, idle, len(r.nodes) - alloc - idle, len(r.nodes)


def _cpus(r: Record) -> tuple[int, int, int, int]:
    """CPUs allocated, idle, other (of drained or DOWN nodes), total: sinfo's %C."""
    alloc = sum(allocated_cpus(n) for n in r.nodes)
    other = sum(n.cpus - allocated_cpus(n) for n in r.nodes if n.drain_reason is not None or not n.alive)
    total = sum(n.cpus for n in r.nodes)
    return alloc, total - alloc - other, other, total


def _first(r: Record, value: Callable[[NodeStatus], str | None], empty: str) -> str:
    return (value(r.nodes[0]) if r.nodes else None) or empty


FIELDS: dict[str, tuple[str, Callable[[Record], str]]] = {
    "P": ("PARTITION", _partition),
    "R": ("PARTITION", lambda r: r.partition),
    "a": ("AVAIL", lambda r: "up"),
    "l": ("TIMELIMIT", lambda r: "infinite"),
    "s": ("JOB_SIZE", lambda r: "1-infinite"),
    "r": ("ROOT", lambda r: "no"),
    "h": ("OVERSUBSCRIBE", lambda r: "EXCLUSIVE"),
    "g": ("GROUPS", lambda r: "all"),
    "D": ("NODES", lambda r: str(len(r.nodes))),
    "A": ("NODES(A/I)", lambda r: "{}/{}".format(*_counts(r)[:2])),
    "F": ("NODES(A/I/O/T)", lambda r: "{}/{}/{}/{}".format(*_counts(r))),
    "t": ("STATE", lambda r: _state(r, long=False)),
    "T": ("STATE", lambda r: _state(r, long=True)),
    "N": ("NODELIST", lambda r: hostlist(r.nodes)),
    "c": ("CPUS", lambda r: _range([n.cpus for n in r.nodes])),
    "C": ("CPUS(A/I/O/T)", lambda r: "{}/{}/{}/{}".format(*_cpus(r))),
    "m": ("MEMORY", lambda r: _range([memory_mib(n) for n in r.nodes])),
    "G": ("GRES", lambda r: _first(r, gres, "(null)")),
    "f": ("AVAIL_FEATURES", lambda r: r.features),
    "b": ("ACTIVE_FEATURES", lambda r: r.features),
    "E": ("REASON", lambda r: _first(r, reason, "none")),
}
"""sinfo's %-letters minihpc can fill: (header, value of a record). Partitions here are always
up, have no time or size limit, take every user and give a job whole nodes; a node's features
are always active."""

NOT_KNOWN = {
    "B": "MAX_CPUS_PER_NODE", "d": "TMP_DISK", "e": "FREE_MEM", "H": "TIMESTAMP",
    "I": "PRIO_JOB_FACTOR", "L": "DEFAULTTIME", "M": "PREEMPT_MODE", "n": "HOSTNAMES", "o": "NODE_ADDR",
    "O": "CPU_LOAD", "p": "PRIO_TIER", "S": "ALLOCNODES", "u": "USER", "U": "USER", "v": "VERSION",
    "V": "CLUSTER", "w": "WEIGHT", "X": "SOCKETS", "Y": "CORES", "Z": "THREADS", "z": "S:C:T",
}
"""sinfo's letters minihpc cannot fill (for -R's user and time: ``sinfo -R``)."""


@dataclass(frozen=True)
class Column:
    field: str  # the %-letter
    width: int = 0  # 0: the value as it is
    right: bool = False
    suffix: str = ""  # the literal text after the field
    auto: bool = False  # ``%#P``: as wide as its longest value


_TOKEN = re.compile(r"%%|%(?P<right>\.)?-?(?P<width>#|\d*)(?P<field>.?)", re.S)


def _column(m: re.Match, text: str) -> Column:
    letter = m["field"]
    if letter in NOT_KNOWN:
        raise UsageError(f"invalid --format {text!r}: %{letter} ({NOT_KNOWN[letter]}) is not known to minihpc; "
                         f"it fills {' '.join('%' + k for k in FIELDS)}")
    if letter not in FIELDS:
        what = f"format field %{letter}" if letter else "a '%' with no field after it"
        raise UsageError(f"invalid --format {text!r}: {what}; expected one of {' '.join('%' + k for k in FIELDS)}")
    auto = m["width"] == "#"
    return Column(letter, 0 if auto else int(m["width"] or 0), bool(m["right"]), auto=auto)


def parse_format(text: str) -> tuple[str, list[Column]]:
    """sinfo's ``-o`` string -> (the text before the first field, the fields)."""
    prefix, columns, last = "", [], 0
    for m in _TOKEN.finditer(text):
        literal = text[last:m.start()] + ("%" if m.group(0) == "%%" else "")
        last = m.end()
        if columns:
            c = columns[-1]
            columns[-1] = Column(c.field, c.width, c.right, c.suffix + literal, c.auto)
        else:
            prefix += literal
        if m.group(0) != "%%":
            columns.append(_column(m, text))
    if columns:
        c = columns[-1]
        columns[-1] = Column(c.field, c.width, c.right, c.suffix + text[last:], c.auto)
    else:
        raise UsageError(f"invalid --format {text!r}: no %-field in it (e.g. \"%P %a %l %D %t %N\")")
    return prefix, columns


def _cell(text: str, width: int, right: bool, cut: bool = True) -> str:
    """sinfo's _print_str(): right-justified or cut, then padded, to ``width`` (0: as it is)."""
    if not width:
        return text
    if right:
        padded = text.rjust(width)
        return padded[:width] if cut else padded
    return (text[:width] if cut else text).ljust(width)


def _partition_cell(r: Record, width: int, right: bool) -> str:
    """%P of a default partition keeps its ``*`` even where the name is cut (``verylongn*``)."""
    name = r.partition if not r.default else (
        r.partition + "*" if not width or len(r.partition) < width else r.partition[:width - 1] + "*")
    return _cell(name, width, right)


def _widths(columns: list[Column], rows: list[Record]) -> list[int]:
    """Each column's width, sized ones (``#``) from their longest value."""
    return [max([MIN_AUTO_WIDTH] + [len(FIELDS[c.field][1](r)) for r in rows]) if c.auto else c.width
            for c in columns]


def lines(prefix: str, columns: list[Column], rows: list[Record], header: bool = True) -> list[str]:
    """The records as sinfo prints them, under a header line unless ``header`` is False."""
    widths = _widths(columns, rows)
    out = []
    if header:
        out.append(prefix + "".join(_cell(FIELDS[c.field][0], w, c.right, cut=c.field != "N") + c.suffix
                                    for c, w in zip(columns, widths)))
    for r in rows:
        out.append(prefix + "".join(
            (_partition_cell(r, w, c.right) if c.field == "P" else _cell(FIELDS[c.field][1](r), w, c.right)) + c.suffix
            for c, w in zip(columns, widths)))
    return out


def sinfo_lines(fmt: str, nodes: list[NodeStatus], partitions: Partitions, by_node: bool = False,
                header: bool = True, wanted: Callable[[NodeStatus], bool] = lambda n: True,
                only: list[str] | None = None) -> list[str]:
    """sinfo's output for format ``fmt`` (see :mod:`minihpc.core.sinfo_layout` for the rest)."""
    prefix, columns = parse_format(fmt)
    letters = "".join(c.field for c in columns)
    return lines(prefix, columns, records(nodes, partitions, letters, by_node, wanted, only), header)
