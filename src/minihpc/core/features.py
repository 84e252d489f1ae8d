"""Node features and ``--constraint``, as Slurm has them: slurm.conf's ``NodeName=... Features=``
gives nodes their features, and ``sbatch -C/--constraint`` asks for nodes that have them.

minihpc reads the features from one setting (MINIHPC_NODE_FEATURES), ``HOSTLIST=FEATURE,...``
items separated by ``;``: ``worker-node-[1-2]=ib,big;master-node=small``. A constraint is a
feature name, or names joined with ``&`` (and) and ``|`` (or), with parentheses
(``(ib|opa)&big``), as ``man sbatch`` writes them; each node must satisfy it on its own.
Slurm's matching OR (``[a|b]``) and counts (``a*2``) are refused with one line naming them.
"""

from __future__ import annotations

import functools
import re

from minihpc.core.errors import UsageError
from minihpc.core.parsing import expand_hostlist

_NAME = re.compile(r"[A-Za-z0-9_.:+-]+")
_TOKEN = re.compile(r"\s*([A-Za-z0-9_.:+-]+|[&|()]|\S)")


def parse_features(spec: str) -> dict[str, frozenset[str]]:
    """``worker-node-[1-2]=ib,big;master-node=small`` -> node -> features (a node listed
    twice has both lists' features); UsageError naming the first bad item."""
    out: dict[str, set[str]] = {}
    for item in (i.strip() for i in spec.split(";") if i.strip()):
        hosts, eq, names = (part.strip() for part in item.partition("="))
        features = [f.strip() for f in names.split(",") if f.strip()]
        if not eq or not hosts or not features or not all(_NAME.fullmatch(f) for f in features):
            raise UsageError(f"invalid node features {item!r}: expected HOSTLIST=FEATURE[,FEATURE...] "
                             "such as worker-node-[1-2]=ib,big")
        for node in expand_hostlist(hosts):
            out.setdefault(node, set()).update(features)
    return {node: frozenset(f) for node, f in out.items()}


def features_record(features: dict[str, frozenset[str]]) -> str:
    """The setting's form again (one item per node), for the cluster record."""
    return ";".join(f"{node}={','.join(sorted(f))}" for node, f in sorted(features.items()))


def check_constraint(text: str) -> str:
    """``text`` if it is a constraint minihpc can evaluate, else UsageError naming why."""
    if "[" in text or "*" in text:
        raise UsageError(f"--constraint={text}: Slurm's matching OR ([a|b]) and counts (a*2) are not supported; "
                         "use & | and parentheses")
    _Parser(text).parse()
    return text


def satisfies(constraint: str, features: frozenset[str]) -> bool:
    """Whether a node with ``features`` meets ``constraint`` ("" : any node)."""
    return not constraint or _compiled(constraint)(features)


@functools.lru_cache(maxsize=1024)
def _compiled(constraint: str):
    """The test of ``constraint``, parsed once: the scheduler asks it of every pending job and
    node at each pass (with 1,000 jobs on 200 nodes, parsing it each time took 30% of a pass)."""
    return _Parser(constraint).parse()


class _Parser:
    """expr := term ('|' term)* ; term := factor ('&' factor)* ; factor := NAME | '(' expr ')'."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = _TOKEN.findall(text)
        self.i = 0

    def parse(self):
        if not self.tokens:
            raise UsageError("--constraint needs a feature name")
        test = self._expr()
        if self.i != len(self.tokens):
            self._bad(f"unexpected {self.tokens[self.i]!r}")
        return test

    def _bad(self, what: str):
        raise UsageError(f"invalid --constraint={self.text}: {what} (expected names joined by & and |, "
                         "with parentheses)")

    def _peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _expr(self):
        parts = [self._term()]
        while self._peek() == "|":
            self.i += 1
            parts.append(self._term())
        return lambda f: any(p(f) for p in parts)

    def _term(self):
        parts = [self._factor()]
        while self._peek() == "&":
            self.i += 1
            parts.append(self._factor())
        return lambda f: all(p(f) for p in parts)

    def _factor(self):
        token = self._peek()
        if token is None:
            self._bad("it ends too soon")
        self.i += 1
        if token == "(":
            inner = self._expr()
            if self._peek() != ")":
                self._bad("a '(' is not closed")
            self.i += 1
            return inner
        if not _NAME.fullmatch(token):
            self._bad(f"unexpected {token!r}")
        return lambda f: token in f
